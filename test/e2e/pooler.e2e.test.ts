// supplier-sync behind a real PgBouncer (Debian's), as an operator deploys it: real CLI
// processes, the simulator over loopback, PgBouncer started here in both pool modes.
//   transaction mode + advisory lease -> every command exits 3 naming the cause and both
//                                        ways out, and no supplier sees a request;
//   transaction mode + table lease    -> racing --tick-once and two daemons: one walk per
//                                        slot, no overlap;
//   session mode + advisory lease     -> works as without a pooler.
import t, { type Test } from "tap";
import { type SimulatorWalk, startSimulator } from "../../internal/simulator/index.js";
import { assertInvariants } from "../chaos/helpers/invariants.js";
import { baseEnv, type CliProcess, runCli, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector, until } from "../helpers/fixtures.js";
import { pgbouncerMissing, startPgBouncer } from "../helpers/pgbouncer.js";

const HOUR = 3_600_000;

/** Pairs of walks that were in progress at the same time. */
function overlaps(walks: SimulatorWalk[]): number {
  const sorted = [...walks].sort((a, b) => a.startedAt - b.startedAt);
  let n = 0;
  for (let i = 0; i < sorted.length; i++) {
    for (let j = i + 1; j < sorted.length; j++) {
      const end = sorted[i]!.endedAt ?? Number.POSITIVE_INFINITY;
      if (sorted[j]!.startedAt < end) n++;
    }
  }
  return n;
}

async function fixture(t: Test, sizes: { etm: number; latencyMs: number }) {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({
    suppliers: { etm: { size: sizes.etm, pageSize: 50, faults: { latencyMs: sizes.latencyMs } } },
  });
  t.teardown(() => sim.close());
  const dir = connectorsDir({
    etm: simConnector(sim.baseUrl("etm"), { request: { path: "/v1/offers", query: { limit: "50" } } }),
  });
  return { url, sim, dir };
}

t.test("behind PgBouncer", { skip: pgbouncerMissing() }, async (t) => {
  t.test("transaction mode + advisory lease: every command exits 3, no supplier request", async (t) => {
    const { url, sim, dir } = await fixture(t, { etm: 100, latencyMs: 0 });
    const bouncer = await startPgBouncer(t, { poolMode: "transaction" });
    const env = baseEnv({
      DATABASE_URL: bouncer.url(url),
      SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
      SUPPLIER_SYNC_CONNECTORS_DIR: dir,
    });
    const commands: [string, string[]][] = [
      ["--tick-once", ["--tick-once"]],
      ["three racing --tick-once (1)", ["--tick-once"]],
      ["daemon", []],
      ["migrate", ["migrate"]],
      ["runs", ["runs"]],
      ["check-config", ["check-config"]],
    ];
    const results = await Promise.all(commands.map(([, args]) => runCli(t, args, env, 30_000)));
    for (const [i, [name]] of commands.entries()) {
      const r = results[i]!;
      t.equal(r.code, 3, `${name}: exit 3`);
      t.match(r.stderr, /transaction pooler/, `${name}: names the cause`);
      t.match(r.stderr, /SUPPLIER_SYNC_LEASE=table/, `${name}: names the table lease`);
      t.match(r.stderr, /session-pooled/, `${name}: names a session-pooled URL`);
    }
    t.equal(sim.stats("etm").requests, 0, "no request to the supplier");
    const runs = await query<{ n: number }>(url, "select count(*)::int as n from ingestion_runs");
    t.equal(runs[0]?.n, 0, "no run row");
  });

  t.test("transaction mode + table lease: three racing --tick-once walk once", async (t) => {
    const { url, sim, dir } = await fixture(t, { etm: 300, latencyMs: 60 });
    const bouncer = await startPgBouncer(t, { poolMode: "transaction" });
    const env = baseEnv({
      DATABASE_URL: bouncer.url(url),
      SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
      SUPPLIER_SYNC_CONNECTORS_DIR: dir,
      SUPPLIER_SYNC_LEASE: "table",
    });
    const results = await Promise.all([1, 2, 3].map(() => runCli(t, ["--tick-once"], env)));
    t.same(
      results.map((r) => r.code),
      [0, 0, 0],
      results.map((r) => r.stderr).join("\n"),
    );
    const outcomes = results.flatMap((r) =>
      r.logs.filter((l) => typeof l.outcome === "string").map((l) => l.outcome),
    );
    t.equal(outcomes.filter((o) => o === "success").length, 1, `one success among ${outcomes}`);
    t.equal(sim.stats("etm").walksStarted, 1, "walked once");
    t.equal(overlaps(sim.stats("etm").walks), 0, "0 overlaps");
    const runs = await query<{ state: string; error_code: string | null }>(
      url,
      "select state, error_code from ingestion_runs",
    );
    t.same(runs, [{ state: "succeeded", error_code: null }], "one run, succeeded, never INTERRUPTED");
    await assertInvariants(t, {
      url,
      sim,
      suppliers: [{ name: "etm", intervalMs: HOUR }],
      complete: ["etm"],
    });
  });

  t.test("transaction mode + table lease: two daemons, 3 s slots, one walk per slot", async (t) => {
    const { url, sim, dir } = await fixture(t, { etm: 200, latencyMs: 80 });
    const bouncer = await startPgBouncer(t, { poolMode: "transaction" });
    const env = baseEnv({
      DATABASE_URL: bouncer.url(url),
      SUPPLIER_SYNC_SUPPLIERS: "etm:3s",
      SUPPLIER_SYNC_CONNECTORS_DIR: dir,
      SUPPLIER_SYNC_LEASE: "table",
      SUPPLIER_SYNC_LEASE_TTL: "5s",
    });
    const a = startCli(t, [], env);
    await a.waitForLog((l) => l.msg === "scheduler started", 16_000);
    const b = startCli(t, [], env);
    await b.waitForLog((l) => l.msg === "scheduler started", 16_000);
    // Within 20 s of b's start (six 3 s slots; a start takes seconds when the two CI suites
    // share the cores, so the clock starts once both run): four walks done, and each daemon
    // through three ticks (its catch-up and two slots raced for the lease).
    const ticks = (d: CliProcess) => d.logs().filter((l) => typeof l.outcome === "string").length;
    const successes = () => [...a.logs(), ...b.logs()].filter((l) => l.outcome === "success").length;
    await until(
      () => successes() >= 4 && ticks(a) >= 3 && ticks(b) >= 3,
      20_000,
      "four successes and three ticks of each daemon within 20 s of the second start",
    );
    a.child.kill("SIGTERM");
    b.child.kill("SIGTERM");
    t.equal(await a.exited(20_000), 0, "daemon A exits 0");
    t.equal(await b.exited(20_000), 0, "daemon B exits 0");
    const stats = sim.stats("etm");
    t.ok(stats.walksCompleted >= 4, `${stats.walksCompleted} complete walks in 3 s slots`);
    t.equal(overlaps(stats.walks), 0, "0 overlaps");
    const perSlot = await query<{ slot: string; n: number }>(
      url,
      "select slot_start::text as slot, count(*)::int as n from ingestion_runs group by 1 having count(*) > 1",
    );
    t.same(perSlot, [], "exactly one run per slot");
    const leases = await query<{ expired: boolean }>(
      url,
      "select expires_at <= now() as expired from ingestion_leases",
    );
    t.same(leases, [{ expired: true }], "the lease was released on shutdown");
    await assertInvariants(t, {
      url,
      sim,
      suppliers: [{ name: "etm", intervalMs: 3_000 }],
      complete: ["etm"],
    });
  });

  t.test("session mode + advisory lease: works as today", async (t) => {
    const { url, sim, dir } = await fixture(t, { etm: 300, latencyMs: 60 });
    const bouncer = await startPgBouncer(t, { poolMode: "session" });
    const env = baseEnv({
      DATABASE_URL: bouncer.url(url),
      SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
      SUPPLIER_SYNC_CONNECTORS_DIR: dir,
    });
    const check = await runCli(t, ["check-config"], env);
    t.equal(check.code, 0, check.stderr);
    t.match(check.stdout, /advisory lease is safe/);
    const results = await Promise.all([1, 2, 3].map(() => runCli(t, ["--tick-once"], env)));
    t.same(
      results.map((r) => r.code),
      [0, 0, 0],
      results.map((r) => r.stderr).join("\n"),
    );
    t.equal(sim.stats("etm").walksStarted, 1, "walked once");
    t.equal(overlaps(sim.stats("etm").walks), 0, "0 overlaps");
    await assertInvariants(t, {
      url,
      sim,
      suppliers: [{ name: "etm", intervalMs: HOUR }],
      complete: ["etm"],
    });
  });
});
