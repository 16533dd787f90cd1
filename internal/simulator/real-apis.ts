import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { SimProfile, Simulator, SimulatorSupplierOptions } from "./types.js";

/**
 * The simulator set up like the real APIs the project ships connectors for
 * (`config/suppliers/etm.json`, `iek.json`, `systeme.json`, `rs24.json`, `dkc.json`;
 * docs/cookbook.md):
 * the profile's routes behind that API's authentication and rate limit. The
 * demo, the end-to-end tests and the benchmark use these, so all three talk to
 * the same fake ETM, IEK and Systeme Electric.
 *
 * - ETM: `POST /api/v1/user/login?log=…&pwd=…` → `data.session`, sent back as
 *   `session-id`; an unknown or expired session is a 200 with `status.code` 403;
 *   sessions last 8 h; logins closer than 2 minutes are refused 429; data
 *   requests at most 1 a second (the bucket holds 2, so a client pacing at exactly
 *   1/s is never refused for timer jitter, while 2/s sustained is).
 * - IEK: HTTP Basic; no rate limit is published: 10 a second here (an assumption).
 * - Systeme Electric: `accessCode` in the query of every request; no published
 *   rate limit either: 10 a second here (an assumption).
 * - RS24 (Русский Свет): HTTP Basic; 150 requests per 30 s per IP are published, served
 *   here as 5 a second with a bucket of 10.
 * - DKC: `GET /auth.access.token/{masterKey}` → `{access_token}`, sent back in the
 *   `AccessToken` header; an unknown token is 401; no rate limit is published: 10 a second
 *   here (an assumption).
 */

/** Credentials the simulator expects; the demo and tests pass the same values to the connectors by env. */
export interface RealApiCredentials {
  etm: { login: string; password: string };
  iek: { username: string; password: string };
  systeme: { accessCode: string };
  rs24?: { username: string; password: string };
  dkc?: { masterKey: string };
}

/** Simulator options of `profile` with `size` offers, behind that API's auth and rate limit. */
export function realApiSupplier<P extends SimProfile & keyof RealApiCredentials>(
  profile: P,
  size: number,
  credentials: NonNullable<RealApiCredentials[P]>,
): SimulatorSupplierOptions {
  if (profile === "etm") {
    const c = credentials as RealApiCredentials["etm"];
    return {
      size,
      profile,
      auth: {
        type: "session",
        loginPath: "/api/v1/user/login",
        credentialsIn: "query",
        credentials: { log: c.login, pwd: c.password },
        tokenIn: { body: "data.session" },
        sendAs: { query: "session-id" },
        expireAfterMs: 8 * 3_600_000,
        expiredAs: "body403",
        minLoginIntervalMs: 120_000,
      },
      rateLimit: { requestsPerSecond: 1, burst: 2 },
    };
  }
  if (profile === "iek") {
    const c = credentials as RealApiCredentials["iek"];
    return {
      size,
      profile,
      auth: { type: "basic", username: c.username, password: c.password },
      rateLimit: { requestsPerSecond: 10, burst: 10 },
    };
  }
  if (profile === "rs24") {
    const c = credentials as NonNullable<RealApiCredentials["rs24"]>;
    return {
      size,
      profile,
      auth: { type: "basic", username: c.username, password: c.password },
      rateLimit: { requestsPerSecond: 5, burst: 10 },
    };
  }
  if (profile === "dkc") {
    const c = credentials as NonNullable<RealApiCredentials["dkc"]>;
    return {
      size,
      profile,
      auth: {
        type: "session",
        loginPath: "/auth.access.token",
        loginMethod: "GET",
        credentialsIn: "path",
        credentials: { masterKey: c.masterKey },
        tokenIn: { body: "access_token" },
        tokenOnly: true,
        sendAs: { header: "AccessToken" },
      },
      rateLimit: { requestsPerSecond: 10, burst: 10 },
    };
  }
  const c = credentials as RealApiCredentials["systeme"];
  return {
    size,
    profile,
    auth: { type: "query", param: "accessCode", value: c.accessCode },
    rateLimit: { requestsPerSecond: 10, burst: 10 },
  };
}

/** The env vars the shipped connector files name for their secrets. */
export function realApiEnv(credentials: RealApiCredentials): Record<string, string> {
  return {
    ETM_LOGIN: credentials.etm.login,
    ETM_PASSWORD: credentials.etm.password,
    IEK_USERNAME: credentials.iek.username,
    IEK_PASSWORD: credentials.iek.password,
    SYSTEME_ACCESS_CODE: credentials.systeme.accessCode,
    ...(credentials.rs24
      ? { RS24_LOGIN: credentials.rs24.username, RS24_PASSWORD: credentials.rs24.password }
      : {}),
    ...(credentials.dkc ? { DKC_MASTER_KEY: credentials.dkc.masterKey } : {}),
  };
}

/**
 * Copies the connector files `<name>.json` of `fromDir` into `toDir` with `baseUrl`
 * replaced by the simulator's URL for that supplier, and nothing else changed: the
 * shipped definitions point at the real hosts, and this is how the demo, the tests and
 * the benchmark aim them at the simulator instead.
 */
export function pointConnectorsAt(
  sim: Pick<Simulator, "baseUrl">,
  fromDir: string,
  toDir: string,
  names: readonly string[],
): void {
  mkdirSync(toDir, { recursive: true });
  for (const name of names) {
    const definition = JSON.parse(readFileSync(join(fromDir, `${name}.json`), "utf8")) as Record<
      string,
      unknown
    >;
    writeFileSync(
      join(toDir, `${name}.json`),
      `${JSON.stringify({ ...definition, baseUrl: sim.baseUrl(name) }, null, 2)}\n`,
    );
  }
}

/**
 * Writes the SKU list file the ETM connector reads: every live code of the simulator's
 * `supplier`. Written aside and renamed, so a run reading it meanwhile sees the old list or
 * the new one, never half of one.
 */
export function writeSkuFile(sim: Pick<Simulator, "offers">, supplier: string, path: string): number {
  const codes = sim.offers(supplier).map((r) => r.article);
  writeFileSync(
    `${path}.tmp`,
    `# every live code of the simulator's ${supplier} catalog\n${codes.join("\n")}\n`,
  );
  renameSync(`${path}.tmp`, path);
  return codes.length;
}
