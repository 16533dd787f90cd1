// Issue 9, scenarios 1 and 2: a process killed with SIGKILL mid-run, and the lease
// connection terminated by the server mid-run. Real CLI processes, the simulator over
// loopback, the chaos runner's PostgreSQL.
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import {
  connectorsDir,
  leaseConnectionPids,
  leaseHeld,
  query,
  simConnector,
  until,
} from "../helpers/fixtures.js";
import { assertInvariants } from "./helpers/invariants.js";
import { scenario } from "./helpers/scenario.js";

const HOUR = 3_600_000;
const pagesOf = async (url: string, runId?: number) =>
  (
    await query<{ pages: number }>(
      url,
      runId === undefined
        ? "select pages from ingestion_runs order by id desc limit 1"
        : "select pages from ingestion_runs where id = $1",
      runId === undefined ? [] : [runId],
    )
  )[0]?.pages ?? 0;

scenario("1. kill -9 mid-run, another daemon recovers", { timeoutMs: 90_000 }, async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({
    suppliers: { etm: { size: 1_500, pageSize: 100, faults: { latencyMs: 150 } } },
  });
  t.teardown(() => sim.close());
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
    SUPPLIER_SYNC_CONNECTORS_DIR: connectorsDir({ etm: simConnector(sim.baseUrl("etm")) }),
  });
  const victim = startCli(t, [], env);
  await until(async () => (await pagesOf(url)) >= 3, 30_000, "3 committed pages");
  victim.child.kill("SIGKILL");
  t.equal(await victim.exited(5_000), 137, "killed");
  const pagesAtKill = await pagesOf(url);
  const dead = await query<{ state: string }>(url, "select state from ingestion_runs");
  t.same(dead, [{ state: "running" }], "the dead process's run is still 'running' (nobody closed it)");
  // The advisory lock dies with the session at once; a table lease expires within its TTL.
  await until(async () => !(await leaseHeld(url, "etm")), 10_000, "the lease is freed");

  sim.setFaults("etm", {});
  const rescuer = startCli(t, [], env);
  const recovered = await rescuer.waitForLog(
    (l) => l.msg === "recovered abandoned run (INTERRUPTED)",
    20_000,
  );
  const success = await rescuer.waitForLog((l) => l.outcome === "success", 40_000);
  t.ok(recovered.run_id, "recovery logged with the run id");
  rescuer.child.kill("SIGTERM");
  t.equal(await rescuer.exited(20_000), 0, "rescuer exits 0 on SIGTERM");

  const runs = await query<{ id: number; state: string; error_code: string | null; pages: number }>(
    url,
    "select id, state, error_code, pages from ingestion_runs order by id",
  );
  t.same(
    runs.map(({ state, error_code, pages }) => ({ state, error_code, pages })),
    [
      { state: "partial", error_code: "INTERRUPTED", pages: pagesAtKill },
      { state: "succeeded", error_code: null, pages: 16 },
    ],
    "killed run closed partial/INTERRUPTED with its committed pages; the next one succeeded",
  );
  t.equal(String(success.run_id), String(runs[1]?.id), "the success log names the new run");
  return assertInvariants(t, { url, sim, suppliers: [{ name: "etm", intervalMs: HOUR }], complete: ["etm"] });
});

scenario(
  "2. lease connection terminated mid-run (pg_terminate_backend)",
  { timeoutMs: 90_000 },
  async (t) => {
    const url = await createTestDatabase(t);
    const sim = await startSimulator({
      suppliers: { etm: { size: 2_000, pageSize: 100, faults: { latencyMs: 100 } } },
    });
    t.teardown(() => sim.close());
    const env = baseEnv({
      DATABASE_URL: url,
      SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
      SUPPLIER_SYNC_CONNECTORS_DIR: connectorsDir({ etm: simConnector(sim.baseUrl("etm")) }),
      SUPPLIER_SYNC_RETRY_BACKOFF: "1s",
    });
    const daemon = startCli(t, [], env);
    await until(async () => (await pagesOf(url)) >= 2, 30_000, "2 committed pages");
    const pids = await leaseConnectionPids(url, "etm");
    t.ok(pids.length > 0, "the lease connection's backend is known");
    await query(url, "select pg_terminate_backend(pid) from unnest($1::int[]) as pid", [pids]);
    const lost = await daemon.waitForLog((l) => l.outcome === "lease_lost", 10_000);
    const runId = lost.run_id as number;
    const steps = async () =>
      (
        await query<{ n: number }>(
          url,
          "select count(*)::int as n from ingestion_run_steps where run_id = $1",
          [runId],
        )
      )[0]?.n;
    const atLoss = await steps();
    sim.setFaults("etm", {});
    const retry = await daemon.waitForLog((l) => l.outcome === "success", 40_000);
    t.equal(await steps(), atLoss, "not one step written for the lost run afterwards");
    const run = (
      await query<{ state: string; error_code: string }>(
        url,
        "select state, error_code from ingestion_runs where id = $1",
        [runId],
      )
    )[0];
    t.equal(run?.error_code, "LEASE_LOST", "closed LEASE_LOST from a fresh connection");
    t.not(run?.state, "succeeded");
    const triggers = await query<{ trigger: string }>(
      url,
      "select trigger from ingestion_runs where id = $1",
      [retry.run_id],
    );
    t.same(triggers, [{ trigger: "retry" }], "the success is the within-slot retry");
    t.equal(daemon.child.exitCode, null, "the daemon survived");
    daemon.child.kill("SIGTERM");
    t.equal(await daemon.exited(20_000), 0);
    return assertInvariants(t, {
      url,
      sim,
      suppliers: [{ name: "etm", intervalMs: HOUR }],
      complete: ["etm"],
    });
  },
);
