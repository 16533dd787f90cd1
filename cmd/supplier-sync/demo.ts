#!/usr/bin/env node
/**
 * `npm start`: the daemon with the shipped connectors for ETM, IEK and Systeme
 * Electric (config/suppliers/*.json), a YML feed and ETM's catalog export, against the built-in supplier simulator on
 * 127.0.0.1:9465, whose etm, iek and systeme profiles answer like those APIs
 * (auth, shapes, batches, rate limits). The shipped files point at the real
 * hosts; the demo copies them into a temporary connectors folder with only
 * `baseUrl` replaced by the simulator's, and sets demo credentials for the
 * secrets they name where the environment leaves them unset. Each supplier's
 * catalog drifts a little every slot (prices, stock, a few new and removed
 * offers), so runs show updates, observations and delistings. Then the daemon
 * runs exactly as `supplier-sync` would (embedded PostgreSQL when DATABASE_URL
 * is unset).
 *
 * One more demo supplier is one more entry of {@link DEMO}: its simulator
 * options, its connector file, how its catalog drifts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { startSimulator } from "../../internal/simulator/index.js";
import {
  pointConnectorsAt,
  type RealApiCredentials,
  realApiEnv,
  realApiSupplier,
  writeSkuFile,
} from "../../internal/simulator/real-apis.js";
import type {
  Simulator,
  SimulatorMutation,
  SimulatorSupplierOptions,
} from "../../internal/simulator/types.js";

/** One supplier of the demo. */
interface DemoSupplier {
  name: string;
  /** Its interval in `SUPPLIER_SYNC_SUPPLIERS`, and how often its catalog drifts (seconds). */
  intervalSeconds: number;
  /** How the simulator serves it, given the credentials the connector will send. */
  simulator: (credentials: RealApiCredentials) => SimulatorSupplierOptions;
  /** What changes in its catalog every slot. */
  drift: SimulatorMutation;
  /** Run at the start and after every drift, e.g. to write the SKU list the connector reads. */
  afterDrift?: (sim: Simulator, connectorsDir: string) => void;
}

const DEMO: DemoSupplier[] = [
  {
    name: "etm",
    // 1 request/s: 40 codes take ceil(40/50) + 40 requests, 41 s, inside the slot.
    intervalSeconds: 60,
    simulator: (c) => realApiSupplier("etm", 40, c.etm),
    drift: { changePrices: 2, changeStock: 2, remove: 1, add: 1 },
    // ETM has no catalog listing: the codes to price are a file, here every live code.
    afterDrift: (sim, dir) => writeSkuFile(sim, "etm", join(dir, "etm-skus.txt")),
  },
  {
    name: "iek",
    intervalSeconds: 60,
    simulator: (c) => realApiSupplier("iek", 300, c.iek),
    drift: { changePrices: 5, changeStock: 5, remove: 2, add: 3 },
  },
  {
    name: "systeme",
    intervalSeconds: 60,
    simulator: (c) => realApiSupplier("systeme", 1_000, c.systeme),
    drift: { changePrices: 8, changeStock: 8, remove: 3, add: 3 },
  },
  {
    // A whole-catalog YML feed (config/suppliers/feed.json), streamed in steps; an
    // unchanged file is one 304 (conditional requests).
    name: "feed",
    intervalSeconds: 60,
    simulator: () => ({ size: 2_000 }),
    drift: { changePrices: 10, remove: 2, add: 2 },
  },
  {
    // ETM's full-catalog export job (config/suppliers/etm-catalog.json): create, poll,
    // download the product list from ETM's own origin with the session, then price its
    // codes 50 a request: 1,000 products take 20 price requests at 1/s, inside the slot.
    name: "etm-catalog",
    intervalSeconds: 120,
    simulator: (c) => realApiSupplier("etm", 1_000, c.etm),
    drift: { changePrices: 10, changeStock: 10, remove: 2, add: 2 },
  },
];

/** Demo values of the secrets the shipped connectors name; real ones in the environment win. */
const DEMO_CREDENTIALS: RealApiCredentials = {
  etm: { login: "demo", password: "demo-etm-password" },
  iek: { username: "demo", password: "demo-iek-password" },
  systeme: { accessCode: "demo-systeme-access-code" },
};

const SHIPPED = resolve(fileURLToPath(new URL("../../../config/suppliers", import.meta.url)));

function credentialsFromEnv(): RealApiCredentials {
  for (const [key, value] of Object.entries(realApiEnv(DEMO_CREDENTIALS))) process.env[key] ??= value;
  const env = (name: string) => process.env[name] as string;
  return {
    etm: { login: env("ETM_LOGIN"), password: env("ETM_PASSWORD") },
    iek: { username: env("IEK_USERNAME"), password: env("IEK_PASSWORD") },
    systeme: { accessCode: env("SYSTEME_ACCESS_CODE") },
  };
}

const credentials = credentialsFromEnv();
const simulator = await startSimulator({
  // DEMO_SIMULATOR_PORT=0 picks a free port (the demo's test); the connectors follow it.
  port: Number(process.env.DEMO_SIMULATOR_PORT ?? 9465),
  suppliers: Object.fromEntries(DEMO.map((s) => [s.name, s.simulator(credentials)])),
});
const connectorsDir = mkdtempSync(join(tmpdir(), "supplier-sync-demo-"));
// The daemon ends the process (Ctrl-C, SIGTERM, a fatal error): the folder goes with it.
process.on("exit", () => rmSync(connectorsDir, { recursive: true, force: true }));
pointConnectorsAt(
  simulator,
  SHIPPED,
  connectorsDir,
  DEMO.map((s) => s.name),
);
for (const supplier of DEMO) {
  supplier.afterDrift?.(simulator, connectorsDir);
  setInterval(() => {
    simulator.mutate(supplier.name, supplier.drift);
    supplier.afterDrift?.(simulator, connectorsDir);
  }, supplier.intervalSeconds * 1_000).unref();
}
process.stderr.write(
  `demo: simulator serving ${DEMO.map((s) => s.name).join(", ")} at ${simulator.url}; ` +
    `connectors ${SHIPPED} aimed at it in ${connectorsDir}\n`,
);
process.env.SUPPLIER_SYNC_SUPPLIERS ??= DEMO.map((s) => `${s.name}:${s.intervalSeconds}s`).join(",");
process.env.SUPPLIER_SYNC_CONNECTORS_DIR ??= connectorsDir;
// Ctrl-C within seconds: the demo's ETM walk asks for 40 remains at the simulator's 1
// request/s, so the default 25 s budget made a newcomer wait for it. The cut walk is
// recorded as it is in production (SHUTDOWN).
process.env.SUPPLIER_SYNC_SHUTDOWN_TIMEOUT ??= "5s";
await import("./main.js");
