/**
 * The console's queries against a real database: what they return, and that their
 * plans stay indexed and bounded. The history is big enough (60,000 runs, tens of
 * thousands of steps and rejects) that the planner, left at its defaults
 * (`enable_seqscan` on), would pick a sequential scan wherever one were cheaper: on a
 * handful of rows it always is, which would prove nothing. With `analyze`, each
 * per-supplier lookup is checked to read at most its `limit` of rows, whatever the
 * supplier's history.
 */
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import {
  LATEST_SQL,
  parseRunId,
  REJECT_RAW_MAX_BYTES,
  REJECTS_COUNT_SQL,
  REJECTS_SQL,
  RUN_SQL,
  readOverview,
  readRunDetail,
  STEPS_COUNT_SQL,
  STEPS_SQL,
  STRIP_RUNS,
  STRIPS_SQL,
} from "./console-queries.js";
import { explainJson, type PlanNode, scansOf } from "./explain.js";
import { LAST_SUCCESSES_SQL } from "./run-queries.js";

const SUPPLIERS = 200;
const RUNS_PER_SUPPLIER = 300;
const BIG_TABLES = ["ingestion_runs", "ingestion_run_steps", "ingestion_rejects"];
const names = Array.from({ length: SUPPLIERS }, (_, i) => `s${String(i + 1).padStart(4, "0")}`);

async function seedHistory(db: ReturnType<typeof testPool>): Promise<void> {
  // Every 10th run failed, every 17th partial, the rest succeeded; one slot per run.
  await db.query(
    `insert into ingestion_runs (supplier, slot_start, trigger, state, error_code, owner,
                                 started_at, heartbeat_at, finished_at, pages, records_seen)
     select 's' || lpad(s::text, 4, '0'),
            timestamptz '2026-01-01' + r * interval '1 hour',
            case when r % 10 = 0 then 'retry' else 'schedule' end,
            case when r % 10 = 0 then 'failed' when r % 17 = 0 then 'partial' else 'succeeded' end,
            case when r % 10 = 0 then 'HTTP_503' when r % 17 = 0 then 'DEADLINE' end,
            '{"hostname":"h","pid":1,"bootId":"b"}'::jsonb,
            timestamptz '2026-01-01' + r * interval '1 hour' + s * interval '1 second',
            timestamptz '2026-01-01' + r * interval '1 hour' + s * interval '1 second' + interval '90 seconds',
            timestamptz '2026-01-01' + r * interval '1 hour' + s * interval '1 second' + interval '90 seconds',
            5, 500
       from generate_series(1, $1::int) s, generate_series(1, $2::int) r`,
    [SUPPLIERS, RUNS_PER_SUPPLIER],
  );
  // Steps for every run of the first 20 suppliers, rejects for the first 10.
  await db.query(
    `insert into ingestion_run_steps (run_id, seq, state, started_at, finished_at, records, http_attempts)
     select r.id, q, 'succeeded', r.started_at, r.started_at + interval '1 second', 100, 1
       from ingestion_runs r, generate_series(1, 5) q
      where r.supplier <= 's0020'`,
  );
  await db.query(
    `insert into ingestion_rejects (run_id, supplier, seq, reason, raw)
     select r.id, r.supplier, q, 'price: not a number', jsonb_build_object('article', 'A' || q, 'price', 'x')
       from ingestion_runs r, generate_series(1, 5) q
      where r.supplier <= 's0010'`,
  );
  await db.query("vacuum analyze ingestion_runs, ingestion_run_steps, ingestion_rejects");
}

/** Nodes of the plan whose actual rows per loop exceed `max` on `relation`. */
function overRead(plan: PlanNode, relation: string, max: number): string[] {
  const out: string[] = [];
  const walk = (n: PlanNode) => {
    const rows = n["Actual Rows"];
    if (n["Relation Name"] === relation && typeof rows === "number" && rows > max) {
      out.push(`${n["Node Type"]} ${n["Index Name"] ?? ""}: ${rows} rows per loop`);
    }
    for (const child of n.Plans ?? []) walk(child);
  };
  walk(plan);
  return out;
}

t.test("console queries", async (t) => {
  const db = testPool(t, await createTestDatabase(t));
  await seedHistory(db);
  const sample = await db.query<{ id: string }>(
    "select id from ingestion_runs where supplier = 's0005' order by id desc limit 1",
  );
  const runId = sample.rows[0]?.id ?? "";

  t.test("the overview: last success, last run and 30 newest runs per supplier, in order", async (t) => {
    const { latest, strips } = await readOverview(db, ["s0002", "nobody", "s0001"]);
    t.same(
      latest.map((r) => r.supplier),
      ["s0002", "nobody", "s0001"],
      "in the order asked",
    );
    const [s2, nobody] = latest;
    const recent = strips.get("s0002") ?? [];
    t.equal(recent.length, STRIP_RUNS);
    t.equal(s2?.lastRun?.id, recent[0]?.id, "the last run heads the strip");
    t.equal(s2?.lastRun?.state, "failed", "run 300 failed (every 10th)");
    t.equal(recent[0]?.errorCode, "HTTP_503");
    t.equal(
      recent[0]?.finishedAt?.getTime(),
      (recent[0]?.startedAt.getTime() ?? 0) + 90_000,
      "duration kept",
    );
    t.equal(s2?.lastRun?.errorCode, "HTTP_503");
    t.equal(s2?.lastRun?.counts.recordsSeen, 500);
    t.equal(s2?.lastSuccess?.toISOString(), "2026-01-13T11:01:32.000Z", "run 299 is the last success");
    const starts = recent.map((r) => r.startedAt.getTime());
    t.same(
      starts,
      [...starts].sort((a, b) => b - a),
      "newest first",
    );
    t.equal(recent[0]?.startedAt.toISOString(), "2026-01-13T12:00:02.000Z");
    t.same(nobody, { supplier: "nobody", lastSuccess: null, lastRun: null });
    t.notOk(strips.has("nobody"), "no strip query for a supplier without runs");

    const only = await readOverview(db, ["s0001", "s0002"], (l) => l.supplier === "s0001");
    t.same([...only.strips.keys()], ["s0001"], "strips only where asked");
  });

  t.test("a run page's reads", async (t) => {
    const detail = await readRunDetail(db, runId);
    t.ok(detail);
    t.equal(detail?.supplier, "s0005");
    t.equal(detail?.steps.length, 5);
    t.equal(detail?.stepsTotal, 5);
    t.equal(detail?.rejects.length, 5);
    t.match(detail?.rejects[0]?.raw, /"article": "A1"/);
    t.ok((detail?.rejects[0]?.rawBytes ?? 0) < REJECT_RAW_MAX_BYTES);
    t.equal(await readRunDetail(db, "999999999"), undefined);
  });

  t.test("plans: indexed, and each lookup bounded by its limit", async (t) => {
    const latest = (await explainJson(db, LATEST_SQL, [names], { analyze: true })).plan;
    const strips = (await explainJson(db, STRIPS_SQL, [names, STRIP_RUNS], { analyze: true })).plan;
    for (const [what, plan] of [
      ["latest", latest],
      ["strips", strips],
    ] as const) {
      t.same(
        scansOf(plan).filter((s) => s.relation === "ingestion_runs" && !s.index),
        [],
        `${what}: no scan of ingestion_runs without an index`,
      );
      t.same(
        overRead(plan, "ingestion_runs", STRIP_RUNS),
        [],
        `${what}: no lookup reads more than 30 runs per supplier`,
      );
    }
    const indexes = new Set([...scansOf(latest), ...scansOf(strips)].map((s) => s.index));
    t.ok(indexes.has("ingestion_runs_supplier_started"), "newest runs through (supplier, started_at desc)");
    t.ok(indexes.has("ingestion_runs_supplier_success"), "last success through the partial success index");
    const probes = (n: PlanNode, index: string): PlanNode[] =>
      n["Index Name"] === index ? [n] : (n.Plans ?? []).flatMap((c) => probes(c, index));
    const success = (n: PlanNode) => probes(n, "ingestion_runs_supplier_success");
    t.same(
      success(latest).map((n) => n["Actual Rows"]),
      [1],
      "the last success is one index entry per supplier",
    );
    t.same(
      probes(latest, "ingestion_runs_supplier_started").map((n) => n["Actual Rows"]),
      [1],
      "the last run is one index entry per supplier",
    );
    t.same(
      probes(strips, "ingestion_runs_supplier_started").map((n) => [n["Actual Rows"], n["Actual Loops"]]),
      [[STRIP_RUNS, SUPPLIERS]],
      "the strip: 30 index entries for each supplier",
    );

    // The same holds for the freshness query behind /readyz and the console's fallback.
    const freshness = (await explainJson(db, LAST_SUCCESSES_SQL, [names], { analyze: true })).plan;
    t.same(
      probes(freshness, "ingestion_runs_complete_walk").map((n) => n["Actual Rows"]),
      [1],
      "/readyz freshness: one entry of the complete-walk index per supplier",
    );

    const runPage: [string, unknown[], string][] = [
      [RUN_SQL, [runId], "ingestion_runs_pkey"],
      [STEPS_SQL, [runId, 1001], "ingestion_run_steps_run_seq"],
      [STEPS_COUNT_SQL, [runId], "ingestion_run_steps_run_seq"],
      [REJECTS_SQL, [runId, 101, REJECT_RAW_MAX_BYTES + 1], "ingestion_rejects_run"],
      [REJECTS_COUNT_SQL, [runId], "ingestion_rejects_run"],
    ];
    for (const [sql, params, index] of runPage) {
      const scansOfPage = scansOf((await explainJson(db, sql, params)).plan);
      t.same(
        scansOfPage.filter((s) => BIG_TABLES.includes(s.relation) && s.index === undefined),
        [],
        `${sql.split("\n")[0]}: no unindexed scan`,
      );
      t.ok(
        scansOfPage.some((s) => s.index === index),
        `${sql.split("\n")[0]}: uses ${index}`,
      );
    }
  });
});

t.test("run ids", async (t) => {
  t.equal(parseRunId("1"), "1");
  t.equal(parseRunId("9223372036854775807"), "9223372036854775807");
  for (const bad of ["", "0", "01", "-1", "1.0", "1e3", " 1", "9223372036854775808", "abc", "1/2"]) {
    t.equal(parseRunId(bad), undefined, JSON.stringify(bad));
  }
});
