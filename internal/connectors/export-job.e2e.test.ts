// Export jobs (docs/feeds.md, Export jobs) through real ticks: create → poll → download from the
// simulator's second origin, walked as a feed, committed in a real PostgreSQL. The definition
// is a generic job (ids at data.id, the state at data.state, the file on another origin, as
// the simulator's generic jobs answer); ETM's own job shapes and its shipped
// etm-catalog.json are in etm-export.e2e.test.ts.
import type pg from "pg";
import t from "tap";
import { request } from "undici";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { forcedTick, tickDeps } from "../../test/helpers/tick.js";
import { isIngestionError } from "../platform/errors.js";
import { startSimulator } from "../simulator/server.js";
import type { Simulator } from "../simulator/types.js";
import { connectorDefinitionSchema } from "./schema/connector-schema.js";
import { buildConnector, collectPages, walkContext } from "./test-support.js";

const LOGIN = "etm-user";
const PASSWORD = "etm-pass-0123456789";
const env: Record<string, string> = { ETM_LOGIN: LOGIN, ETM_PASSWORD: PASSWORD };

/** A session-login supplier whose catalog is built as a file on request (the generic job shape). */
const generic = {
  baseUrl: "https://supplier.example",
  auth: {
    type: "session",
    login: {
      method: "POST",
      path: "/api/v1/user/login",
      query: { log: { env: "ETM_LOGIN" }, pwd: { env: "ETM_PASSWORD" } },
    },
    token: { path: "data.session" },
    send: { query: "session-id" },
    expiredWhen: [{ status: [401] }, { path: "status.code", in: [403] }],
  },
  timeouts: { connectMs: 5000, requestMs: 60000, pageMs: 120000, runMs: 10800000 },
  errors: [
    { path: "status.code", notIn: [200], then: "fail", code: "SUPPLIER", messagePath: "status.message" },
  ],
  export: {
    create: { method: "POST", path: "/api/v1/job/create/40029846", jobIdPath: "data.id" },
    poll: {
      path: "/api/v1/job/{job}",
      intervalMs: 15000,
      readyWhen: { path: "data.state", equals: 1 },
      failWhen: { path: "data.state", equals: -1 },
    },
    download: { urlPath: "data.urls.0.url" },
  },
  format: { type: "json", stream: true, pageSize: 5000 },
  records: { path: "data.items" },
  fields: { sku: "sku", name: "name", price: "price", currency: "currency", stock: "stock" },
} as const;

let sim: Simulator;
let pool: pg.Pool;
t.before(async () => {
  sim = await startSimulator();
  pool = testPool(t, await createTestDatabase(t), 6);
});
t.teardown(() => sim.close());

function configureSupplier(name: string, size: number): void {
  sim.configure(name, {
    size,
    auth: {
      type: "session",
      loginPath: "/api/v1/user/login",
      credentials: { log: LOGIN, pwd: PASSWORD },
      expiredAs: "body403",
    },
  });
}

/**
 * The generic export against the simulator: its baseUrl and file origin, fast limits,
 * `jobQuery` (the simulator's job options) on the create request.
 */
function exportDefinition(
  name: string,
  jobQuery: Record<string, string>,
  extra: { intervalMs?: number; runMs?: number; allowedOrigins?: string[] } = {},
) {
  const def = structuredClone(generic);
  return connectorDefinitionSchema.parse({
    ...def,
    baseUrl: sim.baseUrl(name),
    allowedOrigins: extra.allowedOrigins ?? [sim.filesUrl],
    rateLimit: { requestsPerSecond: 1000, burst: 1000, maxConcurrency: 1 },
    retry: { maxAttempts: 2, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 5000 },
    timeouts: { ...def.timeouts, runMs: extra.runMs ?? 60_000 },
    auth: { ...def.auth, minLoginIntervalMs: 0 },
    format: { ...def.format, pageSize: 40 },
    export: {
      ...def.export,
      create: { ...def.export.create, query: jobQuery },
      poll: { ...def.export.poll, intervalMs: extra.intervalMs ?? 50 },
    },
  });
}

async function tick(
  t: { teardown(fn: () => unknown): void },
  name: string,
  def: ReturnType<typeof exportDefinition>,
) {
  const { connector } = buildConnector(t, def, { supplier: name, readSecretEnv: (k) => env[k] });
  const result = await forcedTick(tickDeps(pool), name, connector);
  const { rows } = await pool.query<{ error_message: string | null; http_requests: number }>(
    "select error_message from ingestion_runs where id = $1",
    [result.runId],
  );
  return { ...result, runId: Number(result.runId), errorMessage: rows[0]?.error_message };
}

async function stored(supplier: string) {
  const { rows } = await pool.query<{ sku: string; name: string; price: string; stock: number }>(
    "select sku, name, price::text as price, stock from supplier_offers where supplier = $1 order by sku",
    [supplier],
  );
  return rows;
}

const significant = (price: string) => (price.includes(".") ? price.replace(/\.?0+$/, "") : price);

t.test("ready after 3 polls: the file from the second origin, no credentials sent there", async (t) => {
  configureSupplier("etm-catalog", 100);
  const started = Date.now();
  const result = await tick(
    t,
    "etm-catalog",
    exportDefinition("etm-catalog", { readyAfter: "3" }, { intervalMs: 100 }),
  );
  t.equal(result.outcome, "success", String(result.errorMessage));
  t.ok(Date.now() - started >= 200, "polled every intervalMs (two waits of 100 ms)");
  const jobs = sim.exportJobs("etm-catalog");
  t.equal(jobs.length, 1);
  t.equal(jobs[0]?.template, "40029846");
  t.equal(jobs[0]?.polls, 3);
  t.same(
    jobs[0]?.downloads,
    [{ credentials: [] }],
    "one download, and no session id, cookie or header with it",
  );
  // The file server does see credentials when they are sent: the check above can fail.
  const probe = await request(`${sim.filesUrl}/etm-catalog/export/${jobs[0]?.id}/feed.json?session-id=x`, {
    headers: { cookie: "s=1", authorization: "Bearer y" },
  });
  await probe.body.dump();
  t.same(sim.exportJobs("etm-catalog")[0]?.downloads[1], {
    credentials: ["header authorization", "header cookie", "query session-id"],
  });
  const stats = sim.stats("etm-catalog");
  t.equal(stats.logins, 1);
  t.ok(
    stats.urls.filter((u) => u.includes("/api/v1/job/")).every((u) => u.includes("session-id=")),
    "create and polls carried the session",
  );
  const expected = sim
    .offers("etm-catalog")
    .map((r) => ({
      sku: r.article,
      name: `${r.title} (товар)`,
      price: significant(r.price.value),
      stock: r.stock.total,
    }))
    .sort((a, b) => (a.sku < b.sku ? -1 : 1));
  const got = (await stored("etm-catalog")).map((o) => ({ ...o, price: significant(o.price) }));
  t.same(got, expected, "the exact catalog");
  const { rows } = await pool.query<{ seq: number; records: number }>(
    "select seq, records from ingestion_run_steps where run_id = $1 order by seq",
    [result.runId],
  );
  t.same(
    rows.map((r) => r.records),
    [40, 40, 20],
    "steps start with the download's first chunk, pageSize each",
  );
});

t.test("a gzip-compressed CSV download in windows-1251 works the same", async (t) => {
  configureSupplier("etm-csv", 30);
  const def = exportDefinition("etm-csv", { file: "feed.csv", compress: "gzip", encoding: "windows-1251" });
  const csv = connectorDefinitionSchema.parse({
    ...def,
    format: { type: "csv", delimiter: ";", encoding: "windows-1251" },
    records: { path: "" },
  });
  const result = await tick(t, "etm-csv", csv);
  t.equal(result.outcome, "success", String(result.errorMessage));
  t.equal((await stored("etm-csv")).length, 30);
  t.same(sim.exportJobs("etm-csv")[0]?.downloads, [{ credentials: [] }]);
});

t.test("without format the download is JSON read whole, bounded by 50 MiB", async (t) => {
  configureSupplier("etm-whole", 12);
  const { format: _format, ...def } = exportDefinition("etm-whole", {});
  const whole = connectorDefinitionSchema.parse({ ...def, maxResponseBytes: undefined });
  t.equal(whole.maxResponseBytes, 52_428_800);
  const result = await tick(t, "etm-whole", whole);
  t.equal(result.outcome, "success", String(result.errorMessage));
  t.equal((await stored("etm-whole")).length, 12);
});

t.test("failWhen: the job failed on the supplier's side, the run fails SUPPLIER", async (t) => {
  configureSupplier("etm-fail", 10);
  const result = await tick(t, "etm-fail", exportDefinition("etm-fail", { fail: "2", readyAfter: "5" }));
  t.equal(result.state, "failed");
  t.equal(result.errorCode, "SUPPLIER");
  t.match(result.errorMessage, /export job .* failed \(data\.state = -1\)/);
  t.equal(sim.exportJobs("etm-fail")[0]?.downloads.length, 0, "nothing downloaded");
  t.same(await stored("etm-fail"), []);
});

t.test("never ready: DEADLINE within timeouts.runMs", async (t) => {
  configureSupplier("etm-never", 10);
  const started = Date.now();
  const result = await tick(
    t,
    "etm-never",
    exportDefinition("etm-never", { never: "1" }, { intervalMs: 50, runMs: 400 }),
  );
  t.equal(result.state, "failed");
  t.equal(result.errorCode, "DEADLINE");
  t.match(result.errorMessage, /not ready within timeouts\.runMs \(400 ms/);
  t.ok(Date.now() - started < 5_000);
  t.ok((sim.exportJobs("etm-never")[0]?.polls ?? 0) >= 5, "polled until the deadline");
});

t.test("a download URL outside allowedOrigins is refused before it is requested (CONTRACT)", async (t) => {
  configureSupplier("etm-foreign", 10);
  const result = await tick(t, "etm-foreign", exportDefinition("etm-foreign", {}, { allowedOrigins: [] }));
  t.equal(result.state, "failed");
  t.equal(result.errorCode, "CONTRACT");
  t.match(result.errorMessage, /export download URL points to http:\/\/127\.0\.0\.1:\d+, outside/);
  t.equal(sim.exportJobs("etm-foreign")[0]?.downloads.length, 0);
});

t.test("polling honours the walk's signal: an abort ends the wait at once", async (t) => {
  configureSupplier("etm-abort", 10);
  const c = buildConnector(
    t,
    exportDefinition("etm-abort", { never: "1" }, { intervalMs: 60_000, runMs: 600_000 }),
    {
      supplier: "etm-abort",
      readSecretEnv: (k) => env[k],
    },
  );
  const stop = new AbortController();
  const reason = new Error("shutdown");
  const started = Date.now();
  const walking = collectPages(c.connector, walkContext(c.log, stop.signal)).catch((e: unknown) => e);
  // Aborted once the walk waits for its next poll (the first answered "not ready").
  const deadline = Date.now() + 10_000;
  while (!c.lines.some((l) => l.includes("export job not ready yet"))) {
    if (Date.now() > deadline) throw new Error("timed out waiting for the walk to wait for its next poll");
    await new Promise((r) => setTimeout(r, 5));
  }
  stop.abort(reason);
  const err = await walking;
  t.equal(err, reason, "the walk ends with the signal's reason");
  t.ok(Date.now() - started < 2_000, "without waiting for the next poll");
  t.equal(sim.exportJobs("etm-abort")[0]?.polls, 1);
  t.notOk(isIngestionError(err));
});
