import fc from "fast-check";
import type pg from "pg";
import t from "tap";
import { createTestDatabase, type Teardown, testPool } from "../../test/helpers/db.js";
import type { Offer, Page } from "../ingestion/ports.js";
import { IngestionError } from "../platform/errors.js";
import { commitPage, lastOccurrences, recordFailedStep } from "./offers.js";
import { closeRun, startRun } from "./runs.js";

const SUPPLIER = "etm";
const OWNER = { hostname: "test-host", pid: 1, bootId: "boot" };

function catalog(n: number, price = (i: number) => `${10 + i}.50`): Offer[] {
  return Array.from({ length: n }, (_, i) => ({
    sku: `SKU-${String(i).padStart(6, "0")}`,
    name: `Offer ${i}`,
    price: price(i),
    currency: "EUR",
    stock: i % 7,
  }));
}

function pages(offers: Offer[], size: number): Page[] {
  const out: Page[] = [];
  for (let i = 0; i < offers.length; i += size) {
    out.push({ seq: out.length + 1, offers: offers.slice(i, i + size), rejects: [], httpAttempts: 1 });
  }
  return out;
}

async function newRun(db: pg.ClientBase, slot = new Date("2025-01-01T00:00:00Z")): Promise<number> {
  return startRun(db, { supplier: SUPPLIER, slotStart: slot, trigger: "schedule", owner: OWNER });
}

async function commitAll(client: pg.ClientBase, runId: number, all: Page[]) {
  const total = { seen: 0, inserted: 0, updated: 0, unchanged: 0, rejected: 0 };
  for (const page of all) {
    const c = await commitPage(client, { runId, supplier: SUPPLIER, page });
    for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += c[k];
    if (Object.keys(c.held).length > 0) throw new Error(`guards off, yet held: ${JSON.stringify(c.held)}`);
  }
  return total;
}

async function count(db: pg.Pool, sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await db.query<{ n: number }>(sql, params);
  return rows[0]?.n ?? -1;
}

/** Flushes this backend's table statistics before it answers, then reads supplier_offers' update counter. */
async function offerUpdates(client: pg.ClientBase, pool: pg.Pool): Promise<number> {
  await client.query("select pg_stat_force_next_flush()");
  return count(
    pool,
    "select (n_tup_upd + n_tup_hot_upd)::int as n from pg_stat_user_tables where relname = 'supplier_offers'",
  );
}

async function setup(t: Teardown) {
  const pool = testPool(t, await createTestDatabase(t));
  const client = await pool.connect();
  t.teardown(() => client.release());
  return { pool, client };
}

t.test("first load, unchanged re-sync and 100 changed prices", async (t) => {
  const { pool, client } = await setup(t);
  const offers = catalog(2000);

  const run1 = await newRun(client);
  const first = await commitAll(client, run1, pages(offers, 1000));
  t.same(first, { seen: 2000, inserted: 2000, updated: 0, unchanged: 0, rejected: 0 });
  t.equal(await count(pool, "select count(*)::int as n from supplier_offer_observations"), 2000);
  const closed1 = await closeRun(client, {
    runId: run1,
    walkComplete: true,
    errorCode: null,
    errorMessage: null,
  });
  t.equal(closed1?.state, "succeeded");
  t.match(closed1?.counts, { pages: 2, recordsSeen: 2000, recordsInserted: 2000, recordsDelisted: 0 });

  const xminBefore = await pool.query("select sku, xmin::text from supplier_offers order by sku");
  const updatesBefore = await offerUpdates(client, pool);

  const run2 = await newRun(client, new Date("2025-01-01T06:00:00Z"));
  const second = await commitAll(client, run2, pages(offers, 1000));
  t.same(second, { seen: 2000, inserted: 0, updated: 0, unchanged: 2000, rejected: 0 }, "all unchanged");
  t.equal(
    await offerUpdates(client, pool),
    updatesBefore,
    "no UPDATE of supplier_offers (n_tup_upd unchanged)",
  );
  const xminAfter = await pool.query("select sku, xmin::text from supplier_offers order by sku");
  t.same(xminAfter.rows, xminBefore.rows, "no row version of supplier_offers rewritten");
  t.equal(
    await count(pool, "select count(*)::int as n from supplier_offer_observations where run_id = $1", [run2]),
    0,
    "no observation for unchanged offers",
  );
  const closed2 = await closeRun(client, {
    runId: run2,
    walkComplete: true,
    errorCode: null,
    errorMessage: null,
  });
  t.match(closed2?.counts, { recordsUnchanged: 2000, recordsDelisted: 0 });

  const changed = catalog(2000, (i) => (i % 20 === 0 ? `${99 + i}.99` : `${10 + i}.50`));
  const run3 = await newRun(client, new Date("2025-01-01T12:00:00Z"));
  const third = await commitAll(client, run3, pages(changed, 1000));
  t.same(third, { seen: 2000, inserted: 0, updated: 100, unchanged: 1900, rejected: 0 });
  t.equal(await offerUpdates(client, pool), updatesBefore + 100, "the update counter does see real updates");
  t.equal(
    await count(pool, "select count(*)::int as n from supplier_offer_observations where run_id = $1", [run3]),
    100,
    "exactly 100 observations",
  );
  t.equal(
    await count(
      pool,
      "select count(*)::int as n from supplier_offers where last_run_id = $1 and price = 99.99",
      [run3],
    ),
    1,
    "SKU 0 carries its new price and this run as last changer",
  );
  const closed3 = await closeRun(client, {
    runId: run3,
    walkComplete: true,
    errorCode: null,
    errorMessage: null,
  });
  t.match(closed3?.counts, { recordsUpdated: 100, recordsUnchanged: 1900 });
});

t.test("content hash normalises the decimal and tells null from empty", async (t) => {
  const { pool, client } = await setup(t);
  const base: Offer = { sku: "A", name: "x", price: "1.50", currency: "EUR", stock: null };
  const run1 = await newRun(client);
  await commitPage(client, {
    runId: run1,
    supplier: SUPPLIER,
    page: { seq: 1, offers: [base], rejects: [], httpAttempts: 1 },
  });
  const run2 = await newRun(client);
  const same = await commitPage(client, {
    runId: run2,
    supplier: SUPPLIER,
    page: { seq: 1, offers: [{ ...base, price: "1.5000" }], rejects: [], httpAttempts: 1 },
  });
  t.equal(same.unchanged, 1, "1.50 and 1.5000 are the same price");
  const emptyName = await commitPage(client, {
    runId: run2,
    supplier: SUPPLIER,
    page: { seq: 2, offers: [{ ...base, name: "" }], rejects: [], httpAttempts: 1 },
  });
  t.equal(emptyName.updated, 1, "empty name differs from the stored name");
  const stocked = await commitPage(client, {
    runId: run2,
    supplier: SUPPLIER,
    page: { seq: 3, offers: [{ ...base, name: "", stock: 0 }], rejects: [], httpAttempts: 1 },
  });
  t.equal(stocked.updated, 1, "stock 0 differs from null");
  const { rows } = await pool.query("select price::text, stock from supplier_offers where sku = 'A'");
  t.same(rows, [{ price: "1.50", stock: 0 }], "stored price keeps the exact decimal first written");
});

t.test("re-committing a succeeded step changes nothing and returns zero counts", async (t) => {
  const { pool, client } = await setup(t);
  const runId = await newRun(client);
  const [page] = pages(catalog(500), 500);
  if (!page) throw new Error("no page");
  const first = await commitPage(client, { runId, supplier: SUPPLIER, page });
  t.equal(first.inserted, 500);
  const changedPage: Page = { ...page, offers: page.offers.map((o) => ({ ...o, price: "1.00" })) };
  const again = await commitPage(client, { runId, supplier: SUPPLIER, page: changedPage });
  t.same(again, { seen: 0, inserted: 0, updated: 0, unchanged: 0, rejected: 0, held: {} });
  t.equal(
    await count(pool, "select count(*)::int as n from supplier_offer_observations"),
    500,
    "no duplicate",
  );
  t.equal(await count(pool, "select count(*)::int as n from supplier_offers where price = 1.00"), 0);
  const run = await pool.query(
    "select pages, records_seen, records_inserted from ingestion_runs where id = $1",
    [runId],
  );
  t.same(run.rows[0], { pages: 1, records_seen: 500, records_inserted: 500 }, "counters counted once");
});

t.test(
  "lastOccurrences: a sorted page passes as is, repeats keep the last in first-seen order",
  async (t) => {
    const o = (sku: string, price: string): Offer => ({
      sku,
      name: null,
      price,
      currency: null,
      stock: null,
    });
    const sorted = [o("A", "1"), o("B", "2"), o("C", "3")];
    t.equal(lastOccurrences(sorted), sorted, "strictly increasing SKUs: the same array, no copy");
    t.same(
      lastOccurrences([o("A", "1"), o("A", "2"), o("B", "3")]),
      [o("A", "2"), o("B", "3")],
      "sorted, repeated",
    );
    t.same(lastOccurrences([o("B", "1"), o("A", "2"), o("B", "3")]), [o("B", "3"), o("A", "2")], "unsorted");
    // Against the plain definition (a Map keyed by SKU), on pages from a small alphabet.
    fc.assert(
      fc.property(fc.array(fc.constantFrom("A", "B", "C", "a", "ä", "B1", ""), { maxLength: 12 }), (skus) => {
        const page = skus.map((sku, i) => o(sku, String(i)));
        const byMap = [...new Map(page.map((x) => [x.sku, x])).values()];
        t.same(lastOccurrences(page), byMap);
      }),
      { numRuns: 500 },
    );
  },
);

t.test("a SKU repeated on a page or across pages: last one wins, seen once more", async (t) => {
  const { pool, client } = await setup(t);
  const runId = await newRun(client);
  const o = (sku: string, price: string): Offer => ({ sku, name: null, price, currency: null, stock: null });
  const p1 = await commitPage(client, {
    runId,
    supplier: SUPPLIER,
    page: { seq: 1, offers: [o("A", "1"), o("B", "2"), o("A", "3")], rejects: [], httpAttempts: 1 },
  });
  t.same(p1, { seen: 3, inserted: 2, updated: 0, unchanged: 0, rejected: 0, held: {} });
  const p2 = await commitPage(client, {
    runId,
    supplier: SUPPLIER,
    page: { seq: 2, offers: [o("A", "4"), o("B", "2")], rejects: [], httpAttempts: 1 },
  });
  t.same(p2, { seen: 2, inserted: 0, updated: 1, unchanged: 1, rejected: 0, held: {} });
  const offers = await pool.query("select sku, price::text from supplier_offers order by sku");
  t.same(offers.rows, [
    { sku: "A", price: "4" },
    { sku: "B", price: "2" },
  ]);
  const obs = await pool.query("select sku, price::text from supplier_offer_observations order by sku");
  t.same(
    obs.rows,
    [
      { sku: "A", price: "4" },
      { sku: "B", price: "2" },
    ],
    "one observation per SKU and run, equal to what the run left",
  );
});

t.test("rejects are stored with their raw payload and counted", async (t) => {
  const { pool, client } = await setup(t);
  const runId = await newRun(client);
  const rejects = [
    { reason: "missing sku", raw: { title: "no sku", price: { value: "1.0" } } },
    { reason: "bad price", raw: { article: 42, price: "abc\u0000def" } },
    { reason: "not an object", raw: "plain" },
  ];
  const c = await commitPage(client, {
    runId,
    supplier: SUPPLIER,
    page: { seq: 1, offers: catalog(2), rejects, httpAttempts: 2 },
  });
  t.same(c, { seen: 2, inserted: 2, updated: 0, unchanged: 0, rejected: 3, held: {} });
  const { rows } = await pool.query(
    "select seq, reason, raw from ingestion_rejects where run_id = $1 order by id",
    [runId],
  );
  t.same(rows, [
    { seq: 1, reason: "missing sku", raw: { title: "no sku", price: { value: "1.0" } } },
    { seq: 1, reason: "bad price", raw: { article: 42, price: "abc\uFFFDdef" } },
    { seq: 1, reason: "not an object", raw: "plain" },
  ]);

  const failed = { runId, supplier: SUPPLIER, seq: 2, errorCode: "CONTRACT", httpAttempts: 3, rejects };
  await recordFailedStep(client, failed);
  await recordFailedStep(client, failed);
  t.equal(
    await count(pool, "select count(*)::int as n from ingestion_rejects where run_id = $1 and seq = 2", [
      runId,
    ]),
    3,
    "a failed page keeps its rejects, once",
  );
  const step = await pool.query(
    "select state, error_code, http_attempts from ingestion_run_steps where seq = 2",
  );
  t.same(step.rows, [{ state: "failed", error_code: "CONTRACT", http_attempts: 3 }]);
  await recordFailedStep(client, { ...failed, seq: 1 });
  const first = await pool.query("select state from ingestion_run_steps where seq = 1");
  t.equal(first.rows[0]?.state, "succeeded", "a succeeded step is never turned into a failed one");
  const run = await pool.query("select records_rejected from ingestion_runs where id = $1", [runId]);
  t.equal(run.rows[0]?.records_rejected, 6);
});

t.test("a page for a run closed by recovery is refused and writes nothing", async (t) => {
  const { pool, client } = await setup(t);
  const runId = await newRun(client);
  await pool.query("update ingestion_runs set state = 'failed', finished_at = now() where id = $1", [runId]);
  const page: Page = { seq: 1, offers: catalog(10), rejects: [{ reason: "r", raw: 1 }], httpAttempts: 1 };
  await t.rejects(commitPage(client, { runId, supplier: SUPPLIER, page }), IngestionError);
  t.equal(await count(pool, "select count(*)::int as n from supplier_offers"), 0);
  t.equal(await count(pool, "select count(*)::int as n from ingestion_run_steps"), 0);
  t.equal(await count(pool, "select count(*)::int as n from ingestion_rejects"), 0);
  const ok = await client.query("select 1 as one");
  t.equal(ok.rows[0]?.one, 1, "the connection is usable after the rollback");
});

t.test(
  "pages in random SKU order (wide ranges): per-SKU probes classify exactly like dense pages",
  async (t) => {
    const { pool, client } = await setup(t);
    // A deterministic shuffle: each page's SKU range spans nearly the whole catalog,
    // so the range read hits its cap and the page falls back to one probe per SKU.
    const shuffled = catalog(1_200).sort(
      (a, b) => ((Number(a.sku.slice(4)) * 7919) % 1_201) - ((Number(b.sku.slice(4)) * 7919) % 1_201),
    );
    const first = await commitAll(client, await newRun(client), pages(shuffled, 300));
    t.same(first, { seen: 1_200, inserted: 1_200, updated: 0, unchanged: 0, rejected: 0 }, "first load");
    const changed = shuffled.map((o, i) => (i % 10 === 0 ? { ...o, price: "99.99" } : o));
    const withNew = [...changed.slice(0, 600), ...catalog(1_205).slice(1_200), ...changed.slice(600)];
    const runId = await newRun(client, new Date("2025-01-01T01:00:00Z"));
    const second = await commitAll(client, runId, pages(withNew, 300));
    t.same(second, { seen: 1_205, inserted: 5, updated: 120, unchanged: 1_080, rejected: 0 });
    t.equal(await count(pool, "select count(*)::int as n from supplier_offers"), 1_205, "no duplicate");
    t.equal(
      await count(pool, "select count(*)::int as n from supplier_offer_observations where run_id = $1", [
        runId,
      ]),
      125,
      "one observation per new or changed offer",
    );
    t.equal(
      await count(
        pool,
        "select count(*)::int as n from supplier_offers where price = 99.99 and last_run_id = $1",
        [runId],
      ),
      120,
      "changed offers carry the new price and run",
    );
  },
);

t.test(
  "a dense page whose range also holds offers the supplier dropped: those are not counted",
  async (t) => {
    const { pool, client } = await setup(t);
    await commitAll(client, await newRun(client), pages(catalog(1_000), 1_000));
    // Every other offer is gone: the range of the page holds 2× its SKUs (still under the cap).
    const half = catalog(1_000).filter((_, i) => i % 2 === 0);
    const runId = await newRun(client, new Date("2025-01-01T01:00:00Z"));
    const c = await commitAll(client, runId, pages(half, 500));
    t.same(c, { seen: 500, inserted: 0, updated: 0, unchanged: 500, rejected: 0 });
    const closed = await closeRun(client, { runId, walkComplete: true, errorCode: null, errorMessage: null });
    t.equal(closed?.counts.recordsDelisted, 500, "the dropped half is delisted");
    t.equal(
      await count(pool, "select count(*)::int as n from supplier_offers where delisted_at is null"),
      500,
    );
  },
);

t.test(
  "values with quotes, backslashes, braces, commas, NULL-like text and non-ASCII survive the array literals",
  async (t) => {
    const { pool, client } = await setup(t);
    const odd: Offer[] = [
      { sku: 'q"uote', name: 'say "hi"', price: "1", currency: null, stock: null },
      { sku: "back\\slash", name: "C:\\dir\\", price: "2.5", currency: "EUR", stock: 0 },
      { sku: "{brace},comma", name: "{a,b}", price: "0.000001", currency: "USD", stock: 3 },
      { sku: "NULL", name: "NULL", price: "3", currency: null, stock: null },
      { sku: "  spaced  ", name: "", price: "4", currency: null, stock: 1 },
      {
        sku: "ünïcødé-😀",
        name: "名前 'single'",
        price: "999999999999999.999999",
        currency: "JPY",
        stock: 2147483647,
      },
    ];
    const runId = await newRun(client);
    const c = await commitPage(client, {
      runId,
      supplier: SUPPLIER,
      page: { seq: 1, offers: odd, rejects: [], httpAttempts: 1 },
    });
    t.same(c, { seen: 6, inserted: 6, updated: 0, unchanged: 0, rejected: 0, held: {} });
    const { rows } = await pool.query<{
      sku: string;
      name: string | null;
      price: string;
      stock: number | null;
    }>('select sku, name, price::text, stock from supplier_offers order by sku collate "C"');
    const expected = odd
      .map((o) => ({ sku: o.sku, name: o.name, price: o.price, stock: o.stock }))
      .sort((a, b) => Buffer.compare(Buffer.from(a.sku), Buffer.from(b.sku)));
    t.same(rows, expected, "stored exactly as given");
    const again = await commitPage(client, {
      runId: await newRun(client, new Date("2025-01-01T01:00:00Z")),
      supplier: SUPPLIER,
      page: { seq: 1, offers: odd, rejects: [], httpAttempts: 1 },
    });
    t.same(
      again,
      { seen: 6, inserted: 0, updated: 0, unchanged: 6, rejected: 0, held: {} },
      "and compare equal on re-sync",
    );
  },
);

t.test("price on request and attributes: stored, compared, observed once per change", async (t) => {
  const { pool, client } = await setup(t);
  const base: Offer = { sku: "A", name: "cable", price: null, currency: "RUB", stock: 3 };
  const plain: Offer = { sku: "B", name: "plain", price: "2.00", currency: "RUB", stock: 1 };
  const step = async (offers: Offer[]) => {
    const runId = await newRun(client);
    const counts = await commitPage(client, {
      runId,
      supplier: SUPPLIER,
      page: { seq: 1, offers, rejects: [], httpAttempts: 1 },
    });
    return { runId, counts };
  };
  const observations = (sku: string) =>
    count(pool, "select count(*)::int as n from supplier_offer_observations where sku = $1", [sku]);

  const first = await step([base, plain]);
  t.equal(first.counts.inserted, 2);
  const { rows: stored } = await pool.query(
    "select sku, price, attributes, content_hash from supplier_offers order by sku",
  );
  t.equal(stored[0].price, null, "a price on request is stored null");
  t.equal(stored[1].attributes, null, "no attributes: null");
  // The hash of an offer without attributes is the one the schema always computed.
  const { rows: legacy } = await pool.query(
    `select md5(concat_ws(',', quote_nullable('plain'::text), trim_scale(2.00::numeric)::text,
                          quote_nullable('RUB'::text), quote_nullable(1))) as h`,
  );
  t.equal(stored[1].content_hash, legacy[0].h, "hash without attributes unchanged by the migration");

  t.equal((await step([base, plain])).counts.unchanged, 2, "null price again: unchanged");
  t.equal(await observations("A"), 1);

  const priced = await step([{ ...base, price: "1500.00" }, plain]);
  t.equal(priced.counts.updated, 1, "a real price after a price on request is one change");
  t.equal(await observations("A"), 2, "and exactly one observation");

  const attrs = { brand: "IEK", vat: 20, stores: { msk: 3, spb: 0 } };
  t.equal(
    (await step([{ ...base, price: "1500", attributes: attrs }, plain])).counts.updated,
    1,
    "attributes added",
  );
  t.equal(await observations("A"), 3);
  const reordered = { stores: { spb: 0, msk: 3 }, vat: 20, brand: "IEK" };
  t.equal(
    (await step([{ ...base, price: "1500.0", attributes: reordered }, plain])).counts.unchanged,
    2,
    "same attributes in another key order, same price: unchanged",
  );
  const changed = await step([{ ...base, price: "1500", attributes: { ...attrs, vat: 10 } }, plain]);
  t.equal(changed.counts.updated, 1, "an attribute change is a change");
  t.equal(await observations("A"), 4, "and one observation");
  const { rows: last } = await pool.query(
    "select price::text, attributes from supplier_offer_observations where sku = 'A' and run_id = $1",
    [changed.runId],
  );
  t.same(
    last,
    [{ price: "1500", attributes: { ...attrs, vat: 10 } }],
    "the observation records the attributes",
  );
  const cleared = await step([{ ...base, price: "1500" }, plain]);
  t.equal(cleared.counts.updated, 1, "attributes gone is a change");
  t.equal(
    (await pool.query("select attributes from supplier_offers where sku = 'A'")).rows[0].attributes,
    null,
  );
});

t.test("attribute values that jsonb must take as they are", async (t) => {
  const { pool, client } = await setup(t);
  const runId = await newRun(client);
  const attributes = { quote: 'a"b\\c', nul: "x\u0000y", unicode: "Цена", nested: [1, { deep: null }] };
  await commitPage(client, {
    runId,
    supplier: SUPPLIER,
    page: {
      seq: 1,
      offers: [
        { sku: "N", name: null, price: "1", currency: null, stock: null },
        { sku: "Q", name: null, price: "1", currency: null, stock: null, attributes },
      ],
      rejects: [],
      httpAttempts: 1,
    },
  });
  const { rows } = await pool.query("select sku, attributes from supplier_offers order by sku");
  t.same(rows, [
    { sku: "N", attributes: null },
    { sku: "Q", attributes: { ...attributes, nul: "x\uFFFDy" } },
  ]);
});
