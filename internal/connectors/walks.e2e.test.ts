// SKU-list, partition and enrichment walks (docs/connectors.md: Partitions, SKU lists, Enrichment) through real ticks:
// the declarative connector over loopback HTTP against the simulator's etm and iek
// profiles, the lease, page transactions and delisting in a real PostgreSQL.
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type pg from "pg";
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { forcedTick, tickDeps } from "../../test/helpers/tick.js";
import { skuOf } from "../simulator/catalog.js";
import { IEK_GROUPS, IEK_PRICE_ON_REQUEST_EVERY } from "../simulator/profiles.js";
import { startSimulator } from "../simulator/server.js";
import type { Simulator } from "../simulator/types.js";
import { connectorDefinitionSchema } from "./schema/connector-schema.js";
import { buildConnector } from "./test-support.js";

const FAST = {
  rateLimit: { requestsPerSecond: 1000, burst: 1000, maxConcurrency: 2 },
  retry: { maxAttempts: 2, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 5000 },
};

/** The stock of ETM's remains: the `all` row, else the other stores summed (config/suppliers/etm.json). */
const ETM_STOCK = {
  jmespath: "InfoStores[?StoreType=='all'] | [0].StoreQuantRem",
  else: { jmespath: "InfoStores[?StoreType!='all'].StoreQuantRem", sum: true },
};

/** ETM's price batches with stock per code from `remains` (the example of docs/connectors.md, Enrichment, less the login). */
function etmDefinition(baseUrl: string, skus: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    baseUrl,
    ...FAST,
    skus,
    request: { path: "/api/v1/goods/{skus}/price", query: { type: "etm" } },
    errors: [
      { path: "status.code", notIn: [200], then: "fail", code: "SUPPLIER", messagePath: "status.message" },
    ],
    records: { path: "data.rows" },
    fields: { sku: "gdscode", price: "price", currency: { const: "RUB" } },
    attributes: { priceRetail: "price_retail" },
    enrich: [
      {
        request: { path: "/api/v1/goods/{sku}/remains", query: { type: "etm" } },
        records: { path: "data" },
        fields: { stock: ETM_STOCK },
      },
    ],
    ...extra,
  };
}

interface TickOutcome {
  runId: number;
  outcome: string;
  state: string | undefined;
  errorCode: string | null | undefined;
  delisted: number;
}

async function tick(
  t: { teardown(fn: () => unknown): void },
  pool: pg.Pool,
  name: string,
  raw: Record<string, unknown>,
  connectorsDir = "/nonexistent",
  env: Record<string, string> = {},
): Promise<TickOutcome> {
  const definition = connectorDefinitionSchema.parse(raw);
  const { connector } = buildConnector(t, definition, {
    supplier: name,
    connectorsDir,
    database: pool,
    readSecretEnv: (k) => env[k],
  });
  const result = await forcedTick(tickDeps(pool), name, connector);
  return {
    runId: Number(result.runId),
    outcome: result.outcome,
    state: result.state,
    errorCode: result.errorCode,
    delisted: result.counts?.delisted ?? 0,
  };
}

async function offers(pool: pg.Pool, supplier: string) {
  const { rows } = await pool.query<{
    sku: string;
    price: string | null;
    stock: number | null;
    attributes: Record<string, unknown> | null;
    delisted: boolean;
  }>(
    `select sku, price::text as price, stock, attributes, delisted_at is not null as delisted
       from supplier_offers where supplier = $1 order by sku`,
    [supplier],
  );
  return rows;
}

async function steps(pool: pg.Pool, runId: number) {
  const { rows } = await pool.query<{
    seq: number;
    state: string;
    records: number;
    error_code: string | null;
  }>("select seq, state, records, error_code from ingestion_run_steps where run_id = $1 order by seq", [
    runId,
  ]);
  return rows;
}

async function skuFile(lines: string[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "walks-"));
  await writeFile(join(dir, "skus.txt"), `${lines.join("\n")}\n`);
  return dir;
}

let sim: Simulator;
let pool: pg.Pool;
t.before(async () => {
  sim = await startSimulator();
  pool = testPool(t, await createTestDatabase(t), 6);
});
t.teardown(() => sim.close());

t.test(
  "an ETM-shaped walk: batches of 50 prices, remains per SKU (the all row, else the stores summed), ceil(n/50) + n requests",
  async (t) => {
    const n = 120;
    sim.configure("etm", { size: n, profile: "etm" });
    const codes = Array.from({ length: n }, (_, i) => skuOf("etm", i));
    const dir = await skuFile(["# ETM codes", "", ...codes, codes[0] as string, "   "]);
    const result = await tick(
      t,
      pool,
      "etm",
      etmDefinition(sim.baseUrl("etm"), { from: "file", file: "skus.txt", batch: 50 }),
      dir,
    );
    t.equal(result.outcome, "success");
    t.equal(sim.stats("etm").requests, Math.ceil(n / 50) + n, "exactly ceil(n/50) + n requests");
    t.same(
      (await steps(pool, result.runId)).map((s) => [s.seq, s.records]),
      [
        [1, 50],
        [2, 50],
        [3, 20],
      ],
      "one step per batch of 50",
    );
    const stored = await offers(pool, "etm");
    const catalog = sim.offers("etm");
    t.equal(stored.length, n);
    t.same(
      stored.map((o) => [o.sku, o.price, o.stock]),
      catalog.map((r) => [r.article, r.price.value, r.stock.total]),
      "prices exact, stock = the all row's StoreQuantRem, else the other rows' summed",
    );
    t.ok(
      stored.every((o) => typeof o.attributes?.priceRetail === "string"),
      "attributes from the main record kept",
    );
  },
);

t.test("a batch of unknown codes answers 404: a step of 0 offers, and the run still succeeds", async (t) => {
  sim.configure("etm404", { size: 4, profile: "etm" });
  const dir = await skuFile([skuOf("etm404", 0), skuOf("etm404", 1), "NOPE-1", "NOPE-2", skuOf("etm404", 2)]);
  const result = await tick(
    t,
    pool,
    "etm404",
    etmDefinition(sim.baseUrl("etm404"), { from: "file", file: "skus.txt", batch: 2 }),
    dir,
  );
  t.equal(result.outcome, "success");
  t.same(
    (await steps(pool, result.runId)).map((s) => [s.seq, s.state, s.records]),
    [
      [1, "succeeded", 2],
      [2, "succeeded", 0],
      [3, "succeeded", 1],
    ],
  );
  t.equal(
    sim.stats("etm404").urls[0],
    `/etm404/api/v1/goods/${skuOf("etm404", 0)},${skuOf("etm404", 1)}/price?type=etm`,
    "the {skus} separator is literal in the path",
  );
  t.same(
    (await offers(pool, "etm404")).map((o) => o.sku),
    [skuOf("etm404", 0), skuOf("etm404", 1), skuOf("etm404", 2)],
  );
});

t.test("an empty SKU list fails CONTRACT unless allowEmpty", async (t) => {
  sim.configure("empty", { size: 2, profile: "etm" });
  const dir = await skuFile(["# nothing yet", ""]);
  const failed = await tick(
    t,
    pool,
    "empty",
    etmDefinition(sim.baseUrl("empty"), { from: "file", file: "skus.txt" }),
    dir,
  );
  t.equal(failed.outcome, "failed");
  t.equal(failed.errorCode, "CONTRACT");
  const { rows } = await pool.query("select error_message from ingestion_runs where id = $1", [failed.runId]);
  t.match(rows[0]?.error_message, /SKU list is empty/);
  t.equal(sim.stats("empty").requests, 0, "nothing was requested");
  const allowed = await tick(
    t,
    pool,
    "empty",
    etmDefinition(sim.baseUrl("empty"), { from: "file", file: "skus.txt", allowEmpty: true }),
    dir,
  );
  t.equal(allowed.errorCode, null, "allowEmpty: no error");
  t.equal(allowed.outcome, "success", "allowEmpty: an empty list is a complete walk");
});

t.test(
  "the SKU file is re-read at every run; a failed batch leaves the run partial and delists nothing",
  async (t) => {
    sim.configure("relist", { size: 6, profile: "etm" });
    const all = Array.from({ length: 6 }, (_, i) => skuOf("relist", i));
    const dir = await skuFile(all);
    const def = etmDefinition(sim.baseUrl("relist"), { from: "file", file: "skus.txt", batch: 2 });
    t.equal((await tick(t, pool, "relist", def, dir)).outcome, "success");
    await writeFile(join(dir, "skus.txt"), `${all.slice(0, 4).join("\n")}\n`);
    sim.resetStats("relist");
    // The second batch's price request fails permanently.
    sim.setFaults("relist", { status: { code: 400, onPage: 4, times: 1 } });
    const partial = await tick(t, pool, "relist", def, dir);
    t.equal(partial.state, "partial");
    t.equal(partial.delisted, 0);
    t.same(
      (await offers(pool, "relist")).filter((o) => o.delisted),
      [],
      "nothing delisted after a partial SKU walk",
    );
    sim.setFaults("relist", {});
    const complete = await tick(t, pool, "relist", def, dir);
    t.equal(complete.outcome, "success");
    t.equal(complete.delisted, 2, "the two SKUs no longer listed are delisted once every batch completed");
    t.same(
      (await offers(pool, "relist")).filter((o) => o.delisted).map((o) => o.sku),
      all.slice(4),
    );
  },
);

t.test("SQL SKU lists: $1 is the supplier, first column, batches joined by the separator", async (t) => {
  sim.configure("sqlsku", { size: 5, profile: "etm" });
  await pool.query("create table if not exists wanted (supplier text, sku text, note text)");
  await pool.query(
    "insert into wanted values ($1, $2, 'a'), ($1, $3, 'b'), ($1, $2, 'dup'), ('other', 'X', 'c')",
    ["sqlsku", skuOf("sqlsku", 3), skuOf("sqlsku", 1)],
  );
  const def = etmDefinition(sim.baseUrl("sqlsku"), {
    from: "sql",
    query: "select sku, note from wanted where supplier = $1 order by note",
    batch: 5,
    separator: ";",
  });
  // ETM splits on commas; this supplier's price route is asked with ';' only to show the separator.
  const result = await tick(t, pool, "sqlsku", { ...def, request: { path: "/api/v1/goods/{skus}/price" } });
  t.equal(
    sim.stats("sqlsku").urls[0],
    `/sqlsku/api/v1/goods/${skuOf("sqlsku", 3)};${skuOf("sqlsku", 1)}/price`,
  );
  t.equal(result.outcome, "success", "the 404 for the one batch is no error");
  t.equal((await steps(pool, result.runId)).length, 1);
});

t.test("a write inside the SQL SKU query fails with a clear error and writes nothing", async (t) => {
  sim.configure("sqlwrite", { size: 2, profile: "etm" });
  await pool.query("create table if not exists wanted (supplier text, sku text, note text)");
  await pool.query("insert into wanted values ('sqlwrite', $1, 'keep')", [skuOf("sqlwrite", 0)]);
  const def = etmDefinition(sim.baseUrl("sqlwrite"), {
    from: "sql",
    query: "with gone as (delete from wanted where supplier = $1 returning sku) select sku from gone",
  });
  const result = await tick(t, pool, "sqlwrite", def);
  t.equal(result.outcome, "failed");
  t.equal(result.errorCode, "CONTRACT");
  const { rows } = await pool.query("select error_message from ingestion_runs where id = $1", [result.runId]);
  t.match(rows[0]?.error_message, /skus\.query tried to write .*read-only transaction; nothing was written/);
  const left = await pool.query("select count(*)::int as n from wanted where supplier = 'sqlwrite'");
  t.equal(left.rows[0]?.n, 1, "the row is still there");
  t.equal(sim.stats("sqlwrite").requests, 0);
});

t.test("enrichment: a 404 leaves the field null; onMissing fail fails the step CONTRACT", async (t) => {
  sim.configure("enr", { size: 3, profile: "etm" });
  const dir = await skuFile([0, 1, 2].map((i) => skuOf("enr", i)));
  const missing = {
    request: { path: "/api/v1/goods/{sku}/nowhere" },
    records: { path: "data" },
    fields: { stock: ETM_STOCK },
  };
  const def = etmDefinition(
    sim.baseUrl("enr"),
    { from: "file", file: "skus.txt", batch: 3 },
    { enrich: [missing] },
  );
  const result = await tick(t, pool, "enr", def, dir);
  t.equal(result.outcome, "success");
  t.same(
    (await offers(pool, "enr")).map((o) => o.stock),
    [null, null, null],
    "stock unset: null",
  );
  const failing = await tick(t, pool, "enr", { ...def, enrich: [{ ...missing, onMissing: "fail" }] }, dir);
  t.equal(failing.outcome, "failed");
  t.equal(failing.errorCode, "CONTRACT");
  const { rows } = await pool.query("select error_message from ingestion_runs where id = $1", [
    failing.runId,
  ]);
  t.match(rows[0]?.error_message, /enrich\.0: no record for SKU "ENR-0000000"/);
});

/** IEK: groups as partitions, products paged per group, price on request flagged in `extra`, residues by key. */
function iekDefinition(baseUrl: string, partitions: Record<string, unknown>) {
  return {
    baseUrl,
    ...FAST,
    partitions,
    request: { path: "/api/products", query: { groupId: "{partition}" } },
    pagination: {
      type: "page",
      param: "page",
      start: 1,
      sizeParam: "pageSize",
      size: 500,
      totalPagesPath: "totalPage",
    },
    records: { path: "items" },
    fields: {
      sku: "art",
      name: "name",
      price: { path: "price", nullWhen: { path: "extra", contains: "Цена по запросу" } },
    },
    enrich: [
      {
        request: { path: "/api/residues/json/", query: { sku: "{skus}" } },
        batch: 100,
        records: { path: "shopItems" },
        key: "sku",
        fields: { stock: { jmespath: "sum(values(residues))" } },
      },
    ],
  };
}

t.test(
  "partitions from a paged request: every group walked, price on request null, stock summed",
  async (t) => {
    sim.configure("iek", { size: 20, profile: "iek" });
    const def = iekDefinition(sim.baseUrl("iek"), {
      request: { path: "/api/ddp" },
      records: { path: "" },
      value: "groupId",
      pagination: { type: "page", param: "page", start: 1, sizeParam: "limit", size: 2 },
    });
    const result = await tick(t, pool, "iek", def);
    t.equal(result.outcome, "success");
    t.same(
      (await steps(pool, result.runId)).map((s) => s.seq),
      Array.from({ length: IEK_GROUPS }, (_, i) => i + 1),
      "one step per group, numbered on",
    );
    const stored = await offers(pool, "iek");
    const catalog = sim.offers("iek");
    t.equal(stored.length, catalog.length);
    for (const r of catalog) {
      const o = stored.find((s) => s.sku === r.article);
      const index = Number(r.article.slice(-7));
      t.equal(
        o?.price ?? null,
        // IEK sends prices as JSON numbers: stored with their value's digits (`746.70` is 746.7).
        index % IEK_PRICE_ON_REQUEST_EVERY === 0 ? null : r.price.value.replace(/\.?0+$/, ""),
        `${r.article} price`,
      );
      t.equal(o?.stock, r.stock.total, `${r.article} stock`);
    }
    // 2 partition pages (+1 empty), 3 groups, 3 residue batches.
    t.equal(sim.stats("iek").requests, 3 + IEK_GROUPS + IEK_GROUPS);
  },
);

t.test("static partitions: repeated values walked once; an empty list is CONTRACT", async (t) => {
  sim.configure("iekst", { size: 9, profile: "iek" });
  const result = await tick(
    t,
    pool,
    "iekst",
    iekDefinition(sim.baseUrl("iekst"), { values: ["G2", "G0", "G2"] }),
  );
  t.equal(result.outcome, "success");
  t.same(
    (await steps(pool, result.runId)).map((s) => [s.seq, s.records]),
    [
      [1, 3],
      [2, 3],
    ],
  );
  sim.configure("iekempty", { size: 0, profile: "iek" });
  const empty = await tick(
    t,
    pool,
    "iekempty",
    iekDefinition(sim.baseUrl("iekempty"), {
      request: { path: "/api/ddp" },
      records: { path: "" },
      value: "groupId",
    }),
  );
  t.equal(empty.outcome, "failed");
  t.equal(empty.errorCode, "CONTRACT");
  const { rows } = await pool.query("select error_message from ingestion_runs where id = $1", [empty.runId]);
  t.match(rows[0]?.error_message, /partition list is empty/);
});

t.test(
  "a partition that fails leaves the run partial and delists nothing; a failed list fails the run",
  async (t) => {
    sim.configure("iekfail", { size: 9, profile: "iek" });
    const def = iekDefinition(sim.baseUrl("iekfail"), {
      request: { path: "/api/ddp" },
      records: { path: "" },
      value: "groupId",
    });
    t.equal((await tick(t, pool, "iekfail", def)).outcome, "success");
    sim.mutate("iekfail", { remove: 3 });
    sim.resetStats("iekfail");
    // Requests: 1 ddp, 2 products G0, 3 residues G0, 4 products G1 (fails).
    sim.setFaults("iekfail", { status: { code: 400, onPage: 4, times: 1 } });
    const partial = await tick(t, pool, "iekfail", def);
    t.equal(partial.state, "partial");
    t.equal(partial.errorCode, "HTTP_400");
    t.equal((await offers(pool, "iekfail")).filter((o) => o.delisted).length, 0, "nothing delisted");
    sim.resetStats("iekfail");
    sim.setFaults("iekfail", { status: { code: 400, onPage: 1, times: 1 } });
    const failed = await tick(t, pool, "iekfail", def);
    t.equal(failed.outcome, "failed");
    t.equal(failed.errorCode, "HTTP_400", "the partition list's own error");
    const { rows } = await pool.query("select error_message from ingestion_runs where id = $1", [
      failed.runId,
    ]);
    t.match(rows[0]?.error_message, /partition list page 1: supplier answered HTTP 400/);
    sim.setFaults("iekfail", {});
    const complete = await tick(t, pool, "iekfail", def);
    t.equal(complete.outcome, "success");
    t.equal(complete.delisted, 3);
  },
);

t.test(
  "Systeme-shaped: commercialRef lists of 45 in the query, stock by key with attributes from the enrichment",
  async (t) => {
    const n = 50;
    sim.configure("systeme", {
      size: n,
      profile: "systeme",
      auth: { type: "query", param: "accessCode", value: "s3cret" },
    });
    const dir = await skuFile(Array.from({ length: n }, (_, i) => skuOf("systeme", i)));
    const result = await tick(
      t,
      pool,
      "systeme",
      {
        baseUrl: sim.baseUrl("systeme"),
        ...FAST,
        auth: { type: "query", param: "accessCode", valueEnv: "SYSTEME_ACCESS_CODE" },
        skus: { from: "file", file: "skus.txt", batch: 45 },
        request: { path: "/new-api/JSON/getprice", query: { commercialRef: "{skus}" } },
        records: { path: "data" },
        fields: { sku: "commercialRef", price: "price", currency: "currency" },
        enrich: [
          {
            request: { path: "/new-api/JSON/getstock", query: { commercialRef: "{skus}" } },
            batch: 45,
            records: { path: "data" },
            key: "commercialRef",
            fields: { stock: { jmespath: "sum(stocks[].count)" } },
            attributes: { warehouses: { jmespath: "length(stocks)" } },
          },
        ],
      },
      dir,
      { SYSTEME_ACCESS_CODE: "s3cret" },
    );
    t.equal(result.outcome, "success");
    const urls = sim.stats("systeme").urls;
    t.equal(urls.length, 4, "2 price batches, 2 stock batches");
    t.match(
      urls[0],
      new RegExp(`commercialRef=${skuOf("systeme", 0)},${skuOf("systeme", 1)},`),
      "separator literal in the query",
    );
    const stored = await offers(pool, "systeme");
    t.same(
      stored.map((o) => [o.sku, o.price, o.stock, o.attributes]),
      sim.offers("systeme").map((r) => [r.article, r.price.value, r.stock.total, { warehouses: 3 }]),
    );
  },
);

t.test(
  "price mapped by an enrichment instead of fields (docs/connectors.md, Records and fields)",
  async (t) => {
    sim.configure("sysprice", { size: 4, profile: "systeme" });
    const codes = Array.from({ length: 4 }, (_, i) => skuOf("sysprice", i));
    const dir = await skuFile([...codes, "UNKNOWN-1"]);
    const result = await tick(
      t,
      pool,
      "sysprice",
      {
        baseUrl: sim.baseUrl("sysprice"),
        ...FAST,
        skus: { from: "file", file: "skus.txt", batch: 45 },
        request: { path: "/new-api/JSON/getstock", query: { commercialRef: "{skus}" } },
        records: { path: "data" },
        fields: { sku: "commercialRef", stock: { jmespath: "sum(stocks[].count)" } },
        enrich: [
          {
            request: { path: "/new-api/JSON/getprice", query: { commercialRef: "{skus}" } },
            batch: 2,
            records: { path: "data" },
            key: "commercialRef",
            fields: { price: "price", currency: "currency" },
          },
        ],
      },
      dir,
    );
    t.equal(result.outcome, "success");
    t.same(
      (await offers(pool, "sysprice")).map((o) => [o.sku, o.price, o.stock]),
      sim.offers("sysprice").map((r) => [r.article, r.price.value, r.stock.total]),
    );
    t.equal(sim.stats("sysprice").requests, 1 + 2, "one stock batch, price in batches of 2");
  },
);
