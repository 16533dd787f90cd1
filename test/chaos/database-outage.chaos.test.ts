// Issue 9, scenario 3: PostgreSQL stopped mid-run (fast shutdown: every session is
// terminated) and started again 10 s later. The daemon must survive, report the outage
// on /readyz (503, database "unreachable") while /livez stays 200, and resume ticking on
// its own once the database is back. Needs the chaos runner's own PostgreSQL.
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector, until } from "../helpers/fixtures.js";
import { assertInvariants } from "./helpers/invariants.js";
import { startPostgres, stopPostgres } from "./helpers/pg-server.mjs";
import { scenario } from "./helpers/scenario.js";

const dataDir = process.env.CHAOS_PG_DATA;
const port = Number(process.env.CHAOS_PG_PORT);

async function getJson(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

scenario("3. PostgreSQL stopped mid-run for 10 s", { timeoutMs: 120_000 }, async (t) => {
  if (!dataDir || !port) {
    t.comment("skipped: needs the chaos runner's own PostgreSQL (node test/chaos/run.mjs)");
    return [];
  }
  const url = await createTestDatabase(t);
  const sim = await startSimulator({
    suppliers: { etm: { size: 800, pageSize: 100, faults: { latencyMs: 250 } } },
  });
  t.teardown(() => sim.close());
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "etm:3s",
    SUPPLIER_SYNC_CONNECTORS_DIR: connectorsDir({ etm: simConnector(sim.baseUrl("etm")) }),
  });
  const daemon = startCli(t, [], env);
  const listening = await daemon.waitForLog((l) => l.msg === "health and metrics server listening", 20_000);
  const base = `http://${listening.addr as string}`;
  await until(
    async () =>
      (await query(url, "select 1 from ingestion_runs where state = 'running' and pages >= 1")).length > 0,
    30_000,
    "a run in progress",
  );

  let stoppedAt = 0;
  let restartedAt = 0;
  try {
    const stopping = Date.now();
    await stopPostgres({ dataDir });
    stoppedAt = Date.now();
    const down = await until(
      async () => {
        const r = await getJson(`${base}/readyz`);
        return r.status === 503 && r.body.database === "unreachable" ? r : undefined;
      },
      8_000,
      "/readyz 503 database unreachable",
    );
    t.equal(down?.body.status, "unavailable", "/readyz status unavailable");
    t.equal(
      (await fetch(`${base}/livez`, { signal: AbortSignal.timeout(5_000) })).status,
      200,
      "/livez still 200",
    );
    // The outage lasting 10 s is the scenario (several 3 s slots fire into it), so its
    // length stays a time. Within it, the daemon shows it met the outage: the walk it cut
    // and a tick fired after it both end in a logged failure.
    const failedSince = (ms: number) =>
      daemon
        .logs()
        .filter((l) => typeof l.outcome === "string" && l.outcome !== "success" && (l.time as number) >= ms);
    await until(
      () => failedSince(stopping).length >= 2,
      stoppedAt + 10_000 - Date.now(),
      "two failed ticks within the outage",
    );
    await new Promise((r) => setTimeout(r, Math.max(0, stoppedAt + 10_000 - Date.now())));
    t.equal(
      (await fetch(`${base}/livez`, { signal: AbortSignal.timeout(5_000) })).status,
      200,
      "/livez answers 200 after 10 s without the database",
    );
    t.equal(daemon.child.exitCode, null, "the daemon survived 10 s without its database");
  } finally {
    await startPostgres({ dataDir, port });
    restartedAt = Date.now();
  }
  const resumed = await daemon.waitForLog(
    (l) => l.outcome === "success" && (l.time as number) > restartedAt,
    45_000,
  );
  t.ok(resumed, `a tick succeeded ${(resumed.time as number) - restartedAt} ms after the restart`);
  const up = await until(
    async () => {
      const r = await getJson(`${base}/readyz`);
      return r.status === 200 && r.body.database === "ok" ? r : undefined;
    },
    10_000,
    "/readyz 200 again",
  );
  t.equal(up?.body.status, "ok");
  const failedTicks = daemon
    .logs()
    .filter(
      (l) => typeof l.outcome === "string" && l.outcome !== "success" && (l.time as number) >= stoppedAt,
    );
  t.ok(
    failedTicks.length >= 1,
    `the outage shows as failed ticks in the log (${failedTicks.map((l) => l.outcome)})`,
  );
  const metrics = await (await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
  t.match(
    metrics,
    /ingestion_tick_attempt_total\{supplier="etm",outcome="success"\} [1-9]/,
    "metrics count successes",
  );
  daemon.child.kill("SIGTERM");
  t.equal(await daemon.exited(20_000), 0, "exit 0 after the outage");
  const interrupted = await query<{ state: string; error_code: string }>(
    url,
    "select state, error_code from ingestion_runs where started_at < to_timestamp($1 / 1000.0) and finished_at > to_timestamp($1 / 1000.0)",
    [stoppedAt],
  );
  t.ok(interrupted.length >= 1, `the run cut by the outage was closed: ${JSON.stringify(interrupted)}`);
  for (const r of interrupted) t.not(r.state, "succeeded", "never as succeeded");
  return assertInvariants(t, {
    url,
    sim,
    suppliers: [{ name: "etm", intervalMs: 3_000 }],
    complete: ["etm"],
  });
});
