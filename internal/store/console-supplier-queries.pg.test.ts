/**
 * The supplier page's queries against a real database, big enough (60,000 runs) that
 * the planner at its defaults would pick a sequential scan wherever one were cheaper:
 * every statement reads ingestion_runs through an index, and no probe reads more
 * than its limit, with or without filters, at the head or deep in the history.
 */
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import {
  CHART_RUNS,
  CHART_SQL,
  NEWER_IDS_SQL,
  OLDER_IDS_SQL,
  PAGE_RUNS,
  RUN_STATES,
  RUN_TRIGGERS,
  RUNS_BY_ID_SQL,
  readNeighbours,
  readRunPage,
  SUCCESS_BEFORE_SQL,
} from "./console-supplier-queries.js";
import { explainJson, type PlanNode, scansOf } from "./explain.js";

const SUPPLIERS = 200;
const RUNS_PER_SUPPLIER = 300;

function overRead(plan: PlanNode, max: number): string[] {
  const own =
    plan["Relation Name"] === "ingestion_runs" &&
    typeof plan["Actual Rows"] === "number" &&
    plan["Actual Rows"] > max
      ? [`${plan["Node Type"]} ${plan["Index Name"] ?? ""}: ${plan["Actual Rows"]} rows per loop`]
      : [];
  return [...own, ...(plan.Plans ?? []).flatMap((c) => overRead(c, max))];
}

t.test("supplier page queries", async (t) => {
  const db = testPool(t, await createTestDatabase(t));
  // Every 10th run failed (retry), every 17th partial, the rest succeeded (schedule).
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
            timestamptz '2026-01-01' + r * interval '1 hour' + s * interval '1 second',
            timestamptz '2026-01-01' + r * interval '1 hour' + s * interval '1 second' + interval '90 seconds',
            5, 500
       from generate_series(1, $2::int) r, generate_series(1, $1::int) s`,
    [SUPPLIERS, RUNS_PER_SUPPLIER],
  );
  await db.query("vacuum analyze ingestion_runs");
  const supplier = "s0100";
  const ids = (
    await db.query<{ id: string }>("select id from ingestion_runs where supplier = $1 order by id desc", [
      supplier,
    ])
  ).rows.map((r) => Number(r.id));
  const deep = String(ids[200]);
  const every = [[...RUN_STATES], [...RUN_TRIGGERS]];

  t.test("plans: indexed, each probe within its limit", async (t) => {
    const cases: [string, string, unknown[], number][] = [
      [
        "page at the head",
        OLDER_IDS_SQL,
        [supplier, ...every, "9223372036854775807", PAGE_RUNS + 1],
        PAGE_RUNS + 1,
      ],
      ["page deep", OLDER_IDS_SQL, [supplier, ...every, deep, PAGE_RUNS + 1], PAGE_RUNS + 1],
      [
        "state=failed",
        OLDER_IDS_SQL,
        [supplier, ["failed"], [...RUN_TRIGGERS], deep, PAGE_RUNS + 1],
        PAGE_RUNS + 1,
      ],
      [
        "trigger=manual (none)",
        OLDER_IDS_SQL,
        [supplier, [...RUN_STATES], ["manual"], deep, PAGE_RUNS + 1],
        0,
      ],
      ["newer probe", NEWER_IDS_SQL, [supplier, ...every, deep, 1], 1],
      ["rows by id", RUNS_BY_ID_SQL, [ids.slice(200, 250).map(String)], PAGE_RUNS],
      ["chart", CHART_SQL, [supplier, CHART_RUNS], CHART_RUNS],
      ["success before", SUCCESS_BEFORE_SQL, [supplier, new Date("2026-01-05T00:00:00Z")], 1],
    ];
    for (const [what, sql, params, max] of cases) {
      const { plan } = await explainJson(db, sql, params, { analyze: true });
      t.same(
        scansOf(plan).filter((s) => s.relation === "ingestion_runs" && !s.index),
        [],
        `${what}: no scan of ingestion_runs without an index`,
      );
      t.same(overRead(plan, max), [], `${what}: no probe reads more than ${max} rows`);
    }
    const page = (
      await explainJson(db, OLDER_IDS_SQL, [supplier, ...every, deep, PAGE_RUNS + 1], { analyze: true })
    ).plan;
    t.ok(
      scansOf(page).some((s) => s.index === "ingestion_runs_supplier_state_trigger_id"),
      "the list reads (supplier, state, trigger, id)",
    );
  });

  t.test("pages and neighbours agree with the table", async (t) => {
    const head = await readRunPage(db, supplier, { states: [], triggers: [] }, { kind: "newest" });
    t.same(
      head.runs.map((r) => r.id),
      ids.slice(0, PAGE_RUNS),
    );
    t.equal(head.newer, null);
    t.equal(head.older, ids[PAGE_RUNS - 1]);
    const failed = await readRunPage(db, supplier, { states: ["failed"], triggers: [] }, { kind: "newest" });
    const allFailed = (
      await db.query<{ id: string }>(
        "select id from ingestion_runs where supplier = $1 and state = 'failed' order by id desc",
        [supplier],
      )
    ).rows.map((r) => Number(r.id));
    t.same(
      failed.runs.map((r) => r.id),
      allFailed.slice(0, PAGE_RUNS),
    );
    const near = await readNeighbours(db, supplier, deep);
    t.same(near, { previous: ids[201], next: ids[199] });
    const first = await readNeighbours(db, supplier, String(ids.at(-1)));
    t.equal(first.previous, null);
  });
});
