// Whole-catalog feeds (docs/feeds.md) through real ticks: the declarative connector
// streams the simulator's feed files over loopback HTTP, cuts them into steps of
// `format.pageSize`, and the tick commits each step in a real PostgreSQL.
import type pg from "pg";
import t from "tap";
import { request } from "undici";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { forcedTick, tickDeps } from "../../test/helpers/tick.js";
import { startSimulator } from "../simulator/server.js";
import type { Simulator } from "../simulator/types.js";
import { connectorDefinitionSchema } from "./schema/connector-schema.js";
import { buildConnector } from "./test-support.js";

const FAST = {
  rateLimit: { requestsPerSecond: 1000, burst: 1000, maxConcurrency: 2 },
  retry: { maxAttempts: 2, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 5000 },
};

const YML = { sku: "@id", price: "price", currency: "currencyId", name: "name" };
const FLAT = { sku: "sku", name: "name", price: "price", currency: "currency", stock: "stock" };
const COMMERCEML = {
  sku: "Ид",
  name: "Наименование",
  price: "Цены.Цена.ЦенаЗаЕдиницу",
  currency: "Цены.Цена.Валюта",
  stock: "Количество",
};

interface TickOutcome {
  runId: number;
  outcome: string;
  state: string | undefined;
  errorCode: string | null | undefined;
  errorMessage: string | null | undefined;
}

let sim: Simulator;
let pool: pg.Pool;
t.before(async () => {
  sim = await startSimulator();
  pool = testPool(t, await createTestDatabase(t), 6);
});
t.teardown(() => sim.close());

/** A feed connector of `supplier`'s `file` with `query`; `extra` overrides. */
function feedDefinition(
  supplier: string,
  file: string,
  query: Record<string, string>,
  format: Record<string, unknown>,
  fields: Record<string, unknown>,
  extra: Record<string, unknown> = {},
) {
  return {
    baseUrl: sim.baseUrl(supplier),
    ...FAST,
    request: { path: `/${file}`, query },
    format,
    fields,
    ...extra,
  };
}

async function tick(
  t: { teardown(fn: () => unknown): void },
  name: string,
  raw: Record<string, unknown>,
): Promise<TickOutcome> {
  const definition = connectorDefinitionSchema.parse(raw);
  const { connector } = buildConnector(t, definition, { supplier: name, database: pool });
  const result = await forcedTick(tickDeps(pool), name, connector);
  const { rows } = await pool.query<{ error_message: string | null }>(
    "select error_message from ingestion_runs where id = $1",
    [result.runId],
  );
  return {
    runId: Number(result.runId),
    outcome: result.outcome,
    state: result.state,
    errorCode: result.errorCode,
    errorMessage: rows[0]?.error_message,
  };
}

async function stored(supplier: string) {
  const { rows } = await pool.query<{
    sku: string;
    name: string | null;
    price: string | null;
    currency: string | null;
    stock: number | null;
    delisted: boolean;
  }>(
    `select sku, name, price::text as price, currency, stock, delisted_at is not null as delisted
       from supplier_offers where supplier = $1 order by sku`,
    [supplier],
  );
  return rows;
}

async function steps(runId: number) {
  const { rows } = await pool.query<{
    seq: number;
    state: string;
    records: number;
    error_code: string | null;
  }>("select seq, state, records, error_code from ingestion_run_steps where run_id = $1 order by seq", [
    runId,
  ]);
  return rows.map((s) => [s.seq, s.state, s.records, s.error_code]);
}

async function rejects(runId: number) {
  const { rows } = await pool.query<{ seq: number; reason: string; raw: unknown }>(
    "select seq, reason, raw from ingestion_rejects where run_id = $1 order by id",
    [runId],
  );
  return rows;
}

/** A decimal's value without insignificant zeros: what a JSON number literal keeps (`634.40` → `634.4`). */
const significant = (price: string) => (price.includes(".") ? price.replace(/\.?0+$/, "") : price);

/** The simulator's live catalog as the feeds serve it, in SKU order (`numbers`: prices as JSON number literals). */
function catalog(supplier: string, withStock: boolean, numbers = false) {
  return sim
    .offers(supplier)
    .map((r) => ({
      sku: r.article,
      name: `${r.title} (товар)`,
      price: numbers ? significant(r.price.value) : r.price.value,
      currency: r.price.currency,
      stock: withStock ? r.stock.total : null,
      delisted: false,
    }))
    .sort((a, b) => (a.sku < b.sku ? -1 : a.sku > b.sku ? 1 : 0));
}

t.test(
  "YML offers feed: steps of pageSize, the exact catalog, delisting after a complete walk",
  async (t) => {
    sim.configure("yml", { size: 230 });
    const def = feedDefinition("yml", "feed.yml", {}, { type: "xml", element: "offer", pageSize: 100 }, YML);
    const first = await tick(t, "yml", def);
    t.equal(first.outcome, "success", String(first.errorMessage));
    t.same(await steps(first.runId), [
      [1, "succeeded", 100, null],
      [2, "succeeded", 100, null],
      [3, "succeeded", 30, null],
    ]);
    t.same(await stored("yml"), catalog("yml", false), "every offer, exact prices, Cyrillic names");
    t.equal(sim.stats("yml").requests, 1, "one request for the whole file");

    sim.mutate("yml", { remove: 5, changePrices: 7 });
    const second = await tick(t, "yml", def);
    t.equal(second.outcome, "success");
    const after = await stored("yml");
    t.equal(after.filter((o) => o.delisted).length, 5, "the removed offers are delisted");
    t.same(
      after.filter((o) => !o.delisted),
      catalog("yml", false),
      "changed prices are stored",
    );
  },
);

t.test(
  "an unchanged streamed feed costs one request: 304, no step, nothing written or delisted",
  async (t) => {
    sim.configure("yml-304", { size: 120 });
    const def = feedDefinition(
      "yml-304",
      "feed.yml",
      { encoding: "windows-1251", compress: "gzip" },
      { type: "xml", element: "offer", pageSize: 50 },
      YML,
    );
    const first = await tick(t, "yml-304", def);
    t.equal(first.outcome, "success", String(first.errorMessage));
    t.equal((await steps(first.runId)).length, 3);
    const second = await tick(t, "yml-304", def);
    t.equal(second.outcome, "success", String(second.errorMessage));
    t.same(await steps(second.runId), [], "no step");
    const { rows } = await pool.query(
      `select pages, records_seen, records_inserted, records_updated, records_unchanged, records_delisted,
            etag is not null as has_etag,
            (select count(*)::int from supplier_offer_observations o where o.run_id = r.id) as observations
       from ingestion_runs r where id = $1`,
      [second.runId],
    );
    t.same(rows[0], {
      pages: 0,
      records_seen: 0,
      records_inserted: 0,
      records_updated: 0,
      records_unchanged: 120,
      records_delisted: 0,
      has_etag: true,
      observations: 0,
    });
    t.same(sim.stats("yml-304").byStatus, { 200: 1, 304: 1 }, "the second run is one 304");
    t.equal((await stored("yml-304")).filter((o) => o.delisted).length, 0, "nothing delisted");

    sim.mutate("yml-304", { changePrices: 4 });
    const third = await tick(t, "yml-304", def);
    t.equal(third.outcome, "success");
    t.equal((await steps(third.runId)).length, 3, "a changed feed is walked in full");
    t.same(sim.stats("yml-304").byStatus, { 200: 2, 304: 1 });
  },
);

t.test("CommerceML Предложение in windows-1251, zipped with a second file: zipEntry by glob", async (t) => {
  sim.configure("cml", { size: 120 });
  const result = await tick(
    t,
    "cml",
    feedDefinition(
      "cml",
      "offers.xml",
      { encoding: "windows-1251", compress: "zip", zipExtra: "1" },
      { type: "xml", element: "Предложение", zipEntry: "*.xml", pageSize: 50 },
      COMMERCEML,
    ),
  );
  t.equal(result.outcome, "success", String(result.errorMessage));
  t.equal((await steps(result.runId)).length, 3);
  t.same(await stored("cml"), catalog("cml", true));
});

t.test("CSV in windows-1251 with ;, gzip-compressed (magic bytes, no Content-Encoding)", async (t) => {
  sim.configure("csv", { size: 75 });
  const result = await tick(
    t,
    "csv",
    feedDefinition(
      "csv",
      "feed.csv",
      { encoding: "windows-1251", compress: "gzip" },
      { type: "csv", delimiter: ";", encoding: "windows-1251", pageSize: 40 },
      FLAT,
    ),
  );
  t.equal(result.outcome, "success", String(result.errorMessage));
  t.same(await steps(result.runId), [
    [1, "succeeded", 40, null],
    [2, "succeeded", 35, null],
  ]);
  t.same(await stored("csv"), catalog("csv", true));
});

t.test("JSON lines with Content-Encoding br, prices as number literals", async (t) => {
  sim.configure("jsonl", { size: 64 });
  sim.mutate("jsonl", { setPrices: { "JSONL-0000002": "4821.1234567890123457" } });
  const result = await tick(
    t,
    "jsonl",
    feedDefinition(
      "jsonl",
      "feed.jsonl",
      { compress: "content-br", price: "number" },
      { type: "jsonl" },
      FLAT,
    ),
  );
  t.equal(result.outcome, "success", String(result.errorMessage));
  t.same(
    await steps(result.runId),
    [[1, "succeeded", 64, null]],
    "the default pageSize (5,000) holds them all",
  );
  t.same(await stored("jsonl"), catalog("jsonl", true, true), "number literals keep their value");
});

t.test('json with "stream": true, Content-Encoding gzip: the array at records.path', async (t) => {
  sim.configure("jstream", { size: 90 });
  const result = await tick(
    t,
    "jstream",
    feedDefinition(
      "jstream",
      "feed.json",
      { compress: "content-gzip", price: "number" },
      { type: "json", stream: true, pageSize: 25 },
      FLAT,
      { records: { path: "data.items" } },
    ),
  );
  t.equal(result.outcome, "success", String(result.errorMessage));
  t.same(
    (await steps(result.runId)).map((s) => s[2]),
    [25, 25, 25, 15],
  );
  t.same(await stored("jstream"), catalog("jstream", true, true));
});

t.test("a decompression bomb is CONTRACT: the run fails, nothing stored", async (t) => {
  sim.configure("bomb", { size: 10 });
  const started = Date.now();
  const result = await tick(
    t,
    "bomb",
    feedDefinition(
      "bomb",
      "feed.yml",
      { bomb: String(512 * 1024 * 1024) },
      { type: "xml", element: "offer" },
      YML,
    ),
  );
  t.equal(result.state, "failed");
  t.equal(result.errorCode, "CONTRACT");
  t.match(result.errorMessage, /more than 100:1 .*decompression bomb/);
  t.ok(Date.now() - started < 10_000, "refused long before 512 MB were inflated");
  t.same(await stored("bomb"), []);
});

/** The length of a served file, to cut it part way. */
async function servedLength(path: string): Promise<number> {
  const res = await request(`${sim.url}${path}`);
  return Buffer.from(await res.body.arrayBuffer()).length;
}

t.test(
  "a truncated gzip: the steps before commit, that step fails, run partial, nothing delisted",
  async (t) => {
    sim.configure("trunc", { size: 3_000 });
    const def = (query: Record<string, string>) =>
      feedDefinition("trunc", "feed.yml", query, { type: "xml", element: "offer", pageSize: 500 }, YML);
    const full = await tick(t, "trunc", def({ compress: "gzip" }));
    t.equal(full.outcome, "success");
    const length = await servedLength("/trunc/feed.yml?compress=gzip");
    sim.mutate("trunc", { changePrices: 3_000 });
    const cut = await tick(t, "trunc", def({ compress: "gzip", truncate: String(Math.floor(length * 0.6)) }));
    t.equal(cut.state, "partial");
    t.equal(cut.errorCode, "CONTRACT");
    t.match(cut.errorMessage, /truncated/);
    const s = await steps(cut.runId);
    const done = s.filter((x) => x[1] === "succeeded");
    t.ok(done.length >= 2 && done.length < 6, `some steps committed (${done.length})`);
    t.same(s[s.length - 1]?.slice(1), ["failed", 0, "CONTRACT"], "the step being read fails");
    const after = await stored("trunc");
    t.equal(after.length, 3_000);
    t.equal(after.filter((o) => o.delisted).length, 0, "nothing delisted");
    const fresh = new Map(catalog("trunc", false).map((o) => [o.sku, o.price]));
    const updated = after.filter((o) => fresh.get(o.sku) === o.price).length;
    t.equal(updated, done.length * 500, "exactly the committed steps' offers carry the new prices");
  },
);

t.test("a transfer cut mid-file is NETWORK: partial, nothing delisted", async (t) => {
  sim.configure("cut", { size: 2_000 });
  const def = (query: Record<string, string>) =>
    feedDefinition("cut", "feed.csv", query, { type: "csv", delimiter: ";", pageSize: 400 }, FLAT);
  t.equal((await tick(t, "cut", def({}))).outcome, "success");
  const length = await servedLength("/cut/feed.csv");
  const cut = await tick(t, "cut", def({ cut: String(Math.floor(length * 0.5)) }));
  t.equal(cut.state, "partial");
  t.equal(cut.errorCode, "NETWORK");
  t.equal((await stored("cut")).filter((o) => o.delisted).length, 0);
});

t.test("billion laughs and external entities are never expanded: one reject, the rest stored", async (t) => {
  for (const attack of ["billion-laughs", "xxe"]) {
    sim.configure(attack, { size: 20 });
    const result = await tick(
      t,
      attack,
      feedDefinition(attack, "feed.yml", { attack }, { type: "xml", element: "offer" }, YML),
    );
    t.equal(result.outcome, "success", attack);
    const r = await rejects(result.runId);
    t.equal(r.length, 1, attack);
    t.match(r[0]?.reason, /undefined entity .*never expanded/, attack);
    const offers = await stored(attack);
    t.equal(offers.length, 19, attack);
    t.notMatch(JSON.stringify(offers), /lollol|root:/, attack);
  }
});

t.test("a malformed CSV row is one reject and the rest goes on", async (t) => {
  sim.configure("badrow", { size: 30 });
  const result = await tick(
    t,
    "badrow",
    feedDefinition(
      "badrow",
      "feed.csv",
      { malformed: "7" },
      { type: "csv", delimiter: ";", pageSize: 10 },
      FLAT,
    ),
  );
  t.equal(result.outcome, "success", String(result.errorMessage));
  const r = await rejects(result.runId);
  t.equal(r.length, 1);
  t.match(r[0], { seq: 1, reason: /^line 9: /, raw: /^BADROW-0000007;/ });
  const expected = catalog("badrow", true).filter((o) => o.sku !== "BADROW-0000007");
  t.same(await stored("badrow"), expected);
});

t.test("a wrong encoding gives readable reject reasons, not a crash", async (t) => {
  sim.configure("wrongenc", { size: 12 });
  const result = await tick(
    t,
    "wrongenc",
    feedDefinition(
      "wrongenc",
      "feed.yml",
      { encoding: "windows-1251", declare: "utf-8" },
      { type: "xml", element: "offer" },
      YML,
    ),
  );
  t.equal(result.state, "failed", "every record rejected: more than maxRejectRatio");
  t.equal(result.errorCode, "CONTRACT");
  t.match(
    result.errorMessage,
    /^12 of 12 records invalid on step 1 .*first: <offer> at line 7 holds bytes that are not valid utf-8 \(decoded as U\+FFFD\): is format\.encoding right\?/,
  );
  const r = await rejects(result.runId);
  t.equal(r.length, 12, "every record kept as a reject with its reason");
  t.match(r[0], { seq: 1, reason: /not valid utf-8/, raw: { "@id": "WRONGENC-0000000" } });
  t.same(await stored("wrongenc"), []);
});

t.test(
  "enrich applies per step: stock of each YML offer from ETM's remains (the all row, else the stores summed)",
  async (t) => {
    sim.configure("ymlenrich", { size: 25, profile: "etm" });
    const result = await tick(
      t,
      "ymlenrich",
      feedDefinition("ymlenrich", "feed.yml", {}, { type: "xml", element: "offer", pageSize: 10 }, YML, {
        enrich: [
          {
            request: { path: "/api/v1/goods/{sku}/remains", query: { type: "etm" } },
            records: { path: "data" },
            fields: {
              stock: {
                jmespath: "InfoStores[?StoreType=='all'] | [0].StoreQuantRem",
                else: { jmespath: "InfoStores[?StoreType!='all'].StoreQuantRem", sum: true },
              },
            },
          },
        ],
      }),
    );
    t.equal(result.outcome, "success", String(result.errorMessage));
    t.same(
      (await steps(result.runId)).map((s) => s[2]),
      [10, 10, 5],
    );
    t.equal(sim.stats("ymlenrich").requests, 1 + 25, "the feed, then one remains request per offer");
    t.same(
      await stored("ymlenrich"),
      catalog("ymlenrich", true),
      "stock = the all row, else the stores summed",
    );
  },
);

t.test("the shipped config/suppliers/feed.json walks the simulator's YML feed", async (t) => {
  const { readFileSync } = await import("node:fs");
  const shipped = JSON.parse(
    readFileSync(new URL("../../config/suppliers/feed.json", import.meta.url), "utf8"),
  ) as Record<string, unknown>;
  t.equal(shipped.baseUrl, "http://127.0.0.1:9465/feed", "as the demo serves it");
  sim.configure("feed", { size: 40 });
  const result = await tick(t, "feed", { ...shipped, baseUrl: sim.baseUrl("feed") });
  t.equal(result.outcome, "success", String(result.errorMessage));
  t.same(await stored("feed"), catalog("feed", false));
  t.same(sim.stats("feed").urls, ["/feed/feed.yml"]);
});

t.test("a walk stopped after its first step (preview, no prefetch) releases the download", async (t) => {
  sim.configure("early", { size: 5_000 });
  const definition = connectorDefinitionSchema.parse(
    feedDefinition("early", "feed.csv", {}, { type: "csv", delimiter: ";", pageSize: 100 }, FLAT),
  );
  const { connector, log } = buildConnector(t, definition, { supplier: "early" });
  const ctx = { signal: new AbortController().signal, log, runId: "1", prefetch: false };
  const first: number[] = [];
  for await (const page of connector.walk(ctx)) {
    first.push(page.offers.length);
    break;
  }
  t.same(first, [100]);
  // The feed's one connection is free again: a second walk reads the whole file.
  let offers = 0;
  for await (const page of connector.walk({ ...ctx, prefetch: true })) offers += page.offers.length;
  t.equal(offers, 5_000);
  t.equal(sim.stats("early").requests, 2);
});

t.test(
  "maxResponseBytes bounds the decompressed feed: CONTRACT, the steps before it committed",
  async (t) => {
    sim.configure("capped", { size: 5_000 });
    const result = await tick(
      t,
      "capped",
      feedDefinition(
        "capped",
        "feed.csv",
        { compress: "content-gzip" },
        { type: "csv", delimiter: ";", pageSize: 500 },
        FLAT,
        { maxResponseBytes: 100_000 },
      ),
    );
    t.equal(result.state, "partial");
    t.equal(result.errorCode, "CONTRACT");
    t.match(result.errorMessage, /maxResponseBytes \(100000 bytes\)/);
    t.ok((await stored("capped")).length >= 500, "the steps within the bound are stored");
  },
);
