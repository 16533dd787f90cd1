import { readFileSync } from "node:fs";
import { isIPv6 } from "node:net";
import { resolve } from "node:path";
import { formatDuration, parseDuration } from "../platform/duration.js";
import { ConfigError } from "../platform/errors.js";
import { redactUrlCredentials, stripControl } from "../platform/redact.js";
import { parseSuppliers, quoteToken, SUPPLIERS_VAR } from "./suppliers.js";
import type { Config } from "./types.js";
import { parseEventsConfig } from "./webhook-env.js";

/**
 * The environment → {@link Config}. This module never touches `process.env`:
 * the entry point passes it in, which keeps `loadConfig` a pure function of its
 * arguments (and tests free of ambient state).
 *
 * An optional variable set to the empty string counts as unset (compose files
 * often write `VAR=${VAR:-}`). The retired variables are the exception: being
 * present at all, even empty, is an error.
 */

/** Variables of the old single-interval design; their presence reveals a half-migrated deployment. */
const RETIRED_VARS = ["SUPPLIER_SYNC_TICK_INTERVAL", "SUPPLIER_SYNC_ENABLED"] as const;

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

const DEFAULTS = {
  connectorsDir: "config/suppliers",
  httpAddr: "127.0.0.1:9464",
  maxConcurrentTicks: 4,
  dbPoolMax: 8,
  shutdownTimeout: "25s",
  retryBackoff: "1m",
  logLevel: "info",
  lease: "advisory",
  leaseTtl: "60s",
  leaseDeadPeer: "30s",
} as const;

/** `SUPPLIER_SYNC_LEASE` values (docs/operations.md, Choosing the lease). */
export const LEASE_KINDS = ["advisory", "table"] as const;

/** Bounds that keep every value inside what timers and pools can honour (setTimeout caps near 24.8 days). */
const MAX_COUNT = 1_000;
const MAX_SHUTDOWN_TIMEOUT_MS = 3_600_000;
const MAX_RETRY_BACKOFF_MS = 86_400_000;
/** A table lease longer than this would leave a killed holder's supplier idle for over an hour. */
const MAX_LEASE_TTL_MS = 3_600_000;
/**
 * `SUPPLIER_SYNC_LEASE_DEAD_PEER` bounds (docs/operations.md, Choosing the lease): under 3 s
 * a busy network would drop healthy sessions (the keepalive probes are whole seconds);
 * over an hour leaves a partitioned holder's supplier idle for longer than that.
 */
const MIN_LEASE_DEAD_PEER_MS = 3_000;
const MAX_LEASE_DEAD_PEER_MS = 3_600_000;

/** libpq connection parameters that carry a secret when given in the URL query. */
const SECRET_QUERY_PARAMS = new Set(["password", "sslpassword"]);

/**
 * Log-safe form of a database URL: user info and a `password=` query parameter
 * replaced by `***`. Also safe on text that is not a URL at all.
 */
export function redactDatabaseUrl(text: string): string {
  const clean = stripControl(text);
  try {
    const url = new URL(clean);
    if (url.username || url.password) {
      url.username = "***";
      url.password = "";
    }
    for (const key of [...url.searchParams.keys()]) {
      if (SECRET_QUERY_PARAMS.has(key.toLowerCase())) url.searchParams.set(key, "***");
    }
    return url.toString();
  } catch {
    // Not a URL: hide everything up to the last `@` (a password with a space defeats the URL pattern).
    const out = redactUrlCredentials(clean);
    const at = out.lastIndexOf("@");
    if (at < 0 || out.slice(0, at).endsWith("***")) return out;
    const scheme = out.indexOf("://");
    return `${scheme >= 0 && scheme < at ? out.slice(0, scheme + 3) : ""}***${out.slice(at)}`;
  }
}

function present(env: Record<string, string | undefined>, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === "" ? undefined : value.trim();
}

/** Shortest admin token accepted: it guards every console action. */
export const MIN_ADMIN_TOKEN_LENGTH = 16;

/**
 * `SUPPLIER_SYNC_ADMIN_TOKEN` or `SUPPLIER_SYNC_ADMIN_TOKEN_FILE` (a mounted secret, its content
 * trimmed): enables the console's actions. Unset: undefined, the console is read-only.
 */
function parseAdminToken(env: Record<string, string | undefined>, cwd: string): string | undefined {
  const direct = present(env, "SUPPLIER_SYNC_ADMIN_TOKEN");
  const file = present(env, "SUPPLIER_SYNC_ADMIN_TOKEN_FILE");
  if (direct !== undefined && file !== undefined) {
    throw new ConfigError("set SUPPLIER_SYNC_ADMIN_TOKEN or SUPPLIER_SYNC_ADMIN_TOKEN_FILE, not both");
  }
  let token = direct;
  if (file !== undefined) {
    try {
      token = readFileSync(resolve(cwd, file), "utf8").trim();
    } catch (err) {
      throw new ConfigError(
        `SUPPLIER_SYNC_ADMIN_TOKEN_FILE: cannot read ${quoteToken(file)} (${(err as NodeJS.ErrnoException).code ?? "error"})`,
      );
    }
  }
  if (token !== undefined && token.length < MIN_ADMIN_TOKEN_LENGTH) {
    throw new ConfigError(
      `SUPPLIER_SYNC_ADMIN_TOKEN${file !== undefined ? "_FILE" : ""}: the token must be at least ${MIN_ADMIN_TOKEN_LENGTH} characters`,
    );
  }
  return token;
}

function parseDatabaseUrl(value: string | undefined, production: boolean): string | undefined {
  if (value === undefined) {
    if (production) {
      throw new ConfigError(
        "DATABASE_URL is required when NODE_ENV=production (embedded PostgreSQL is for development only)",
      );
    }
    return undefined;
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`DATABASE_URL ${quoteToken(redactDatabaseUrl(value), 200)} is not a valid URL`);
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") {
    throw new ConfigError(
      `DATABASE_URL ${quoteToken(redactDatabaseUrl(value), 200)} must start with postgres:// or postgresql://`,
    );
  }
  return value;
}

/** `host:port`, IPv6 hosts in brackets (`[::1]:9464`). The host is returned without brackets. */
export function parseHttpAddr(value: string): { host: string; port: number } {
  const name = "SUPPLIER_SYNC_HTTP_ADDR";
  const bad = (why: string) => new ConfigError(`${name} ${quoteToken(value)} ${why}`);
  let host: string;
  let portText: string;
  if (value.startsWith("[")) {
    const close = value.indexOf("]");
    if (close < 0 || value[close + 1] !== ":") throw bad("must be [ipv6]:port, e.g. [::1]:9464");
    host = value.slice(1, close);
    portText = value.slice(close + 2);
    if (!isIPv6(host)) throw bad(`has ${quoteToken(host)} in brackets, which is not an IPv6 address`);
  } else {
    const colon = value.lastIndexOf(":");
    if (colon < 0) throw bad("must be host:port, e.g. 127.0.0.1:9464");
    host = value.slice(0, colon);
    portText = value.slice(colon + 1);
    if (host === "") throw bad("has no host (use 0.0.0.0:PORT to listen on every interface)");
    if (host.includes(":")) throw bad("has an IPv6 host without brackets: write [::1]:9464");
    if (!/^[A-Za-z0-9.-]+$/.test(host)) throw bad(`has an invalid host ${quoteToken(host)}`);
  }
  const port = /^\d{1,5}$/.test(portText) ? Number(portText) : Number.NaN;
  if (!(port >= 0 && port <= 65_535)) throw bad(`has port ${quoteToken(portText)}: expected 0-65535`);
  return { host, port };
}

function parseCount(name: string, value: string | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  const n = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > MAX_COUNT) {
    throw new ConfigError(`${name} ${quoteToken(value)} must be an integer from ${min} to ${MAX_COUNT}`);
  }
  return n;
}

function parseDurationVar(
  name: string,
  value: string | undefined,
  fallback: string,
  maxMs: number,
  minMs = 1_000,
): number {
  const text = value ?? fallback;
  const ms = parseDuration(text);
  if (ms === undefined) {
    throw new ConfigError(`${name} ${quoteToken(text)} is not a duration (units s, m, h, d, e.g. 25s, 1m)`);
  }
  if (ms < minMs || ms > maxMs) {
    throw new ConfigError(
      `${name} ${quoteToken(text)} must be between ${formatDuration(minMs)} and ${formatDuration(maxMs)}`,
    );
  }
  return ms;
}

/** Test-only: shifts this process's host clock, to prove that slots follow the database's clock. */
export const TEST_CLOCK_SKEW_VAR = "SUPPLIER_SYNC_TEST_CLOCK_SKEW";

function parseClockSkew(value: string | undefined, production: boolean): number {
  if (value === undefined) return 0;
  if (production) {
    throw new ConfigError(
      `${TEST_CLOCK_SKEW_VAR} is for tests only and must be unset when NODE_ENV=production`,
    );
  }
  const negative = value.startsWith("-");
  const ms = parseDuration(negative ? value.slice(1) : value);
  if (ms === undefined || ms > MAX_RETRY_BACKOFF_MS) {
    throw new ConfigError(
      `${TEST_CLOCK_SKEW_VAR} ${quoteToken(value)} must be a duration of at most 1d, optionally negative (e.g. 90s, -90s)`,
    );
  }
  return negative ? -ms : ms;
}

function parseLogLevel(value: string | undefined): string {
  const level = (value ?? DEFAULTS.logLevel).toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new ConfigError(
      `SUPPLIER_SYNC_LOG_LEVEL ${quoteToken(value ?? "")} must be one of ${LOG_LEVELS.join(", ")}`,
    );
  }
  return level;
}

function parseLease(value: string | undefined): Config["lease"] {
  const kind = (value ?? DEFAULTS.lease).toLowerCase();
  if (!(LEASE_KINDS as readonly string[]).includes(kind)) {
    throw new ConfigError(
      `SUPPLIER_SYNC_LEASE ${quoteToken(value ?? "")} must be one of ${LEASE_KINDS.join(", ")} ` +
        "(advisory: session advisory locks, needs a direct or session-pooled connection; " +
        "table: lease rows with fencing tokens, works through any pooler)",
    );
  }
  return kind as Config["lease"];
}

/**
 * Builds the validated configuration from `env` (the caller passes `process.env`)
 * and `cwd` (against which a relative connectors folder is resolved). With
 * `suppliers: "ignored"` (the `runs` and `migrate` commands) the supplier list and
 * the retired variables are not read, and `suppliers` is empty; with
 * `suppliers: "optional"` (`preview`) an unset list is accepted (a set one is still checked).
 *
 * @throws ConfigError naming the offending variable and its (redacted) value.
 */
export function loadConfig(
  env: Record<string, string | undefined>,
  cwd: string,
  options: { suppliers?: "required" | "optional" | "ignored" } = {},
): Config {
  // `runs` and `migrate` need only DATABASE_URL (README.md, Command line): they read no supplier at all.
  const ignoreSuppliers = options.suppliers === "ignored";
  for (const name of ignoreSuppliers ? [] : RETIRED_VARS) {
    if (env[name] !== undefined) {
      throw new ConfigError(
        `${name} is retired and must be unset (it is set to ${quoteToken(env[name])}): ` +
          `configure each supplier's interval and enabled flag in ${SUPPLIERS_VAR}, e.g. etm:6h:true`,
      );
    }
  }
  const production = env["NODE_ENV"] === "production";
  // `preview` works from the connector file alone: the supplier list may be absent.
  const suppliers =
    ignoreSuppliers || (options.suppliers === "optional" && present(env, SUPPLIERS_VAR) === undefined)
      ? []
      : parseSuppliers(env[SUPPLIERS_VAR]);
  const databaseUrl = parseDatabaseUrl(present(env, "DATABASE_URL"), production);
  const connectorsDir = resolve(cwd, present(env, "SUPPLIER_SYNC_CONNECTORS_DIR") ?? DEFAULTS.connectorsDir);
  const httpAddr = parseHttpAddr(present(env, "SUPPLIER_SYNC_HTTP_ADDR") ?? DEFAULTS.httpAddr);
  const maxConcurrentTicks = parseCount(
    "SUPPLIER_SYNC_MAX_CONCURRENT_TICKS",
    present(env, "SUPPLIER_SYNC_MAX_CONCURRENT_TICKS"),
    DEFAULTS.maxConcurrentTicks,
    1,
  );
  // One connection is held by each tick's lease; the pool needs at least one more for everything else.
  const dbPoolMax = parseCount(
    "SUPPLIER_SYNC_DB_POOL_MAX",
    present(env, "SUPPLIER_SYNC_DB_POOL_MAX"),
    DEFAULTS.dbPoolMax,
    2,
  );
  const shutdownTimeoutMs = parseDurationVar(
    "SUPPLIER_SYNC_SHUTDOWN_TIMEOUT",
    present(env, "SUPPLIER_SYNC_SHUTDOWN_TIMEOUT"),
    DEFAULTS.shutdownTimeout,
    MAX_SHUTDOWN_TIMEOUT_MS,
  );
  const retryBackoffMs = parseDurationVar(
    "SUPPLIER_SYNC_RETRY_BACKOFF",
    present(env, "SUPPLIER_SYNC_RETRY_BACKOFF"),
    DEFAULTS.retryBackoff,
    MAX_RETRY_BACKOFF_MS,
  );
  const logLevel = parseLogLevel(present(env, "SUPPLIER_SYNC_LOG_LEVEL"));
  const testClockSkewMs = parseClockSkew(present(env, TEST_CLOCK_SKEW_VAR), production);
  const lease = parseLease(present(env, "SUPPLIER_SYNC_LEASE"));
  const leaseTtlMs = parseDurationVar(
    "SUPPLIER_SYNC_LEASE_TTL",
    present(env, "SUPPLIER_SYNC_LEASE_TTL"),
    DEFAULTS.leaseTtl,
    MAX_LEASE_TTL_MS,
  );
  const leaseDeadPeerMs = parseDurationVar(
    "SUPPLIER_SYNC_LEASE_DEAD_PEER",
    present(env, "SUPPLIER_SYNC_LEASE_DEAD_PEER"),
    DEFAULTS.leaseDeadPeer,
    MAX_LEASE_DEAD_PEER_MS,
    MIN_LEASE_DEAD_PEER_MS,
  );

  const adminToken = ignoreSuppliers ? undefined : parseAdminToken(env, cwd);

  // A copy, so later mutation of the caller's object (or of process.env) changes nothing.
  const snapshot = new Map(Object.entries(env));
  return {
    suppliers,
    databaseUrl,
    connectorsDir,
    httpAddr,
    maxConcurrentTicks,
    dbPoolMax,
    shutdownTimeoutMs,
    retryBackoffMs,
    logLevel,
    lease,
    leaseTtlMs,
    leaseDeadPeerMs,
    production,
    testClockSkewMs,
    ...(adminToken === undefined ? {} : { adminToken }),
    readSecretEnv: (name) => snapshot.get(name),
    events: parseEventsConfig(env, cwd),
  };
}
