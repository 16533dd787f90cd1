/**
 * The console over a real loopback server and a real database (docs/operations.md, Operator console): what the
 * pages contain, their headers, 404s, the bounds on steps and rejects, escaping, and
 * that the console writes nothing. The browser's view is in console.browser.e2e.test.ts.
 */
import t from "tap";
import { createTestDatabase, testPool } from "../../../test/helpers/db.js";
import { createMetrics } from "../../observability/metrics.js";
import { ManualClock } from "../../platform/clock.js";
import { SecretRegistry } from "../../platform/redact.js";
import { MAX_REJECTS_SHOWN, REJECT_RAW_MAX_BYTES } from "../../store/console-queries.js";
import { createHealthServer } from "../server.js";
import {
  captureLogger,
  deadDatabasePool,
  fetchLocal,
  hungDatabasePool,
  type Teardown,
} from "../test-support.js";
import { HOSTILE_NAME, insertReject, insertRun, insertStep, seedScene } from "./test-support.js";

const NOW = Date.parse("2026-03-01T12:00:00Z");
const CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";
const INSTANCE = { owner: { hostname: "console-host", pid: 777, bootId: "boot-1234" }, version: "9.9.9" };

async function setup(t: Teardown) {
  const url = await createTestDatabase(t);
  const writer = testPool(t, url);
  const scene = await seedScene(writer, NOW);
  // The console's own pool refuses writes: a page that tried one would fail.
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
  return { port, scene, writer, get: (path: string, method = "GET") => fetchLocal(port, path, { method }) };
}

function rowOf(body: string, supplier: string): string {
  const start = body.indexOf(`<tr data-supplier="${supplier}">`);
  if (start < 0) return "";
  return body.slice(start, body.indexOf("</tr>", start));
}

t.test("/ has one row per enabled supplier with status, last run and a strip of 30", async (t) => {
  const { get, scene } = await setup(t);
  const res = await get("/");
  t.equal(res.status, 200);
  t.equal(res.headers["content-type"], "text/html; charset=utf-8");
  t.equal(res.headers["content-security-policy"], CSP);
  t.equal(res.headers["x-content-type-options"], "nosniff");
  const body = res.body;
  t.match(body, "console-host");
  t.match(body, "9.9.9");
  t.match(body, "boot-1234");
  t.match(body, 'data-database="ok"');
  t.notOk(body.includes('data-supplier="yml"'), "a disabled supplier has no row");

  const etm = rowOf(body, "etm");
  t.match(etm, 'data-status="ok"');
  t.match(etm, `href="/runs/${scene.etmLastRun}"`);
  t.match(etm, "succeeded");
  t.match(etm, "420ms", "sub-second duration");
  t.match(etm, "59m59s / 12h", "age against the threshold");
  t.equal(etm.match(/<a href="\/runs\/\d+"><rect /g)?.length, 30, "30 marks of 40 runs");
  const marks = [...etm.matchAll(/<a href="\/runs\/(\d+)"><rect /g)].map((m) => Number(m[1]));
  t.equal(marks.at(-1), scene.etmLastRun, "the newest run is the right-most mark");
  t.same(
    marks,
    [...marks].sort((a, b) => a - b),
    "oldest to newest",
  );

  const iek = rowOf(body, "iek");
  t.match(iek, 'data-status="stale"');
  t.match(iek, "HTTP_503");
  t.match(iek, `href="/runs/${scene.iekFailedRun}"`);
  t.match(iek, "1.8s");

  const systeme = rowOf(body, "systeme");
  t.match(systeme, 'data-status="none"');
  t.match(systeme, "no run yet");
  t.notOk(/<a href="\/runs\//.test(systeme), "no run links for a supplier that never ran");

  const head = await get("/", "HEAD");
  t.equal(head.status, 200);
  t.equal(head.body, "");
  t.equal(head.headers["content-security-policy"], CSP);
});

t.test("/runs/<id> shows every column, labelled, the steps and the rejects, escaped", async (t) => {
  const { get, scene } = await setup(t);
  const res = await get(`/runs/${scene.etmLastRun}`);
  t.equal(res.status, 200);
  t.equal(res.headers["content-security-policy"], CSP);
  t.equal(res.headers["x-content-type-options"], "nosniff");
  for (const column of [
    "id",
    "supplier",
    "slot_start",
    "trigger",
    "state",
    "error_code",
    "owner",
    "started_at",
    "heartbeat_at",
    "finished_at",
    "pages",
    "records_seen",
    "records_inserted",
    "records_updated",
    "records_unchanged",
    "records_rejected",
    "records_delisted",
  ]) {
    t.match(res.body, `data-column="${column}"`, `column ${column}`);
  }
  t.match(res.body, "worker-a", "owner shown");
  t.equal(res.body.match(/<tr data-seq="/g)?.length, 3, "three steps");
  t.match(
    res.body,
    /<tr data-seq="2"><td class="num">2<\/td><td>.*?<\/td><td class="num">100<\/td><td class="num">2<\/td>/,
    "step 2: 100 records in 2 HTTP attempts",
  );
  t.equal(res.body.match(/<section class="reject"/g)?.length, 2);
  t.match(res.body, "price: not a number");
  t.notOk(res.body.includes("<script>"), "no script element from the payload");
  t.notOk(res.body.includes("<img"), "no img element from the payload");
  t.match(res.body, "&lt;script&gt;window.__pwned=&#39;script&#39;&lt;/script&gt;");
  t.match(res.body, "&lt;img src=x onerror=");
  t.match(res.body, /&quot;price&quot;: \{\n\s+&quot;value&quot;: &quot;12,5O&quot;/, "pretty-printed");

  const failed = await get(`/runs/${scene.iekFailedRun}`);
  t.match(failed.body, 'data-column="error_message"');
  t.match(failed.body, "HTTP_503");
  t.match(failed.body, "answered 503 after 5 attempts");
});

t.test("404 for an unknown or malformed id, as an HTML page with the same headers", async (t) => {
  const { get } = await setup(t);
  for (const path of [
    "/runs/999999",
    "/runs/9223372036854775807",
    "/runs/9223372036854775808",
    "/runs/0",
    "/runs/-1",
    "/runs/01",
    "/runs/1.5",
    "/runs/abc",
    "/runs/",
    "/runs/1/steps",
    "/runs/%3Cscript%3E",
    "/runs/1%20or%201=1",
  ]) {
    const res = await get(path);
    t.equal(res.status, 404, path);
    t.equal(res.headers["content-security-policy"], CSP, `${path} CSP`);
    t.equal(res.headers["content-type"], "text/html; charset=utf-8", `${path} html`);
    t.notOk(res.body.includes("<script"), `${path} reflects no markup`);
  }
});

t.test("a run page bounds rejects at 100 with the count of the rest, and payloads at 10 KB", async (t) => {
  const { get, writer } = await setup(t);
  const id = await insertRun(writer, {
    supplier: "etm",
    state: "partial",
    startedAt: new Date(NOW - 1000),
    durationMs: 900,
    rejected: 130,
  });
  await insertStep(writer, id, {
    seq: 1,
    state: "succeeded",
    startedAt: new Date(NOW - 1000),
    durationMs: 800,
    records: 130,
    httpAttempts: 1,
  });
  // The first (by seq) reject is big: 40 KB of multi-byte text.
  await insertReject(writer, id, "etm", 1, "name: too long", {
    title: "ж".repeat(20_000),
    zz_after_the_title: "END-MARK",
  });
  for (let i = 0; i < 129; i++)
    await insertReject(writer, id, "etm", 2, `stock: negative #${i}`, { stock: -i });
  const res = await get(`/runs/${id}`);
  t.equal(res.status, 200);
  t.equal(res.body.match(/<section class="reject"/g)?.length, MAX_REJECTS_SHOWN);
  t.match(res.body, "Rejects (130)");
  t.match(res.body, "30 more are not shown");
  const big = /<section class="reject"[^>]*>[\s\S]*?<pre>([\s\S]*?)<\/pre>/.exec(res.body)?.[1] ?? "";
  const shown = big.replace(/&quot;/g, '"').replace(/&amp;/g, "&");
  t.ok(Buffer.byteLength(shown, "utf8") <= REJECT_RAW_MAX_BYTES, "cut at 10 KB");
  t.ok(Buffer.byteLength(shown, "utf8") > REJECT_RAW_MAX_BYTES - 4, "and not much shorter");
  t.notOk(shown.includes("\uFFFD"), "no broken character at the cut");
  t.notOk(shown.includes("END-MARK"), "the end of the payload is cut off");
  t.match(res.body, /Cut at 10 KB of \d+ bytes/);
  t.match(res.body, "stock: negative #0");
  t.notOk(res.body.includes("stock: negative #128"), "the last rejects are not shown");
});

t.test("a run of a disabled supplier and hostile text in every column stay text", async (t) => {
  const { get, writer } = await setup(t);
  const id = await insertRun(writer, {
    supplier: "yml",
    state: "failed",
    startedAt: new Date(NOW - 5000),
    durationMs: 10,
    errorCode: "CONTRACT",
    errorMessage: HOSTILE_NAME,
  });
  const res = await get(`/runs/${id}`);
  t.equal(res.status, 200);
  t.notOk(res.body.includes("<script>"));
  t.notOk(res.body.includes("<img"));
  t.match(res.body, "&lt;script&gt;");
});

t.test("the database unreachable: 503 pages that say so, with the headers", async (t) => {
  const db = await deadDatabasePool(t);
  const server = createHealthServer({
    secrets: new SecretRegistry(),
    host: "127.0.0.1",
    port: 0,
    db,
    suppliers: [{ name: "etm", intervalMs: 3_600_000, enabled: true }],
    metrics: createMetrics({ processMetrics: false }),
    log: captureLogger().log,
    clock: new ManualClock(NOW),
    freshnessCacheMs: 0,
    instance: INSTANCE,
  });
  t.teardown(() => server.stop());
  const { port } = await server.start();
  const overview = await fetchLocal(port, "/");
  t.equal(overview.status, 503);
  t.equal(overview.headers["content-security-policy"], CSP);
  t.match(overview.body, "database is unreachable");
  t.match(overview.body, 'data-supplier="etm"');
  const run = await fetchLocal(port, "/runs/1");
  t.equal(run.status, 503);
  t.match(run.body, "unreachable");
  t.equal((await fetchLocal(port, "/runs/x")).status, 404, "a malformed id needs no database");
});

t.test("a strip is drawn again when the supplier's newest run changes, and only then", async (t) => {
  const { get, writer, scene } = await setup(t);
  const marksOf = async () => {
    const row = rowOf((await get("/")).body, "iek");
    return [...row.matchAll(/<a href="\/runs\/(\d+)"><rect class="(\w)"/g)].map((m) => `${m[1]}:${m[2]}`);
  };
  t.same(await marksOf(), [`${scene.iekFailedRun - 1}:s`, `${scene.iekFailedRun}:f`]);
  const running = await insertRun(writer, {
    supplier: "iek",
    state: "running",
    startedAt: new Date(NOW - 60_000),
    durationMs: null,
  });
  t.same((await marksOf()).slice(-1), [`${running}:r`], "a new run shows at once, running");
  await writer.query(
    "update ingestion_runs set state = 'succeeded', finished_at = started_at + interval '2 seconds' where id = $1",
    [running],
  );
  t.same((await marksOf()).slice(-1), [`${running}:s`], "the same run, closed, is redrawn");
  const etm = rowOf((await get("/")).body, "etm");
  t.equal(etm.match(/<a href="\/runs\/\d+"><rect /g)?.length, 30, "the other strips are kept as they were");
});

t.test(
  "a hung database: pages answer 503 within their bound, and at most two reads wait on it",
  async (t) => {
    const db = await hungDatabasePool(t);
    const server = createHealthServer({
      secrets: new SecretRegistry(),
      host: "127.0.0.1",
      port: 0,
      db,
      suppliers: [{ name: "etm", intervalMs: 3_600_000, enabled: true }],
      metrics: createMetrics({ processMetrics: false }),
      log: captureLogger().log,
      freshnessCacheMs: 0,
      databaseTimeoutMs: 200,
      consoleTimeoutMs: 400,
      instance: INSTANCE,
    });
    t.teardown(() => server.stop());
    const { port } = await server.start();
    const started = Date.now();
    const first = await fetchLocal(port, "/");
    t.equal(first.status, 503);
    t.match(first.body, "database is unreachable");
    t.ok(Date.now() - started < 3_000, `answered in ${Date.now() - started} ms`);
    // The two hung reads still hold their slots: a third page is refused at once.
    const busy = await fetchLocal(port, "/runs/1");
    const third = await fetchLocal(port, "/runs/2");
    t.equal(third.status, 503);
    t.match(third.body, "busy");
    t.equal(third.headers["content-security-policy"], CSP);
    t.equal(busy.status, 503);
  },
);

t.test(
  "/runs/<id> lists what the run's guards held: stored vs proposed, reason, decision, escaped",
  async (t) => {
    const { get, writer } = await setup(t);
    const runId = await insertRun(writer, {
      supplier: "etm",
      state: "partial",
      errorCode: "GUARD",
      startedAt: new Date(NOW - 5_000),
      durationMs: 1_000,
    });
    const insert = (
      kind: string,
      sku: string | null,
      reason: string,
      stored: unknown,
      proposed: unknown,
      state = "held",
    ) =>
      writer.query(
        `insert into ingestion_held (run_id, supplier, sku, kind, reason, stored, proposed, state, decided_at, decided_by)
       values ($1, 'etm', $2, $3, $4, $5, $6, $7, case when $7 = 'held' then null else now() end,
               case when $7 = 'held' then null else 'ops@<host>' end)`,
        [runId, sku, kind, reason, JSON.stringify(stored), JSON.stringify(proposed), state],
      );
    await insert(
      "price_jump",
      "A-1<b>",
      "price 12.50 -> 1250.00 (x100)",
      { price: "12.50", currency: "RUB", stock: 3 },
      { price: "1250.00", currency: "RUB", stock: 3 },
    );
    await insert(
      "delist",
      null,
      "would delist 900 of 1,000 listed offers",
      { listed: 1000 },
      { delist: 900 },
      "dismissed",
    );

    const res = await get(`/runs/${runId}`);
    t.equal(res.status, 200);
    t.match(res.body, "Held (2)");
    t.match(res.body, "supplier-sync approve " + runId, "an undecided item says how to decide");
    t.match(res.body, 'data-held-state="held"');
    t.match(res.body, "12.50 RUB, stock 3", "the stored values");
    t.match(res.body, "1250.00 RUB, stock 3", "the proposed values");
    t.match(res.body, "price 12.50 -&gt; 1250.00 (x100)", "the reason, escaped");
    t.match(res.body, "A-1&lt;b&gt;", "the SKU is escaped");
    t.notOk(res.body.includes("A-1<b>"), "no raw markup from the SKU");
    t.match(res.body, "delist 900");
    t.match(res.body, 'data-held-state="dismissed"');
    t.match(res.body, "by ops@&lt;host&gt;", "who decided, escaped");

    const overview = await get("/");
    const row = rowOf(overview.body, "etm");
    t.match(row, 'data-status="held"', "the overview shows the supplier held");
    t.match(
      row,
      `<a class="sub" href="/runs/${runId}" data-held-items>1 held</a>`,
      "with a link to the held run",
    );

    const plain = await get(
      `/runs/${await insertRun(writer, { supplier: "etm", state: "succeeded", startedAt: new Date(NOW - 20_000), durationMs: 10_000 })}`,
    );
    t.match(plain.body, "Held (0)");
    t.match(plain.body, "The guards held nothing of this run.");
    t.notOk(plain.body.includes('id="held-waiting"'));
  },
);
