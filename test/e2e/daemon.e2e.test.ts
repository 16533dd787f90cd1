// The daemon as operators run it: several OS processes sharing leases, crashes,
// terminated lease connections, hanging suppliers and signals (docs/architecture.md: The invariants, Scheduler; README.md, Quick start).
import t from "tap";
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, leaseHolderPid, query, simConnector, until } from "../helpers/fixtures.js";

const isTick = (outcome?: string) => (l: Record<string, unknown>) =>
  typeof l.outcome === "string" && (outcome === undefined || l.outcome === outcome);

t.test("two daemons, 3 s slots, nine slots: one walk per slot, never overlapping", async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({
    suppliers: { etm: { size: 200, pageSize: 50, faults: { latencyMs: 40 } } },
  });
  t.teardown(() => sim.close());
  const dir = connectorsDir({
    etm: simConnector(sim.baseUrl("etm"), { request: { path: "/v1/offers", query: { limit: "50" } } }),
  });
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "etm:3s",
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
  });
  const a = startCli(t, [], env);
  // b starts once a's scheduler runs (an event, bounded); both then run side by side until
  // nine slots were walked, which must happen within 30 s of b's start (3 s slots: ten
  // boundaries and a's catch-up fit in that window).
  await a.waitForLog((l) => l.msg === "scheduler started", 20_000);
  const b = startCli(t, [], env);
  const deadline = Date.now() + 30_000;
  await b.waitForLog((l) => l.msg === "scheduler started", 20_000);
  const successes = () => [...a.logs(), ...b.logs()].filter(isTick("success")).length;
  await until(
    () => successes() >= 9,
    deadline - Date.now(),
    "nine successful ticks within 30 s of b's start",
  );
  // Stopped right after a success: the next fire is a slot away, so no walk is cut.
  a.child.kill("SIGTERM");
  b.child.kill("SIGTERM");
  t.equal(await a.exited(30_000), 0);
  t.equal(await b.exited(30_000), 0);

  // The database's side: its clock cut every slot (the scheduler fires on it, and a tick
  // reads its slot from it under the lease). Without faults every tick that walks is one
  // run, and every run succeeds.
  const runs = await query<{ id: string; slot: number; state: string; started: number; finished: number }>(
    url,
    `select id::text, (extract(epoch from slot_start) * 1000)::float8 as slot, state,
            floor(extract(epoch from started_at) * 1000)::float8 as started,
            floor(extract(epoch from finished_at) * 1000)::float8 as finished
       from ingestion_runs where supplier = 'etm' order by started_at, id`,
  );
  t.ok(runs.length >= 9, `${runs.length} runs`);
  t.same(
    runs.filter((r) => r.state !== "succeeded"),
    [],
    "every run succeeded",
  );
  const perSlot = new Map<number, number>();
  for (const r of runs) perSlot.set(r.slot, (perSlot.get(r.slot) ?? 0) + 1);
  t.same(
    [...perSlot].filter(([, n]) => n !== 1).map(([s, n]) => [new Date(s).toISOString(), n]),
    [],
    "exactly one run per slot",
  );
  const slots = [...perSlot.keys()].sort((x, y) => x - y);
  const missed: string[] = [];
  for (let s = slots[0] ?? 0; s <= (slots.at(-1) ?? 0); s += 3_000)
    if (!perSlot.has(s)) missed.push(new Date(s).toISOString());
  t.same(missed, [], "no slot between the first and the last without its run");

  // The supplier's side: one walk per run, each within its run (run rows are written before
  // the first request and closed after the last; the simulator and PostgreSQL read the
  // same host clock, both cut to the millisecond here).
  const stats = sim.stats("etm");
  t.equal(stats.walksStarted, runs.length, `${stats.walksStarted} walks started for ${runs.length} runs`);
  t.equal(
    stats.walksCompleted,
    runs.length,
    `${stats.walksCompleted} walks completed for ${runs.length} runs`,
  );
  const walksOf = new Map<string, number>();
  const unowned: { startedAt: number; endedAt: number | null; runs: string[] }[] = [];
  for (const w of stats.walks) {
    const owners = runs.filter(
      (r) => r.started <= w.startedAt && w.endedAt !== null && w.endedAt <= r.finished,
    );
    if (owners.length !== 1) unowned.push({ ...w, runs: owners.map((r) => r.id) });
    for (const r of owners) walksOf.set(r.id, (walksOf.get(r.id) ?? 0) + 1);
  }
  t.same(unowned, [], "every walk lies within exactly one run");
  t.same(
    runs.filter((r) => walksOf.get(r.id) !== 1).map((r) => ({ id: r.id, walks: walksOf.get(r.id) ?? 0 })),
    [],
    "every run (so every slot) walked exactly once",
  );
  // Where in its database slot each walk began: the scheduled ones just after the
  // supplier's offset, a start-up catch-up anywhere, and the simulator's own wall clock
  // may put a walk begun at a slot's very end into the next slot.
  const into = stats.walks.flatMap((w) => {
    const run = runs.find((r) => r.started <= w.startedAt && w.endedAt !== null && w.endedAt <= r.finished);
    return run ? [w.startedAt - run.slot] : [];
  });
  t.comment(`walks began ${into.join(", ")} ms into their slots`);
  const sorted = [...stats.walks].sort((x, y) => x.startedAt - y.startedAt);
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1]!;
    t.ok(prev.endedAt === null || prev.endedAt <= sorted[i]!.startedAt, "walks never overlap in time");
  }
  const owners = await query<{ n: number }>(
    url,
    "select count(distinct owner->>'pid')::int as n from ingestion_runs",
  );
  t.ok((owners[0]?.n ?? 0) >= 1);
});

t.test("kill -9 mid-tick: another process takes the lease at once and recovers the run", async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({
    suppliers: { etm: { size: 2_000, pageSize: 100, faults: { latencyMs: 150 } } },
  });
  t.teardown(() => sim.close());
  const dir = connectorsDir({ etm: simConnector(sim.baseUrl("etm")) });
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
  });
  const victim = startCli(t, ["--tick-once"], env);
  await until(
    async () =>
      ((await query<{ pages: number }>(url, "select pages from ingestion_runs"))[0]?.pages ?? 0) >= 3,
    20_000,
    "3 committed pages",
  );
  victim.child.kill("SIGKILL");
  await victim.exited();
  const pagesAtKill = (await query<{ pages: number }>(url, "select pages from ingestion_runs"))[0]?.pages;
  await until(
    async () => (await leaseHolderPid(url, "etm")) === undefined,
    2_000,
    "the lease freed by the server",
  );
  sim.setFaults("etm", {});
  const rescuer = startCli(t, ["--tick-once"], env);
  t.equal(await rescuer.exited(60_000), 0, rescuer.stderr.join(""));
  const runs = await query<{ state: string; error_code: string | null; pages: number }>(
    url,
    "select state, error_code, pages from ingestion_runs order by id",
  );
  t.same(runs[0], { state: "partial", error_code: "INTERRUPTED", pages: pagesAtKill });
  t.equal(runs[1]?.state, "succeeded");
  const offers = await query<{ n: number; d: number }>(
    url,
    "select count(*)::int as n, count(distinct sku)::int as d from supplier_offers",
  );
  t.same(offers[0], { n: 2_000, d: 2_000 }, "offers equal the catalog, no duplicates");
});

t.test(
  "pg_terminate_backend on the lease connection: lease_lost within 1 s, nothing more written, next tick succeeds",
  async (t) => {
    const url = await createTestDatabase(t);
    const sim = await startSimulator({
      suppliers: { etm: { size: 3_000, pageSize: 100, faults: { latencyMs: 100 } } },
    });
    t.teardown(() => sim.close());
    const dir = connectorsDir({ etm: simConnector(sim.baseUrl("etm")) });
    const env = baseEnv({
      DATABASE_URL: url,
      SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
      SUPPLIER_SYNC_CONNECTORS_DIR: dir,
      SUPPLIER_SYNC_RETRY_BACKOFF: "2s",
    });
    const daemon = startCli(t, [], env);
    await until(
      async () =>
        ((await query<{ pages: number }>(url, "select pages from ingestion_runs"))[0]?.pages ?? 0) >= 2,
      20_000,
      "2 pages",
    );
    const pid = await leaseHolderPid(url, "etm");
    t.ok(pid, "the lease is held by a backend");
    const killedAt = Date.now();
    await query(url, "select pg_terminate_backend($1)", [pid]);
    const lost = await daemon.waitForLog((l) => l.msg === "lease lost", 5_000);
    t.ok(
      (lost.time as number) - killedAt < 1_000,
      `lease loss noticed in ${(lost.time as number) - killedAt} ms`,
    );
    const tick = await daemon.waitForLog(isTick("lease_lost"), 10_000);
    const runId = tick.run_id as number;
    const countSteps = async () =>
      (
        await query<{ n: number }>(
          url,
          "select count(*)::int as n from ingestion_run_steps where run_id = $1",
          [runId],
        )
      )[0]?.n;
    const stepsAtLoss = await countSteps();
    const run = (
      await query<{ state: string; error_code: string }>(
        url,
        "select state, error_code from ingestion_runs where id = $1",
        [runId],
      )
    )[0];
    t.equal(run?.error_code, "LEASE_LOST");
    t.not(run?.state, "succeeded");
    sim.setFaults("etm", {});
    const next = await daemon.waitForLog(isTick("success"), 40_000);
    t.ok(next.run_id, "the daemon stayed up and its retry succeeded");
    // Checked once the retry (2 s of backoff later) has walked the whole catalog under a
    // new lease: a write left over from the lost run would have landed by then.
    t.not(next.run_id, runId, "the retry is another run");
    t.equal(await countSteps(), stepsAtLoss, "no step written for that run after the kill");
    t.equal(daemon.child.exitCode, null, "still running");
    daemon.child.kill("SIGTERM");
    t.equal(await daemon.exited(30_000), 0);
  },
);

t.test("a hanging supplier does not delay another supplier's ticks", async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({
    suppliers: { stuck: { size: 100, faults: { hangOnPage: 1 } }, fine: { size: 100 } },
  });
  t.teardown(() => sim.close());
  const dir = connectorsDir({
    stuck: simConnector(sim.baseUrl("stuck"), { timeouts: { requestMs: 60_000, pageMs: 120_000 } }),
    fine: simConnector(sim.baseUrl("fine")),
  });
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "stuck:2s,fine:2s",
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
    SUPPLIER_SYNC_SHUTDOWN_TIMEOUT: "5s",
  });
  const daemon = startCli(t, [], env);
  await until(
    () => daemon.logs().filter((l) => l.outcome === "success" && l.supplier === "fine").length >= 4,
    20_000,
    "four successes of the healthy supplier",
  );
  t.notOk(daemon.logs().some((l) => l.supplier === "stuck" && l.outcome === "success"));
  t.ok(
    daemon.logs().some((l) => l.supplier === "stuck" && l.outcome === "skipped_overlap"),
    "the stuck one is skipped, not queued",
  );
  daemon.child.kill("SIGTERM");
  t.equal(await daemon.exited(15_000), 0);
  const running = await query<{ n: number }>(
    url,
    "select count(*)::int as n from ingestion_runs where state = 'running'",
  );
  t.equal(running[0]?.n, 0, "the hanging run was closed on shutdown");
});

t.test(
  "SIGTERM mid-tick: exit 0 within the budget, run closed SHUTDOWN, lease free; a second signal exits at once",
  async (t) => {
    const url = await createTestDatabase(t);
    const sim = await startSimulator({
      suppliers: { etm: { size: 5_000, pageSize: 100, faults: { latencyMs: 100 } } },
    });
    t.teardown(() => sim.close());
    const dir = connectorsDir({ etm: simConnector(sim.baseUrl("etm")) });
    const env = baseEnv({
      DATABASE_URL: url,
      SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
      SUPPLIER_SYNC_CONNECTORS_DIR: dir,
      SUPPLIER_SYNC_SHUTDOWN_TIMEOUT: "10s",
    });
    const daemon = startCli(t, [], env);
    await until(
      async () =>
        ((await query<{ pages: number }>(url, "select pages from ingestion_runs"))[0]?.pages ?? 0) >= 2,
      20_000,
      "2 pages",
    );
    const sentAt = Date.now();
    daemon.child.kill("SIGTERM");
    t.equal(await daemon.exited(15_000), 0);
    t.ok(Date.now() - sentAt < 10_000, `exited in ${Date.now() - sentAt} ms`);
    const run = (
      await query<{ state: string; error_code: string }>(url, "select state, error_code from ingestion_runs")
    )[0];
    t.same(run, { state: "partial", error_code: "SHUTDOWN" });
    t.equal(await leaseHolderPid(url, "etm"), undefined, "lease free");

    const stuck = await startSimulator({ suppliers: { etm: { size: 100, faults: { hangOnPage: 1 } } } });
    t.teardown(() => stuck.close());
    const dir2 = connectorsDir({
      etm: simConnector(stuck.baseUrl("etm"), { timeouts: { requestMs: 60_000, pageMs: 120_000 } }),
    });
    const url2 = await createTestDatabase(t);
    const d2 = startCli(t, [], {
      ...env,
      DATABASE_URL: url2,
      SUPPLIER_SYNC_CONNECTORS_DIR: dir2,
      SUPPLIER_SYNC_SHUTDOWN_TIMEOUT: "60s",
    });
    await until(async () => (await query(url2, "select 1 from ingestion_runs")).length > 0, 20_000, "a run");
    d2.child.kill("SIGTERM");
    await d2.waitForLog((l) => l.msg === "shutting down", 5_000);
    const second = Date.now();
    d2.child.kill("SIGTERM");
    t.equal(await d2.exited(5_000), 143, "second signal: exit 143 at once");
    t.ok(Date.now() - second < 2_000);
  },
);
