// --tick-once as cron runs it: real CLI processes, the simulator over loopback, a real database.
import t from "tap";
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, runCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector } from "../helpers/fixtures.js";

t.test("--tick-once twice on an unchanged catalog: the second writes no observation", async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({
    suppliers: { etm: { size: 450, pageSize: 100 }, iek: { size: 120, pagination: "cursor" } },
  });
  t.teardown(() => sim.close());
  const dir = connectorsDir({
    etm: simConnector(sim.baseUrl("etm")),
    iek: simConnector(sim.baseUrl("iek"), {
      pagination: { type: "cursor", param: "cursor", cursorPath: "next_cursor" },
    }),
  });
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "etm:1h,iek:1h",
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
  });

  const first = await runCli(t, ["--tick-once"], env);
  t.equal(first.code, 0, first.stderr);
  const counts = await query<{ supplier: string; n: number }>(
    url,
    "select supplier, count(*)::int as n from supplier_offers group by 1 order by 1",
  );
  t.same(counts, [
    { supplier: "etm", n: 450 },
    { supplier: "iek", n: 120 },
  ]);
  const obs1 = await query<{ n: number }>(url, "select count(*)::int as n from supplier_offer_observations");
  t.equal(obs1[0]?.n, 570, "one observation per first sighting");

  const notDue = await runCli(t, ["--tick-once"], env);
  t.equal(notDue.code, 0, "not_due is success for the exit code");
  t.ok(
    notDue.logs.some((l) => l.outcome === "not_due"),
    "the due gate reports not_due",
  );

  const forced = await runCli(t, ["--tick-once", "--force", "--supplier", "etm"], env);
  t.equal(forced.code, 0, forced.stderr);
  const obs2 = await query<{ n: number }>(url, "select count(*)::int as n from supplier_offer_observations");
  t.equal(obs2[0]?.n, 570, "no new observation");
  const offers2 = await query<{ n: number }>(url, "select count(*)::int as n from supplier_offers");
  t.equal(offers2[0]?.n, 570, "offer count unchanged");
  const runs = await query<{ trigger: string; state: string; records_unchanged: number }>(
    url,
    "select trigger, state, records_unchanged from ingestion_runs where supplier = 'etm' order by id",
  );
  t.same(runs, [
    { trigger: "tick_once", state: "succeeded", records_unchanged: 0 },
    { trigger: "forced", state: "succeeded", records_unchanged: 450 },
  ]);
});

t.test("three --tick-once processes at once: exactly one run, all exit 0", async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({
    suppliers: { etm: { size: 300, pageSize: 50, faults: { latencyMs: 60 } } },
  });
  t.teardown(() => sim.close());
  const dir = connectorsDir({
    etm: simConnector(sim.baseUrl("etm"), { request: { path: "/v1/offers", query: { limit: "50" } } }),
  });
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
  });
  const results = await Promise.all(
    [1, 2, 3].map(() => runCli(t, ["--tick-once", "--supplier", "etm"], env)),
  );
  t.same(
    results.map((r) => r.code),
    [0, 0, 0],
    results.map((r) => r.stderr).join("\n"),
  );
  const outcomes = results
    .flatMap((r) => r.logs.filter((l) => typeof l.outcome === "string").map((l) => l.outcome))
    .sort();
  t.equal(outcomes.filter((o) => o === "success").length, 1, `one success among ${outcomes.join(",")}`);
  t.equal(outcomes.filter((o) => o === "lease_busy" || o === "not_due").length, 2);
  const runs = await query<{ n: number }>(url, "select count(*)::int as n from ingestion_runs");
  t.equal(runs[0]?.n, 1, "exactly one run row");
  t.equal(sim.stats("etm").walksStarted, 1, "the supplier was walked once");
});

t.test("a failing supplier exits 1 and does not stop the others", async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({
    suppliers: { good: { size: 50 }, bad: { size: 50, faults: { status: { code: 401 } } } },
  });
  t.teardown(() => sim.close());
  const dir = connectorsDir({
    good: simConnector(sim.baseUrl("good")),
    bad: simConnector(sim.baseUrl("bad")),
  });
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "good:1h,bad:1h,ghost:1h",
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
  });
  const r = await runCli(t, ["--tick-once"], env);
  t.equal(r.code, 1);
  const runs = await query<{ supplier: string; state: string; error_code: string | null }>(
    url,
    "select supplier, state, error_code from ingestion_runs order by supplier",
  );
  t.same(runs, [
    { supplier: "bad", state: "failed", error_code: "AUTH" },
    { supplier: "ghost", state: "failed", error_code: "CONNECTOR_MISSING" },
    { supplier: "good", state: "succeeded", error_code: null },
  ]);
});
