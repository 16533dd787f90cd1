// Conditional requests (docs/conditional-requests.md) through real ticks: the declarative connector over
// loopback HTTP (the simulator's one-response catalog, or a recording server), the lease,
// the page transactions and the run close in a real PostgreSQL.
import type { IncomingMessage, ServerResponse } from "node:http";
import type pg from "pg";
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { forcedTick, tickDeps } from "../../test/helpers/tick.js";
import type { TickResult } from "../ingestion/tick.js";
import { startSimulator } from "../simulator/server.js";
import type { Simulator } from "../simulator/types.js";
import { connectorDefinitionSchema } from "./schema/connector-schema.js";
import { buildConnector, SIM_FIELDS, startServer } from "./test-support.js";

const FAST = {
  rateLimit: { requestsPerSecond: 1000, burst: 1000, maxConcurrency: 2 },
  retry: { maxAttempts: 2, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 5000 },
};

interface RunRow {
  state: string;
  error_code: string | null;
  pages: number;
  records_seen: number;
  records_inserted: number;
  records_updated: number;
  records_unchanged: number;
  records_delisted: number;
  etag: string | null;
  last_modified: string | null;
  steps: number;
  observations: number;
}

let sim: Simulator;
let pool: pg.Pool;
t.before(async () => {
  sim = await startSimulator();
  pool = testPool(t, await createTestDatabase(t));
});
t.teardown(() => sim.close());

async function tick(
  t: { teardown(fn: () => unknown): void },
  name: string,
  raw: Record<string, unknown>,
): Promise<TickResult> {
  const { connector } = buildConnector(t, connectorDefinitionSchema.parse({ ...FAST, ...raw }), {
    supplier: name,
  });
  return forcedTick(tickDeps(pool), name, connector);
}

async function run(runId: number | undefined): Promise<RunRow> {
  const { rows } = await pool.query<RunRow>(
    `select state, error_code, pages, records_seen, records_inserted, records_updated, records_unchanged,
            records_delisted, etag, last_modified,
            (select count(*)::int from ingestion_run_steps s where s.run_id = r.id) as steps,
            (select count(*)::int from supplier_offer_observations o where o.run_id = r.id) as observations
       from ingestion_runs r where id = $1`,
    [runId],
  );
  const row = rows[0];
  if (!row) throw new Error(`no run ${runId}`);
  return row;
}

async function listed(supplier: string): Promise<{ listed: number; delisted: number; lastRuns: string[] }> {
  const { rows } = await pool.query<{ listed: number; delisted: number; last_runs: string[] }>(
    `select count(*) filter (where delisted_at is null)::int as listed,
            count(*) filter (where delisted_at is not null)::int as delisted,
            array_agg(distinct last_run_id::text) as last_runs
       from supplier_offers where supplier = $1`,
    [supplier],
  );
  const row = rows[0];
  return { listed: row?.listed ?? 0, delisted: row?.delisted ?? 0, lastRuns: row?.last_runs ?? [] };
}

function simCatalog(name: string, extra: Record<string, unknown> = {}) {
  return {
    baseUrl: sim.baseUrl(name),
    request: { path: "/v1/offers" },
    records: { path: "data.items" },
    fields: SIM_FIELDS,
    ...extra,
  };
}

t.test(
  "an unchanged one-response catalog is answered 304: succeeded, nothing fetched or written",
  async (t) => {
    const name = "cond-sim";
    sim.configure(name, { size: 40, pagination: "none" });
    const first = await tick(t, name, simCatalog(name));
    t.equal(first.outcome, "success");
    const firstRow = await run(first.runId);
    t.match(firstRow, { state: "succeeded", pages: 1, records_inserted: 40 });
    t.match(firstRow.etag, /^".+"$/, "the response's ETag is kept");
    t.ok(
      firstRow.last_modified && Number.isFinite(Date.parse(firstRow.last_modified)),
      "and its Last-Modified",
    );

    sim.resetStats(name);
    const second = await tick(t, name, simCatalog(name));
    t.equal(second.outcome, "success");
    t.equal(second.state, "succeeded");
    t.same(sim.stats(name).byStatus, { 304: 1 }, "one request, answered 304");
    const row = await run(second.runId);
    t.same(
      { ...row },
      {
        state: "succeeded",
        error_code: null,
        pages: 0,
        records_seen: 0,
        records_inserted: 0,
        records_updated: 0,
        records_unchanged: 40,
        records_delisted: 0,
        etag: firstRow.etag,
        last_modified: firstRow.last_modified,
        steps: 0,
        observations: 0,
      },
    );
    t.match(second.counts, { pages: 0, unchanged: 40, delisted: 0 });
    t.same(
      await listed(name),
      { listed: 40, delisted: 0, lastRuns: [String(first.runId)] },
      "no offer touched",
    );

    // The 304 run's validators (carried forward) serve the next run as well.
    const third = await tick(t, name, simCatalog(name));
    t.match(await run(third.runId), { state: "succeeded", pages: 0, records_unchanged: 40 });
    t.same(sim.stats(name).byStatus, { 304: 2 });

    // A changed catalog is fetched in full, and what left it is delisted.
    sim.mutate(name, { changePrices: 5, remove: 3 });
    const fourth = await tick(t, name, simCatalog(name));
    const changed = await run(fourth.runId);
    t.match(changed, {
      state: "succeeded",
      pages: 1,
      records_seen: 37,
      records_updated: 5,
      records_unchanged: 32,
      records_delisted: 3,
    });
    t.not(changed.etag, firstRow.etag, "a new ETag");
    t.same(sim.stats(name).byStatus, { 200: 1, 304: 2 });
    t.match(await listed(name), { listed: 37, delisted: 3 });

    // And after it, the 304's records_unchanged counts only the listed offers.
    const fifth = await tick(t, name, simCatalog(name));
    t.match(await run(fifth.runId), {
      state: "succeeded",
      pages: 0,
      records_unchanged: 37,
      records_delisted: 0,
    });
    t.match(await listed(name), { listed: 37, delisted: 3 });
  },
);

t.test("the simulator's whole-catalog feed file is answered 304 when unchanged", async (t) => {
  const name = "cond-feed";
  sim.configure(name, { size: 25 });
  const feed = {
    baseUrl: sim.baseUrl(name),
    request: { path: "/feed.json", query: { compress: "content-gzip" } },
    records: { path: "data.items" },
    fields: { sku: "sku", name: "name", price: "price", currency: "currency", stock: "stock" },
  };
  const first = await tick(t, name, feed);
  t.match(await run(first.runId), { state: "succeeded", pages: 1, records_inserted: 25, etag: /^".+"$/ });
  const second = await tick(t, name, feed);
  t.match(await run(second.runId), { state: "succeeded", pages: 0, records_unchanged: 25, observations: 0 });
  t.same(sim.stats(name).byStatus, { 200: 1, 304: 1 });
});

t.test('"conditional": false never sends the validators', async (t) => {
  const name = "cond-off";
  sim.configure(name, { size: 10, pagination: "none" });
  for (let i = 0; i < 2; i++) {
    const result = await tick(t, name, simCatalog(name, { conditional: false }));
    t.match(await run(result.runId), { state: "succeeded", pages: 1, etag: null, last_modified: null });
  }
  t.same(sim.stats(name).byStatus, { 200: 2 });
});

/** A recording server with one validated catalog; `mode` says how it treats conditional headers. */
async function catalogServer(
  t: { teardown(fn: () => unknown): void },
  options: { etag?: string; lastModified?: string; mode: "honour" | "ignore" | "always-304" },
) {
  const state = {
    etag: options.etag,
    items: [
      { id: "A", p: "1.00" },
      { id: "B", p: "2.00" },
    ],
    broken: false,
  };
  const srv = await startServer(t, (req: IncomingMessage, res: ServerResponse) => {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (state.etag) headers.etag = state.etag;
    if (options.lastModified) headers["last-modified"] = options.lastModified;
    const inm = req.headers["if-none-match"];
    const ims = req.headers["if-modified-since"];
    const matches =
      inm !== undefined ? inm === state.etag : ims !== undefined && ims === options.lastModified;
    if (options.mode === "always-304" || (options.mode === "honour" && matches)) {
      res.writeHead(304, headers).end();
      return;
    }
    res.writeHead(200, headers);
    res.end(JSON.stringify({ items: state.broken ? state.items.map(() => ({ nope: 1 })) : state.items }));
  });
  return { ...srv, state };
}

const plain = (baseUrl: string, extra: Record<string, unknown> = {}) => ({
  baseUrl,
  request: { path: "/catalog" },
  records: { path: "items" },
  fields: { sku: "id", price: "p", currency: { const: "EUR" } },
  ...extra,
});

t.test("both validators are sent back verbatim; If-Modified-Since alone works too", async (t) => {
  const lastModified = "Tue, 01 Dec 2026 10:00:00 GMT";
  const srv = await catalogServer(t, { etag: 'W/"v1"', lastModified, mode: "honour" });
  const first = await tick(t, "cond-both", plain(srv.url));
  t.match(await run(first.runId), {
    state: "succeeded",
    pages: 1,
    etag: 'W/"v1"',
    last_modified: lastModified,
  });
  t.equal(srv.requests[0]?.headers["if-none-match"], undefined, "nothing to send on the first run");
  const second = await tick(t, "cond-both", plain(srv.url));
  t.equal(srv.requests[1]?.headers["if-none-match"], 'W/"v1"');
  t.equal(srv.requests[1]?.headers["if-modified-since"], lastModified);
  t.match(await run(second.runId), { state: "succeeded", pages: 0, records_unchanged: 2 });

  const dated = await catalogServer(t, { lastModified, mode: "honour" });
  await tick(t, "cond-dated", plain(dated.url));
  const notModified = await tick(t, "cond-dated", plain(dated.url));
  t.equal(dated.requests[1]?.headers["if-none-match"], undefined);
  t.equal(dated.requests[1]?.headers["if-modified-since"], lastModified);
  t.match(await run(notModified.runId), { state: "succeeded", pages: 0, last_modified: lastModified });
});

t.test("a failed run's validators are never sent back", async (t) => {
  const srv = await catalogServer(t, { etag: '"v1"', mode: "honour" });
  const first = await tick(t, "cond-failed", plain(srv.url));
  t.match(await run(first.runId), { state: "succeeded", etag: '"v1"' });
  // The catalog changes, but its response is all rejects: the run fails CONTRACT.
  srv.state.etag = '"v2"';
  srv.state.broken = true;
  const failed = await tick(t, "cond-failed", plain(srv.url));
  t.match(await run(failed.runId), { state: "failed", error_code: "CONTRACT", etag: null });
  t.equal(srv.requests[1]?.headers["if-none-match"], '"v1"');
  // The next run asks with the last succeeded run's ETag, not the failed one's, and gets it all.
  srv.state.broken = false;
  const next = await tick(t, "cond-failed", plain(srv.url));
  t.equal(srv.requests[2]?.headers["if-none-match"], '"v1"');
  t.match(await run(next.runId), { state: "succeeded", pages: 1, records_seen: 2, etag: '"v2"' });
});

t.test("a server that ignores the validators is walked in full every time", async (t) => {
  const srv = await catalogServer(t, { etag: '"same"', mode: "ignore" });
  await tick(t, "cond-ignored", plain(srv.url));
  const second = await tick(t, "cond-ignored", plain(srv.url));
  t.equal(srv.requests[1]?.headers["if-none-match"], '"same"');
  t.match(await run(second.runId), { state: "succeeded", pages: 1, records_unchanged: 2, etag: '"same"' });
});

t.test("walks of several requests never send validators", async (t) => {
  const srv = await catalogServer(t, { etag: '"v1"', mode: "honour" });
  const paged = plain(srv.url, {
    pagination: { type: "offset", limit: 100 },
  });
  const first = await tick(t, "cond-paged", paged);
  await tick(t, "cond-paged", paged);
  t.match(await run(first.runId), { state: "succeeded", etag: null });
  t.ok(
    srv.requests.every((r) => r.headers["if-none-match"] === undefined),
    "no request carried If-None-Match",
  );
  const partitioned = plain(srv.url, {
    partitions: { values: ["x"] },
    request: { path: "/catalog/{partition}" },
  });
  await tick(t, "cond-partitioned", partitioned);
  await tick(t, "cond-partitioned", partitioned);
  t.ok(srv.requests.every((r) => r.headers["if-none-match"] === undefined));
});

t.test("a 304 to a request that sent no validators is an error", async (t) => {
  const srv = await catalogServer(t, { mode: "always-304" });
  const result = await tick(t, "cond-stray", plain(srv.url));
  t.equal(result.outcome, "failed");
  t.match(await run(result.runId), { state: "failed", error_code: "HTTP_304", pages: 0 });
});
