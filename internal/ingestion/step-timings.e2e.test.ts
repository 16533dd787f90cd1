// A step's started_at is when it began (its first request), its finished_at when it
// committed (issue 34): a page the simulator holds back shows as the slow step, in the
// table and in `supplier-sync runs --json`. Real tick, real PostgreSQL, loopback HTTP.
import t from "tap";
import { baseEnv, runCli } from "../../test/helpers/cli.js";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { forcedTick, tickDeps } from "../../test/helpers/tick.js";
import { buildConnector, simDefinition } from "../connectors/test-support.js";
import { startSimulator } from "../simulator/server.js";

async function waitFor(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * How long the simulator holds page 2 back: long against a quick step even on a loaded
 * machine (at 700 ms, step 1 once took 370 ms on a CI machine at load 14, over the half of
 * it that the test allows a quick step).
 */
const HELD_MS = 1_500;

t.test("a slow page is the slow step: started at its request, finished at its commit", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  const url = await createTestDatabase(t);
  const pool = testPool(t, url, 4);
  sim.configure("slow", { size: 30, pageSize: 10, pagination: "page", faults: { hangOnPage: 2 } });
  const { connector } = buildConnector(t, simDefinition(sim.baseUrl("slow")), { supplier: "slow" });

  const before = Date.now();
  const ticking = forcedTick(tickDeps(pool), "slow", connector);
  // Page 2 is requested (prefetched while page 1 commits) and held.
  await waitFor(() => sim.stats("slow").requests >= 2 && sim.stats("slow").concurrency === 1, "page 2 held");
  const requestedPage2 = Date.now();
  await new Promise((r) => setTimeout(r, HELD_MS));
  sim.setFaults("slow", {});
  const result = await ticking;
  t.equal(result.outcome, "success");

  const { rows } = await pool.query<{ seq: number; started_at: Date; finished_at: Date; run_started: Date }>(
    `select s.seq, s.started_at, s.finished_at, r.started_at as run_started
       from ingestion_run_steps s join ingestion_runs r on r.id = s.run_id
      where s.run_id = $1 order by s.seq`,
    [result.runId],
  );
  t.same(
    rows.map((r) => r.seq),
    [1, 2, 3, 4],
  );
  const ms = (r: { started_at: Date; finished_at: Date }) => r.finished_at.getTime() - r.started_at.getTime();
  const [one, two, three] = rows as [(typeof rows)[0], (typeof rows)[0], (typeof rows)[0]];
  // Page 4 is the empty page that ends the walk.
  t.ok(ms(two) >= HELD_MS - 20, `step 2 lasted the held ${HELD_MS} ms (${ms(two)} ms)`);
  t.ok(ms(one) < HELD_MS / 2, `step 1 was quick (${ms(one)} ms)`);
  t.ok(ms(three) < HELD_MS / 2, `step 3 was quick (${ms(three)} ms)`);
  // Step 2 began with its request, before step 1 even committed (prefetch), not at its own commit.
  t.ok(two.started_at.getTime() <= requestedPage2 + 5, "step 2 started when it was requested");
  t.ok(two.started_at.getTime() <= one.finished_at.getTime(), "requested while step 1 was stored");
  t.ok(one.started_at.getTime() >= before - 5, "step 1 started with the tick");
  for (const r of rows) t.ok(r.started_at <= r.finished_at, `step ${r.seq}: started <= finished`);

  const cli = await runCli(t, ["runs", "--json", "--supplier", "slow"], baseEnv({ DATABASE_URL: url }));
  t.equal(cli.code, 0, cli.stderr);
  const [run] = JSON.parse(cli.stdout) as {
    id: number;
    steps: { seq: number; state: string; startedAt: string; finishedAt: string; durationMs: number }[];
  }[];
  t.equal(run?.id, result.runId);
  t.same(
    run?.steps.map((s) => [s.seq, s.state]),
    [
      [1, "succeeded"],
      [2, "succeeded"],
      [3, "succeeded"],
      [4, "succeeded"],
    ],
  );
  t.equal(run?.steps[1]?.durationMs, ms(two), "runs --json shows step 2's real duration");
  t.equal(run?.steps[1]?.startedAt, two.started_at.toISOString());
});

t.test("a step that fails while fetched starts at its request, not at the failure", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  const pool = testPool(t, await createTestDatabase(t), 4);
  sim.configure("fail", { size: 30, pageSize: 10, pagination: "page", faults: { hangOnPage: 2 } });
  const { connector } = buildConnector(
    t,
    simDefinition(sim.baseUrl("fail"), {
      timeouts: { requestMs: 400, pageMs: 400 },
      retry: { maxAttempts: 1 },
    }),
    { supplier: "fail" },
  );
  const result = await forcedTick(tickDeps(pool), "fail", connector);
  t.equal(result.outcome, "partial");
  const { rows } = await pool.query<{ seq: number; state: string; ms: number }>(
    `select seq, state, extract(epoch from finished_at - started_at) * 1000 as ms
       from ingestion_run_steps where run_id = $1 order by seq`,
    [result.runId],
  );
  t.same(
    rows.map((r) => [r.seq, r.state]),
    [
      [1, "succeeded"],
      [2, "failed"],
    ],
  );
  t.ok(Number(rows[1]?.ms) >= 350, `the failed step lasted its timed-out request (${rows[1]?.ms} ms)`);
});
