// Issue 9, scenario 4: three --tick-once processes racing for one supplier, and two
// daemons started one after the other sharing leases over several 2 s and 3 s slots.
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, type CliProcess, runCli, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector, until } from "../helpers/fixtures.js";
import { assertInvariants } from "./helpers/invariants.js";
import { scenario } from "./helpers/scenario.js";

scenario("4a. three --tick-once processes racing", { timeoutMs: 60_000 }, async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({
    suppliers: {
      etm: { size: 400, pageSize: 50, faults: { latencyMs: 80 } },
      iek: { size: 150, pagination: "cursor" },
    },
  });
  t.teardown(() => sim.close());
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "etm:1h,iek:1h",
    SUPPLIER_SYNC_CONNECTORS_DIR: connectorsDir({
      etm: simConnector(sim.baseUrl("etm"), { request: { path: "/v1/offers", query: { limit: "50" } } }),
      iek: simConnector(sim.baseUrl("iek"), {
        pagination: { type: "cursor", param: "cursor", cursorPath: "next_cursor" },
      }),
    }),
  });
  const results = await Promise.all([1, 2, 3].map(() => runCli(t, ["--tick-once"], env)));
  t.same(
    results.map((r) => r.code),
    [0, 0, 0],
    `every racer exits 0 ${results.map((r) => r.stderr).join("")}`,
  );
  for (const supplier of ["etm", "iek"]) {
    const outcomes = results.flatMap((r) =>
      r.logs.filter((l) => l.supplier === supplier && typeof l.outcome === "string").map((l) => l.outcome),
    );
    t.equal(outcomes.filter((o) => o === "success").length, 1, `${supplier}: one success among ${outcomes}`);
    t.equal(sim.stats(supplier).walksStarted, 1, `${supplier}: walked once`);
  }
  const runs = await query<{ n: number }>(url, "select count(*)::int as n from ingestion_runs");
  t.equal(runs[0]?.n, 2, "one run row per supplier");
  return assertInvariants(t, {
    url,
    sim,
    suppliers: [
      { name: "etm", intervalMs: 3_600_000 },
      { name: "iek", intervalMs: 3_600_000 },
    ],
    complete: ["etm", "iek"],
  });
});

scenario("4b. two daemons, staggered starts, 2 s and 3 s slots", { timeoutMs: 90_000 }, async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({
    suppliers: {
      etm: { size: 200, pageSize: 50, faults: { latencyMs: 100 } },
      iek: { size: 300, pageSize: 100, faults: { latencyMs: 50 } },
    },
  });
  t.teardown(() => sim.close());
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "etm:3s,iek:2s",
    SUPPLIER_SYNC_CONNECTORS_DIR: connectorsDir({
      etm: simConnector(sim.baseUrl("etm"), { request: { path: "/v1/offers", query: { limit: "50" } } }),
      iek: simConnector(sim.baseUrl("iek")),
    }),
  });
  // b starts once a's scheduler runs; both then run until each supplier has the walks the
  // scenario asks for and each daemon did some of the work, within the 25.5 s window they
  // were given when b started 1.5 s after a and both ran 24 s.
  const startedAt = Date.now();
  const a = startCli(t, [], env);
  await a.waitForLog((l) => l.msg === "scheduler started", 20_000);
  const b = startCli(t, [], env);
  const successes = (d: CliProcess, supplier?: string) =>
    d.logs().filter((l) => l.outcome === "success" && (supplier === undefined || l.supplier === supplier))
      .length;
  await until(
    () =>
      successes(a, "etm") + successes(b, "etm") >= 6 &&
      successes(a, "iek") + successes(b, "iek") >= 9 &&
      successes(a) > 0 &&
      successes(b) > 0,
    startedAt + 25_500 - Date.now(),
    "6 etm and 9 iek successes, some by each daemon, within 25.5 s of a's start",
  );
  a.child.kill("SIGTERM");
  b.child.kill("SIGTERM");
  t.equal(await a.exited(20_000), 0, "daemon A exits 0");
  t.equal(await b.exited(20_000), 0, "daemon B exits 0");
  const stoppedAt = Date.now();
  // At most one walk per slot the daemons were up in (slots elapsed + 1).
  const slotsUp = (intervalMs: number) =>
    Math.floor(stoppedAt / intervalMs) - Math.floor(startedAt / intervalMs) + 1;
  const secs = ((stoppedAt - startedAt) / 1000).toFixed(1);
  const etmWalks = sim.stats("etm").walksCompleted;
  const iekWalks = sim.stats("iek").walksCompleted;
  t.ok(
    etmWalks >= 6 && etmWalks <= slotsUp(3_000),
    `etm: ${etmWalks} complete walks in ${secs} s of 3 s slots (${slotsUp(3_000)} slots)`,
  );
  t.ok(
    iekWalks >= 9 && iekWalks <= slotsUp(2_000),
    `iek: ${iekWalks} complete walks in ${secs} s of 2 s slots (${slotsUp(2_000)} slots)`,
  );
  const owners = await query<{ n: number }>(
    url,
    "select count(distinct owner->>'pid')::int as n from ingestion_runs where state = 'succeeded'",
  );
  t.equal(owners[0]?.n, 2, "both daemons did some of the work");
  return assertInvariants(t, {
    url,
    sim,
    suppliers: [
      { name: "etm", intervalMs: 3_000 },
      { name: "iek", intervalMs: 2_000 },
    ],
    complete: ["etm", "iek"],
  });
});
