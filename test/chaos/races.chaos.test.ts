// Issue 9, scenario 4: three --tick-once processes racing for one supplier, and two
// daemons started 1.5 s apart sharing leases over several 3 s slots.
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, runCli, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector } from "../helpers/fixtures.js";
import { assertInvariants } from "./helpers/invariants.js";
import { scenario } from "./helpers/scenario.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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

scenario("4b. two daemons, staggered starts, 3 s slots for 24 s", { timeoutMs: 90_000 }, async (t) => {
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
  const a = startCli(t, [], env);
  await sleep(1_500);
  const b = startCli(t, [], env);
  await sleep(24_000);
  a.child.kill("SIGTERM");
  b.child.kill("SIGTERM");
  t.equal(await a.exited(20_000), 0, "daemon A exits 0");
  t.equal(await b.exited(20_000), 0, "daemon B exits 0");
  const etmWalks = sim.stats("etm").walksCompleted;
  const iekWalks = sim.stats("iek").walksCompleted;
  t.ok(etmWalks >= 6 && etmWalks <= 9, `etm: ${etmWalks} complete walks in ~25 s of 3 s slots`);
  t.ok(iekWalks >= 9 && iekWalks <= 14, `iek: ${iekWalks} complete walks in ~25 s of 2 s slots`);
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
