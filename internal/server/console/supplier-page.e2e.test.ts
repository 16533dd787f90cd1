/**
 * `GET /suppliers/<name>` and the run page's links over a real loopback server and a
 * real database (docs/operations.md, Operator console): keyset paging over the whole
 * history in both directions, the state and trigger filters, the charts, held items,
 * pause state and pending triggers, escaping of supplier text, 400 for a bad query and
 * 404 for an unknown or disabled supplier.
 */
import t from "tap";
import { createTestDatabase, testPool } from "../../../test/helpers/db.js";
import type { RunState, RunTrigger } from "../../ingestion/ports.js";
import { createMetrics } from "../../observability/metrics.js";
import { ManualClock } from "../../platform/clock.js";
import { SecretRegistry } from "../../platform/redact.js";
import { CHART_RUNS, PAGE_RUNS } from "../../store/console-supplier-queries.js";
import { createHealthServer } from "../server.js";
import { captureLogger, fetchLocal, type Teardown } from "../test-support.js";
import { HOSTILE_NAME, insertRun, insertStep, seedScene } from "./test-support.js";

const NOW = Date.parse("2026-03-01T12:00:00Z");
const HOUR = 3_600_000;
const CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";
const INSTANCE = { owner: { hostname: "console-host", pid: 777, bootId: "boot-1234" }, version: "9.9.9" };

async function setup(t: Teardown) {
  const url = await createTestDatabase(t);
  const writer = testPool(t, url);
  const scene = await seedScene(writer, NOW);
  const readOnly = new (await import("pg")).default.Pool({
    connectionString: url,
    max: 4,
    options: "-c default_transaction_read_only=on",
  });
  t.teardown(() => readOnly.end());
  const server = createHealthServer({
    secrets: new SecretRegistry(),
    host: "127.0.0.1",
    port: 0,
    db: readOnly,
    suppliers: scene.suppliers,
    metrics: createMetrics({ processMetrics: false }),
    log: captureLogger().log,
    clock: new ManualClock(NOW),
    freshnessCacheMs: 0,
    instance: INSTANCE,
  });
  t.teardown(() => server.stop());
  const { port } = await server.start();
  return { port, scene, writer, get: (path: string) => fetchLocal(port, path) };
}

/** The run ids listed in the runs table, in page order. */
function listed(body: string): number[] {
  return [...body.matchAll(/<tr data-run="(\d+)">/g)].map((m) => Number(m[1]));
}

/** The href of a pager link (`older`, `newer`, `newest`), entities decoded. */
function link(body: string, which: string): string | undefined {
  const m = body.match(new RegExp(`<a href="([^"]+)"[^>]*data-page="${which}"`));
  return m?.[1]?.replaceAll("&amp;", "&");
}

const STATES: RunState[] = [
  "succeeded",
  "succeeded",
  "failed",
  "partial",
  "succeeded",
  "failed",
  "succeeded",
];
const TRIGGERS: RunTrigger[] = ["schedule", "retry", "schedule", "forced", "tick_once"];

/**
 * 173 more runs of `iek` (175 in all) with mixed states and triggers; runs 3k and 3k+1
 * start in the same microsecond, so only the id orders them.
 */
async function seedHistory(writer: import("pg").Pool): Promise<void> {
  for (let i = 0; i < 173; i++) {
    const tie = i % 3 === 1 ? i - 1 : i;
    await insertRun(writer, {
      supplier: "iek",
      state: STATES[i % STATES.length] as RunState,
      trigger: TRIGGERS[i % TRIGGERS.length] as RunTrigger,
      startedAt: new Date(NOW - 60 * HOUR + tie * 60_000),
      slotStart: new Date(NOW - 60 * HOUR + i * 60_000),
      durationMs: 1_000 + (i % 9) * 500,
      errorCode: i % 7 === 2 ? "HTTP_503" : null,
      inserted: i % 5,
      updated: i % 4,
    });
  }
}

async function allIds(writer: import("pg").Pool, where: string, params: unknown[]): Promise<number[]> {
  const { rows } = await writer.query<{ id: string }>(
    `select id from ingestion_runs where supplier = 'iek' ${where} order by id desc`,
    params,
  );
  return rows.map((r) => Number(r.id));
}

/** Follows `which` links from `path` to the end, returning every page's ids. */
async function walk(
  get: (p: string) => Promise<{ status: number; body: string }>,
  path: string,
  which: string,
) {
  const pages: number[][] = [];
  let next: string | undefined = path;
  while (next !== undefined) {
    const res = await get(next);
    if (res.status !== 200) throw new Error(`${next} answered ${res.status}`);
    pages.push(listed(res.body));
    next = link(res.body, which);
    if (pages.length > 50) throw new Error("paging does not end");
  }
  return pages;
}

t.test("a supplier's page: status, charts and its runs, with the console's headers", async (t) => {
  const { get, scene } = await setup(t);
  const res = await get("/suppliers/etm");
  t.equal(res.status, 200);
  t.equal(res.headers["content-security-policy"], CSP);
  t.equal(res.headers["x-content-type-options"], "nosniff");
  t.equal(res.headers["content-type"], "text/html; charset=utf-8");
  t.match(res.body, 'data-status="ok"');
  t.match(res.body, 'data-paused="no"');
  t.match(res.body, 'data-held="0"');
  t.match(res.body, "every 6h");
  const ids = listed(res.body);
  t.equal(ids.length, scene.etmRuns, "all 40 runs on one page");
  t.equal(ids[0], scene.etmLastRun, "newest first");
  t.same(
    ids,
    [...ids].sort((a, b) => b - a),
    "ordered by id, newest first",
  );
  t.notOk(link(res.body, "older"), "no older page");
  t.notOk(link(res.body, "newer"), "no newer page");
  for (const chart of ["chart-duration", "chart-changed", "chart-freshness"]) {
    const start = res.body.indexOf(`<figure class="chart" id="${chart}">`);
    t.ok(start >= 0, `${chart} drawn`);
    const svg = res.body.slice(start, res.body.indexOf("</figure>", start));
    t.equal(svg.match(/<a href="\/runs\/\d+">/g)?.length, scene.etmRuns, `${chart}: one mark per run`);
  }
  t.match(res.body, /class="threshold"/, "the stale threshold on the freshness chart");
  t.match(res.body, /stale at 12h/);
  // The runs' 420 ms durations and counts.
  t.match(res.body, /<td class="num">420ms<\/td>/);
  t.notOk(res.body.includes("<script"), "no script");
  t.notOk(/https?:\/\//.test(res.body), "no external resource");
});

t.test("keyset paging walks the whole history both ways, each run once", async (t) => {
  const { get, writer } = await setup(t);
  await seedHistory(writer);
  const expected = await allIds(writer, "", []);
  t.equal(expected.length, 175);

  const older = await walk(get, "/suppliers/iek", "older");
  t.equal(older.length, Math.ceil(175 / PAGE_RUNS), "4 pages");
  for (const p of older.slice(0, -1)) t.equal(p.length, PAGE_RUNS, "full pages");
  t.same(older.flat(), expected, "every run once, newest first, across pages (ties broken by id)");

  // From the oldest page back to the newest through `newer`.
  const last = await get(`/suppliers/iek?before=${(older.at(-2) ?? []).at(-1)}`);
  t.same(listed(last.body), older.at(-1));
  t.notOk(link(last.body, "older"), "the oldest page has no older link");
  const back = await walk(get, `/suppliers/iek?before=${(older.at(-2) ?? []).at(-1)}`, "newer");
  const seen = back.flat();
  t.same(
    [...new Set(seen)].sort((a, b) => b - a),
    expected,
    "every run reached going back",
  );
  const head = back.at(-1) ?? [];
  t.same(head, older[0], "the walk back ends at the newest page, as full as the first");

  // A cursor beyond the head and one older than every run.
  const none = await get("/suppliers/iek?before=1");
  t.equal(none.status, 200);
  t.same(listed(none.body), []);
  t.match(none.body, 'id="no-runs"');
  t.ok(link(none.body, "newer"), "an empty old page still links to newer runs");
  const after = await get(`/suppliers/iek?after=${expected[0]}`);
  t.same(listed(after.body), older[0], "after the newest: the newest page");
});

t.test("filters by state and trigger, combined, kept across pages", async (t) => {
  const { get, writer } = await setup(t);
  await seedHistory(writer);

  const failed = await walk(get, "/suppliers/iek?state=failed", "older");
  t.same(failed.flat(), await allIds(writer, "and state = $1", ["failed"]), "every failed run, newest first");
  const succeeded = await walk(get, "/suppliers/iek?state=succeeded", "older");
  t.same(succeeded.flat(), await allIds(writer, "and state = $1", ["succeeded"]));
  t.ok(succeeded.length > 1, "more than a page of succeeded runs");

  const retry = await walk(get, "/suppliers/iek?trigger=retry", "older");
  t.same(retry.flat(), await allIds(writer, "and trigger = $1", ["retry"]));

  const both = await walk(get, "/suppliers/iek?state=succeeded&trigger=tick_once", "older");
  t.same(both.flat(), await allIds(writer, "and state = $1 and trigger = $2", ["succeeded", "tick_once"]));
  const two = await walk(get, "/suppliers/iek?state=partial&state=failed", "older");
  t.same(two.flat(), await allIds(writer, "and state = any($1)", [["partial", "failed"]]), "two states");

  const page = await get("/suppliers/iek?state=succeeded&trigger=");
  t.match(page.body, /<option value="succeeded" selected>/, "the form shows the filter");
  t.match(link(page.body, "older") ?? "", /state=succeeded/, "the older link keeps the filter");
  t.match(page.body, 'href="/suppliers/iek">clear filters</a>');

  const nothing = await get("/suppliers/iek?state=running");
  t.equal(nothing.status, 200);
  t.same(listed(nothing.body), []);
  t.match(nothing.body, "No run matches these filters.");
});

t.test("a bad query is a 400 that names the parameter; unknown suppliers are 404", async (t) => {
  const { get } = await setup(t);
  for (const [path, says] of [
    ["/suppliers/iek?state=broken", "state=broken is not a run state"],
    ["/suppliers/iek?trigger=%3Cb%3Ex", "trigger=&lt;b&gt;x is not a run trigger"],
    ["/suppliers/iek?before=abc", "before=abc is not a run id"],
    ["/suppliers/iek?after=0", "after=0 is not a run id"],
    ["/suppliers/iek?before=5&after=3", "at most one of before= and after="],
    ["/suppliers/iek?page=2", "page is not a parameter of this page"],
  ] as const) {
    const res = await get(path);
    t.equal(res.status, 400, path);
    t.equal(res.headers["content-security-policy"], CSP, `${path} CSP`);
    t.match(res.body, says, `${path} names the problem`);
    t.notOk(res.body.includes("<b>x"), `${path} reflects no markup`);
  }
  for (const path of [
    "/suppliers/nope",
    "/suppliers/yml",
    "/suppliers/",
    "/suppliers/%3Cscript%3E",
    "/suppliers/etm/x",
  ]) {
    const res = await get(path);
    t.equal(res.status, 404, path);
    t.equal(res.headers["content-security-policy"], CSP, `${path} CSP`);
    t.notOk(res.body.includes("<script"), `${path} reflects no markup`);
  }
});

t.test("held items, pause and pending triggers show, supplier text escaped", async (t) => {
  const { get, writer, scene } = await setup(t);
  await writer.query(
    `insert into ingestion_held (run_id, supplier, sku, kind, reason, stored, proposed)
     values ($1, 'etm', $2, 'price_jump', $3, $4::jsonb, $5::jsonb),
            ($1, 'etm', null, 'delist', 'would delist 40 of 120 offers', '{"listed":120}', '{"delisted":40}')`,
    [
      scene.etmLastRun,
      HOSTILE_NAME,
      `price × 12 ${HOSTILE_NAME}`,
      JSON.stringify({ price: "10.00", name: HOSTILE_NAME }),
      JSON.stringify({ price: "120.00" }),
    ],
  );
  await writer.query(
    "insert into ingestion_controls (supplier, paused_at, paused_by, pause_reason) values ('etm', $1, $2, $3)",
    [new Date(NOW - HOUR), "ops<i>x</i>", `supplier migrating ${HOSTILE_NAME}`],
  );
  await writer.query(
    "insert into ingestion_triggers (supplier, requested_at, requested_by) values ('etm', $1, 'console')",
    [new Date(NOW - 60_000)],
  );
  await insertRun(writer, {
    supplier: "etm",
    state: "failed",
    startedAt: new Date(NOW - 30 * 60_000),
    durationMs: 100,
    errorCode: "SUPPLIER",
    errorMessage: `the supplier said ${HOSTILE_NAME}`,
  });
  const res = await get("/suppliers/etm");
  t.equal(res.status, 200);
  t.match(res.body, 'data-paused="yes"');
  t.match(res.body, "ops&lt;i&gt;x&lt;/i&gt;", "paused_by escaped");
  t.match(res.body, 'data-pending-triggers="1"');
  t.match(res.body, 'data-held="2"');
  t.equal(res.body.match(/<tr data-held-id="/g)?.length, 2, "both held items listed");
  t.match(res.body, "would delist 40 of 120 offers");
  t.match(res.body, /&quot;price&quot;:&quot;120.00&quot;/, "the proposed value");
  t.match(
    res.body,
    `<a href="/runs/${scene.etmLastRun}">#${scene.etmLastRun}</a>`,
    "held item links its run",
  );
  t.notOk(res.body.includes("<script"), "no script element from supplier text");
  t.notOk(res.body.includes("<img"), "no img element from supplier text");
  t.notOk(res.body.includes("<i>x"), "no markup from paused_by");
  t.match(res.body, "&lt;script&gt;window.__pwned=&#39;script&#39;&lt;/script&gt;");
  t.match(res.body, 'title="the supplier said &lt;script&gt;', "error message escaped in its attribute");
});

t.test("a run page: labels, owner as host/pid, links to the supplier and its neighbours", async (t) => {
  const { get, writer, scene } = await setup(t);
  const ids = await writer.query<{ id: string }>(
    "select id from ingestion_runs where supplier = 'etm' order by id",
  );
  const etm = ids.rows.map((r) => Number(r.id));
  const middle = etm[10] as number;
  const res = await get(`/runs/${middle}`);
  t.equal(res.status, 200);
  t.match(res.body, '<a href="/suppliers/etm" data-link="supplier">etm</a>');
  t.match(res.body, `<a href="/runs/${etm[9]}" rel="prev" data-link="previous">`);
  t.match(res.body, `<a href="/runs/${etm[11]}" rel="next" data-link="next">`);
  t.match(res.body, '<span class="code">worker-a/4242</span>', "owner as host/pid");
  t.match(res.body, "boot b00t");
  t.notOk(res.body.includes("{&quot;hostname"), "no raw owner JSON");
  t.match(res.body, /<dt>Duration<\/dt><dd data-column="duration">420ms<\/dd>/);
  t.match(res.body, /<dt>Started<\/dt>/);
  t.notOk(res.body.includes(">null<"), "no bare nulls");

  const first = await get(`/runs/${etm[0]}`);
  t.match(first.body, "first run");
  const last = await get(`/runs/${scene.etmLastRun}`);
  t.match(last.body, "latest run");
  t.match(
    last.body,
    /<tr data-seq="1">.*<td>11:00:00\.000Z<\/td><td>11:00:00\.130Z<\/td><\/tr>/,
    "step started and finished",
  );
  t.match(last.body, /<tr data-seq="1">.*<td class="num">130ms<\/td>/, "step duration");

  const failed = await get(`/runs/${scene.iekFailedRun}`);
  t.match(failed.body, "answered 503 after 5 attempts");
  t.match(failed.body, '<a href="/suppliers/iek" data-link="supplier">');

  // A run of a disabled supplier: no link to a page that does not exist.
  const yml = await writer.query<{ id: string }>("select id from ingestion_runs where supplier = 'yml'");
  const disabled = await get(`/runs/${yml.rows[0]?.id}`);
  t.equal(disabled.status, 200);
  t.notOk(disabled.body.includes('href="/suppliers/yml"'));
  t.match(disabled.body, "not enabled here");
  await insertStep(writer, middle, {
    seq: 1,
    state: "succeeded",
    startedAt: new Date(NOW),
    durationMs: 2_500,
    records: 10,
    httpAttempts: 1,
  });
  const withStep = await get(`/runs/${middle}`);
  t.match(withStep.body, /<td class="num">2\.5s<\/td>/, "a step's duration");
});

t.test("the charts hold the last 100 runs and freshness follows successes", async (t) => {
  const { get, writer } = await setup(t);
  await seedHistory(writer);
  const res = await get("/suppliers/iek");
  const start = res.body.indexOf('<figure class="chart" id="chart-freshness">');
  const svg = res.body.slice(start, res.body.indexOf("</figure>", start));
  t.equal(svg.match(/<circle /g)?.length, CHART_RUNS, "one point per run of the last 100");
  t.match(svg, /data 0ms old after it/, "0 after a success");
  t.match(svg, /#\d+ failed · data \d/, "a failed run's point shows the data's age");
});
