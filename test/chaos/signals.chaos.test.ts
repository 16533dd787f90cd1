// Issue 9, scenario 6: SIGTERM mid-run (graceful: the page finishes, the run is closed
// SHUTDOWN, the lease is released, exit 0), and a second SIGTERM during a shutdown that
// waits on a hanging supplier (exit 143 at once; the next process recovers the run).
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, runCli, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, leaseHeld, query, simConnector, until } from "../helpers/fixtures.js";
import { assertInvariants } from "./helpers/invariants.js";
import { scenario } from "./helpers/scenario.js";

const HOUR = 3_600_000;

scenario("6a. SIGTERM mid-run", { timeoutMs: 60_000 }, async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({
    suppliers: { etm: { size: 3_000, pageSize: 100, faults: { latencyMs: 100 } } },
  });
  t.teardown(() => sim.close());
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
    SUPPLIER_SYNC_CONNECTORS_DIR: connectorsDir({ etm: simConnector(sim.baseUrl("etm")) }),
    SUPPLIER_SYNC_SHUTDOWN_TIMEOUT: "10s",
  });
  const daemon = startCli(t, [], env);
  await until(
    async () =>
      ((await query<{ pages: number }>(url, "select pages from ingestion_runs"))[0]?.pages ?? 0) >= 2,
    30_000,
    "2 committed pages",
  );
  const sentAt = Date.now();
  daemon.child.kill("SIGTERM");
  t.equal(await daemon.exited(15_000), 0, "exit 0");
  const tookMs = Date.now() - sentAt;
  t.ok(tookMs < 10_000, `exited within the 10 s budget (${tookMs} ms)`);
  const runs = await query<{ state: string; error_code: string }>(
    url,
    "select state, error_code from ingestion_runs",
  );
  t.same(runs, [{ state: "partial", error_code: "SHUTDOWN" }], "run closed durably as SHUTDOWN");
  t.equal(await leaseHeld(url, "etm"), false, "lease released");
  t.ok(
    daemon.logs().some((l) => l.msg === "stopped"),
    "'stopped' logged",
  );

  // The next process catches up at start-up: the slot has no success yet.
  sim.setFaults("etm", {});
  const next = await runCli(t, ["--tick-once"], env);
  t.equal(next.code, 0, next.stderr);
  return assertInvariants(t, { url, sim, suppliers: [{ name: "etm", intervalMs: HOUR }], complete: ["etm"] });
});

scenario("6b. second SIGTERM during shutdown", { timeoutMs: 60_000 }, async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({ suppliers: { etm: { size: 300, faults: { hangOnPage: 2 } } } });
  t.teardown(() => sim.close());
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
    SUPPLIER_SYNC_CONNECTORS_DIR: connectorsDir({
      etm: simConnector(sim.baseUrl("etm"), { timeouts: { requestMs: 60_000, pageMs: 120_000 } }),
    }),
    SUPPLIER_SYNC_SHUTDOWN_TIMEOUT: "60s",
  });
  const daemon = startCli(t, [], env);
  await until(
    async () =>
      ((await query<{ pages: number }>(url, "select pages from ingestion_runs"))[0]?.pages ?? 0) >= 1,
    30_000,
    "page 1 committed, page 2 hanging",
  );
  daemon.child.kill("SIGTERM");
  await daemon.waitForLog((l) => l.msg === "shutting down", 5_000);
  const second = Date.now();
  daemon.child.kill("SIGTERM");
  t.equal(await daemon.exited(5_000), 143, "second signal: exit 143");
  t.ok(Date.now() - second < 2_000, `at once (${Date.now() - second} ms)`);
  t.ok(
    daemon.logs().some((l) => l.msg === "second signal: exiting at once"),
    "logged",
  );
  // The advisory lock dies with the session at once; a table lease expires within its TTL.
  await until(async () => !(await leaseHeld(url, "etm")), 10_000, "the lease is freed");

  sim.setFaults("etm", {});
  const next = await runCli(t, ["--tick-once"], env);
  t.equal(next.code, 0, next.stderr);
  t.ok(
    next.logs.some((l) => l.msg === "recovered abandoned run (INTERRUPTED)"),
    "the next process recovers the run",
  );
  const runs = await query<{ state: string; error_code: string | null }>(
    url,
    "select state, error_code from ingestion_runs order by id",
  );
  t.same(runs, [
    { state: "partial", error_code: "INTERRUPTED" },
    { state: "succeeded", error_code: null },
  ]);
  return assertInvariants(t, { url, sim, suppliers: [{ name: "etm", intervalMs: HOUR }], complete: ["etm"] });
});
