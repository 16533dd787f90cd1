#!/usr/bin/env node
/**
 * `npm run test:container`: builds the image and proves the deployment contract
 * (docs/operations.md, Container image) on a real engine, PostgreSQL and simulator:
 *
 * - the image runs as non-root with NODE_ENV=production, a HEALTHCHECK and exec-form
 *   CMD, and ships no dev dependency (no embedded PostgreSQL, no TypeScript);
 * - `supplier-sync migrate` from the image migrates a fresh database;
 * - the daemon container (read-only root filesystem, no capabilities) serves /livez,
 *   /readyz 200 and /metrics, passes its own HEALTHCHECK, and records `succeeded` runs
 *   for the demo suppliers;
 * - SIGTERM while a slow walk is in flight: exit 0 within SUPPLIER_SYNC_SHUTDOWN_TIMEOUT,
 *   the in-flight run closed `SHUTDOWN`, no run left `running`.
 *
 * Containers use host networking; traffic stays on 127.0.0.1. Database: its own
 * `ss_container_<pid>` next to TEST_DATABASE_URL (default
 * postgres://postgres@127.0.0.1:5432/test), dropped at the end.
 *
 * It first runs check-manifests.mjs (YAML and manifest checks) and fails if that fails.
 *
 * Usage: node test/container/run.mjs [--no-build]
 * Env: CONTAINER_ENGINE (docker|podman), SUPPLIER_SYNC_TEST_IMAGE (default supplier-sync:test),
 *      CONTAINER_BUILD_CA (PEM file passed as the `ca` build secret).
 * Exit 0 when every check passed, 1 otherwise.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { createDatabase, dropDatabase, freePort } from "../support/pg-runtime.mjs";
import { mustRun, pickEngine, runEngine } from "./engine.mjs";
import { runScenario } from "./scenario.mjs";

const IMAGE = process.env.SUPPLIER_SYNC_TEST_IMAGE || "supplier-sync:test";
const BUILD_TIMEOUT_MS = 20 * 60_000;
/** Everything after the image exists must finish within this. */
const RUN_BUDGET_MS = 5 * 60_000;
const SHUTDOWN_TIMEOUT_S = 10;

// The static manifest checks first: cheap, and CI reaches them only through this script.
const manifests = spawnSync(process.execPath, [new URL("./check-manifests.mjs", import.meta.url).pathname], {
  stdio: "inherit",
});
const manifestsOk = manifests.status === 0;

const engine = pickEngine();
if (!engine) {
  console.error("container test: neither docker nor podman can run containers here");
  process.exit(1);
}
const t0 = Date.now();
if (!process.argv.includes("--no-build")) {
  const args = ["build", "-t", IMAGE];
  // Podman's default OCI format drops HEALTHCHECK; the docker format keeps it.
  if (engine.endsWith("podman")) args.push("--format", "docker");
  if (process.env.CONTAINER_BUILD_CA) args.push("--secret", `id=ca,src=${process.env.CONTAINER_BUILD_CA}`);
  args.push(new URL("../../", import.meta.url).pathname);
  console.log(`# ${engine} ${args.join(" ")}`);
  const built = await runEngine(engine, args, { timeoutMs: BUILD_TIMEOUT_MS, echo: true });
  if (built.code !== 0) {
    console.log(
      `not ok - image build ${built.timedOut ? "timed out" : `exited ${built.code}`} (output above)`,
    );
    process.exit(1);
  }
  console.log(`# image built in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}
const size = Number(await mustRun(engine, ["image", "inspect", "--format", "{{.Size}}", IMAGE]));
console.log(`# image ${IMAGE}: ${(size / 1e6).toFixed(1)} MB (${size} bytes)`);

const tag = `ss-ct-${process.pid}`;
const dbName = `ss_container_${process.pid}`;
const baseUrl = new URL(process.env.TEST_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test");
// Not migrated: `supplier-sync migrate` from the image does that.
const dbUrl = new URL(await createDatabase(baseUrl.toString(), dbName));
const admin = new pg.Client({ connectionString: baseUrl.toString() });
await admin.connect();

// Connectors and simulator config, readable by the container's non-root user.
const dir = mkdtempSync(join(tmpdir(), "ss-container-"));
chmodSync(dir, 0o755);
const connectorsDir = join(dir, "connectors");
const writePublic = (path, value) => {
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`);
  chmodSync(path, 0o644);
};
const simPort = await freePort();
const httpPort = await freePort();
mkdirSync(connectorsDir);
chmodSync(connectorsDir, 0o755);
writePublic(join(dir, "simulator.json"), {
  etm: { size: 500, pageSize: 100, pagination: "page" },
  iek: { size: 300, pageSize: 100, pagination: "cursor" },
  // 300 slow pages: a walk still in flight when SIGTERM arrives.
  slow: { size: 3000, pageSize: 10, pagination: "page", faults: { latencyMs: 200 } },
});
const fields = { sku: "article", name: "title", price: "price.value", currency: "price.currency" };
const connector = (name, pagination, limit) => ({
  baseUrl: `http://127.0.0.1:${simPort}/${name}`,
  auth: { type: "none" },
  rateLimit: { requestsPerSecond: 50, burst: 50, maxConcurrency: 2 },
  request: { path: "/v1/offers", query: { limit: String(limit) } },
  pagination,
  records: { path: "data.items" },
  fields: { ...fields, stock: "stock.total" },
});
writePublic(
  join(connectorsDir, "etm.json"),
  connector("etm", { type: "page", param: "page", start: 1 }, 100),
);
writePublic(
  join(connectorsDir, "iek.json"),
  connector("iek", { type: "cursor", param: "cursor", cursorPath: "next_cursor" }, 100),
);
writePublic(
  join(connectorsDir, "slow.json"),
  connector("slow", { type: "page", param: "page", start: 1 }, 10),
);

const ctx = {
  engine,
  image: IMAGE,
  admin,
  dbName,
  dbUrl: dbUrl.toString(),
  simPort,
  httpPort,
  dir,
  connectorsDir,
  shutdownTimeoutS: SHUTDOWN_TIMEOUT_S,
  names: { sim: `${tag}-sim`, daemon: `${tag}-daemon`, migrate: `${tag}-migrate` },
};

let failed = false;
let watchdog;
try {
  const budget = new Promise((_, reject) => {
    watchdog = setTimeout(
      () => reject(new Error(`over the ${RUN_BUDGET_MS / 1000} s budget`)),
      RUN_BUDGET_MS,
    );
  });
  failed = !(await Promise.race([runScenario(ctx), budget])) || !manifestsOk;
} catch (err) {
  failed = true;
  console.log(`not ok - ${err instanceof Error ? err.message : String(err)}`);
  const logs = await runEngine(engine, ["logs", "--tail", "40", ctx.names.daemon], { timeoutMs: 15_000 });
  if (logs.code === 0)
    console.log(`# daemon logs (tail):\n${(logs.stdout + logs.stderr).replace(/^/gm, "#   ")}`);
} finally {
  clearTimeout(watchdog);
  for (const name of Object.values(ctx.names)) {
    await runEngine(engine, ["kill", name], { timeoutMs: 30_000 }).catch(() => {});
    await runEngine(engine, ["rm", "-f", name], { timeoutMs: 30_000 }).catch(() => {});
  }
  await admin.end().catch(() => {});
  await dropDatabase(baseUrl.toString(), dbName);
  rmSync(dir, { recursive: true, force: true });
}
console.log(`# container test ${failed ? "FAILED" : "passed"} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
process.exit(failed ? 1 : 0);
