/**
 * The guards in the store (docs/connectors.md, Guards), against a real PostgreSQL: each
 * guard tripping and not tripping at its boundary, what a held run leaves in the
 * catalog, and approval, dismissal and staleness.
 */
import type pg from "pg";
import t from "tap";
import { createTestDatabase, type Teardown, testPool } from "../../test/helpers/db.js";
import type { FieldCoverage, GuardSettings, Offer, PageCounts } from "../ingestion/ports.js";
import { decideHeld, listHeld } from "./held.js";
import { commitPage, recordFailedStep } from "./offers.js";
import { inTransaction } from "./queryable.js";
import { closeRun, startRun } from "./runs.js";

const SUPPLIER = "acme";
const OWNER = { hostname: "test-host", pid: 1, bootId: "boot" };
const GUARDS: GuardSettings = {
  maxDelistRatio: 0.25,
  minDelistCount: 20,
  priceJumpFactor: 10,
  currencyChange: true,
};

const offer = (sku: string, price: string | null, extra: Partial<Offer> = {}): Offer => ({
  sku,
  name: `Offer ${sku}`,
  price,
  currency: "EUR",
  stock: 5,
  ...extra,
});

const catalog = (n: number, from = 0): Offer[] =>
  Array.from({ length: n }, (_, i) =>
    offer(`SKU-${String(from + i).padStart(4, "0")}`, `${10 + from + i}.00`),
  );

interface Walked {
  runId: number;
  counts: PageCounts[];
  state: string | undefined;
  errorCode: string | null | undefined;
  errorMessage: string | null;
  delisted: number;
  delistHeld: number;
}

let slot = Date.parse("2026-01-01T00:00:00Z");

/** One run through the store as a tick drives it: start, pages of `size`, close. */
async function walk(
  client: pg.ClientBase,
  offers: Offer[],
  options: {
    guards?: GuardSettings | null;
    size?: number;
    coverage?: FieldCoverage[];
    failLast?: boolean;
  } = {},
): Promise<Walked> {
  slot += 3_600_000;
  const guards = options.guards === undefined ? GUARDS : options.guards;
  const runId = await startRun(client, {
    supplier: SUPPLIER,
    slotStart: new Date(slot),
    trigger: "schedule",
    owner: OWNER,
  });
  const size = options.size ?? 1_000;
  const counts: PageCounts[] = [];
  let seq = 0;
  for (let i = 0; i < offers.length; i += size) {
    const page = { seq: ++seq, offers: offers.slice(i, i + size), rejects: [], httpAttempts: 1 };
    const withCoverage = options.coverage ? { ...page, coverage: options.coverage } : page;
    counts.push(await commitPage(client, { runId, supplier: SUPPLIER, page: withCoverage, guards }));
  }
  if (options.failLast) {
    await recordFailedStep(client, {
      runId,
      supplier: SUPPLIER,
      seq: seq + 1,
      errorCode: "HTTP_503",
      httpAttempts: 1,
    });
  }
  const closed = await closeRun(client, {
    runId,
    walkComplete: !options.failLast,
    errorCode: options.failLast ? "HTTP_503" : null,
    errorMessage: options.failLast ? "503" : null,
    guards,
  });
  const { rows } = await client.query<{ error_message: string | null }>(
    "select error_message from ingestion_runs where id = $1",
    [runId],
  );
  return {
    runId,
    counts,
    state: closed?.state,
    errorCode: closed?.errorCode,
    errorMessage: rows[0]?.error_message ?? null,
    delisted: closed?.counts.recordsDelisted ?? -1,
    delistHeld: closed?.delistHeld ?? -1,
  };
}

async function setup(t: Teardown) {
  const pool = testPool(t, await createTestDatabase(t), 4);
  const client = await pool.connect();
  t.teardown(() => client.release());
  return { pool, client };
}

async function stored(db: pg.Pool | pg.ClientBase, sku: string) {
  const { rows } = await db.query(
    "select name, price::text, currency, stock, attributes, delisted_at is not null as delisted from supplier_offers where supplier = $1 and sku = $2",
    [SUPPLIER, sku],
  );
  return rows[0];
}

async function observations(db: pg.Pool, runId: number): Promise<string[]> {
  const { rows } = await db.query<{ sku: string }>(
    "select sku from supplier_offer_observations where run_id = $1 order by sku",
    [runId],
  );
  return rows.map((r) => r.sku);
}

const decide = (db: pg.ClientBase, runId: number, decision: "approve" | "dismiss", skus?: string[]) =>
  inTransaction(db, (tx) => decideHeld(tx, { runId, decision, by: "test", ...(skus ? { skus } : {}) }));

t.test("price jumps: held at exactly the factor, applied just below it, in exact decimals", async (t) => {
  const { pool, client } = await setup(t);
  const first = [
    offer("A", "12.50"),
    offer("B", "12.50"),
    offer("C", "100"),
    offer("D", "100"),
    offer("E", null),
    offer("F", "5.00"),
    offer("G", "5.00"),
    offer("H", "7.00"),
  ];
  await walk(client, first);
  const second = [
    offer("A", "125.00", { stock: 99, name: "renamed" }), // exactly x10: held, stock and name kept
    offer("B", "124.99"), // just below x10
    offer("C", "10"), // exactly /10: held
    offer("D", "10.01"), // just above /10
    offer("E", "5000"), // a price appearing where there was none (on request): never held
    offer("F", null), // becomes on request: not a jump
    offer("G", "0"), // falls to 0: held
    offer("H", "7.00", { stock: 1 }), // an ordinary change beside the held ones
    offer("I", "99999"), // a first sighting: never held
  ];
  const run = await walk(client, second);
  t.same(run.counts[0]?.held, { price_jump: 3 });
  t.match(run.counts[0], { inserted: 1, updated: 5, unchanged: 0 });
  t.equal(run.state, "partial");
  t.equal(run.errorCode, "GUARD");
  t.match(run.errorMessage, /^held: 3 price jumps \(first: A price 12\.50 -> 125\.00 \(x10\)\)$/);
  const items = await listHeld(pool, { runId: run.runId });
  t.same(
    items.map((i) => [i.sku, i.kind, i.reason]),
    [
      ["A", "price_jump", "price 12.50 -> 125.00 (x10)"],
      ["C", "price_jump", "price 100 -> 10 (/10)"],
      ["G", "price_jump", "price 5.00 -> 0 (to 0)"],
    ],
  );
  t.same(items[0]?.stored, { name: "Offer A", price: "12.50", currency: "EUR", stock: 5, attributes: null });
  t.same(items[0]?.proposed, {
    name: "renamed",
    price: "125.00",
    currency: "EUR",
    stock: 99,
    attributes: null,
  });
  t.same(
    await stored(pool, "A"),
    { name: "Offer A", price: "12.50", currency: "EUR", stock: 5, attributes: null, delisted: false },
    "a held offer keeps every stored field",
  );
  t.equal((await stored(pool, "B"))?.price, "124.99");
  t.equal((await stored(pool, "E"))?.price, "5000");
  t.equal((await stored(pool, "F"))?.price, null);
  t.same(
    await observations(pool, run.runId),
    ["B", "D", "E", "F", "H", "I"],
    "no observation for a held offer",
  );
  const { rows } = await pool.query("select records_held from ingestion_runs where id = $1", [run.runId]);
  t.equal(rows[0]?.records_held, 3);
});

t.test("the factor is compared as an exact decimal: 0.1 -> 0.3 is exactly x3", async (t) => {
  const { pool, client } = await setup(t);
  const three = { ...GUARDS, priceJumpFactor: 3 };
  await walk(client, [offer("A", "0.1"), offer("B", "0.1"), offer("C", "0.3")], { guards: three });
  // In doubles 0.1 * 3 = 0.30000000000000004 > 0.3: a float comparison would let A through.
  const run = await walk(
    client,
    [offer("A", "0.3"), offer("B", "0.29999999999999999999"), offer("C", "0.1")],
    {
      guards: three,
    },
  );
  t.same(
    (await listHeld(pool, { runId: run.runId })).map((i) => [i.sku, i.reason]),
    [
      ["A", "price 0.1 -> 0.3 (x3)"],
      ["C", "price 0.3 -> 0.1 (/3)"],
    ],
  );
  t.equal(
    (await stored(pool, "B"))?.price,
    "0.29999999999999999999",
    "just below x3 is applied, every digit kept",
  );
});

t.test("a currency switch is held; with currencyChange false it is applied", async (t) => {
  const { pool, client } = await setup(t);
  await walk(client, [offer("A", "1.00"), offer("B", "1.00")]);
  const run = await walk(client, [
    offer("A", "1.00", { currency: "USD" }),
    offer("B", "150.00", { currency: "USD" }),
  ]);
  t.same(
    (await listHeld(pool, { runId: run.runId })).map((i) => [i.sku, i.kind, i.reason]),
    [
      ["A", "currency", "currency EUR -> USD"],
      ["B", "currency", "currency EUR -> USD; price 1.00 -> 150.00 (x150)"],
    ],
  );
  t.equal((await stored(pool, "A"))?.currency, "EUR");
  const off = await walk(client, [offer("A", "1.00", { currency: "USD" })], {
    guards: { ...GUARDS, currencyChange: false },
  });
  t.same(off.counts[0]?.held, {});
  t.equal((await stored(pool, "A"))?.currency, "USD");
});

t.test("an offer held on two pages of one run is one item with the later values", async (t) => {
  const { pool, client } = await setup(t);
  await walk(client, [offer("A", "1.00"), offer("B", "1.00")]);
  // Pages of one offer: A jumps on page 1, and again (further) on page 3.
  const run = await walk(client, [offer("A", "100.00"), offer("B", "1.00"), offer("A", "250.00")], {
    size: 1,
  });
  t.same(
    run.counts.map((c) => c.held),
    [{ price_jump: 1 }, {}, { price_jump: 1 }],
  );
  const items = await listHeld(pool, { runId: run.runId });
  t.same(
    items.map((i) => [i.sku, i.reason, (i.proposed as { price?: string } | null)?.price]),
    [["A", "price 1.00 -> 250.00 (x250)", "250.00"]],
  );
  const { rows } = await pool.query<{ records_held: number }>(
    "select records_held from ingestion_runs where id = $1",
    [run.runId],
  );
  t.equal(rows[0]?.records_held, 1, "counted once on the run");
  t.equal((await stored(pool, "A"))?.price, "1.00");
});

t.test(
  "guards off: a jump and a currency switch are applied and observed; earlier holds still go stale",
  async (t) => {
    const { pool, client } = await setup(t);
    await walk(client, [offer("A", "1.00"), offer("B", "1.00")]);
    const held = await walk(client, [offer("A", "100.00"), offer("B", "1.00")]);
    t.same(held.counts[0]?.held, { price_jump: 1 });
    // A connector with "guards": false writes its pages with the statement without the guards' CTEs.
    const off = await walk(client, [offer("A", "100.00"), offer("B", "1.00", { currency: "USD" })], {
      guards: null,
    });
    t.match(off.counts[0], { updated: 2, unchanged: 0, held: {} });
    t.same([off.state, off.errorCode], ["succeeded", null]);
    t.same([(await stored(pool, "A"))?.price, (await stored(pool, "B"))?.currency], ["100.00", "USD"]);
    const { rows } = await pool.query<{ sku: string; kind: string }>(
      "select sku, kind from supplier_offer_observations where run_id = $1 order by sku",
      [off.runId],
    );
    t.same(rows, [
      { sku: "A", kind: "changed" },
      { sku: "B", kind: "changed" },
    ]);
    t.same((await listHeld(pool, { runId: off.runId })).length, 0, "nothing held by the run without guards");
    const [earlier] = await listHeld(pool, { runId: held.runId, all: true });
    t.same([earlier?.sku, earlier?.state], ["A", "stale"], "the earlier hold is decided by the newer values");
  },
);

t.test("mass delisting: held only when both the ratio and the count are exceeded", async (t) => {
  const { pool, client } = await setup(t);
  await walk(client, catalog(100));
  // 25 of 100 missing is exactly 25 %: not more than maxDelistRatio, delisted.
  const exact = await walk(client, catalog(75));
  t.same([exact.state, exact.errorCode, exact.delisted, exact.delistHeld], ["succeeded", null, 25, 0]);
  // 19 of 75 is 25.3 % but not more than 20 offers: delisted.
  const few = await walk(client, catalog(56));
  t.same([few.state, few.delisted], ["succeeded", 19]);
  // 21 of 56 (37.5 %, > 20): held; nothing delisted.
  const held = await walk(client, catalog(35));
  t.same([held.state, held.errorCode, held.delisted, held.delistHeld], ["partial", "GUARD", 0, 21]);
  t.equal(held.errorMessage, "held: delist: 21 of 56 listed (38 %) > 25 % and > 20");
  const listed = await pool.query<{ n: number }>(
    "select count(*)::int as n from supplier_offers where supplier = $1 and delisted_at is null",
    [SUPPLIER],
  );
  t.equal(listed.rows[0]?.n, 56, "nothing delisted by the held run");
  const [item] = await listHeld(pool, { runId: held.runId });
  t.same(
    [item?.kind, item?.sku, item?.stored, item?.proposed],
    ["delist", null, { listed: 56 }, { delist: 21, listed: 56, maxDelistRatio: 0.25, minDelistCount: 20 }],
  );
  // Guards off: the same walk delists.
  const off = await walk(client, catalog(35), { guards: null });
  t.same([off.state, off.delisted], ["succeeded", 21]);
});

t.test(
  "a held delisting still relists what the run saw again; approval delists exactly what stayed unseen",
  async (t) => {
    const { pool, client } = await setup(t);
    await walk(client, catalog(100));
    await walk(client, catalog(90)); // delists SKU-0090..0099 (10 of 100)
    t.equal((await stored(pool, "SKU-0095"))?.delisted, true);
    // Sees 60 of the 90 listed plus SKU-0095 again: 30 missing, held; SKU-0095 relisted.
    const held = await walk(client, [...catalog(60), ...catalog(1, 95)]);
    t.same([held.errorCode, held.delistHeld], ["GUARD", 30]);
    t.equal((await stored(pool, "SKU-0095"))?.delisted, false, "relisted although the delisting is held");
    // A later incomplete walk sees 5 of the missing ones, and changes one more.
    const later = await walk(client, [...catalog(60), ...catalog(5, 60), offer("SKU-0070", "70.50")], {
      failLast: true,
    });
    t.equal(later.state, "partial");
    t.equal(later.errorCode, "HTTP_503", "an incomplete walk keeps its own cause");
    const decision = await decide(client, held.runId, "approve");
    t.same(
      decision.decided.map((d) => [d.item.kind, d.state, d.applied]),
      [["delist", "approved", 24]],
      "30 missed, minus 5 seen since, minus 1 changed since",
    );
    const { rows } = await pool.query<{ sku: string }>(
      "select sku from supplier_offers where supplier = $1 and delisted_at is null order by sku",
      [SUPPLIER],
    );
    t.same(
      rows.map((r) => r.sku),
      [...catalog(65).map((o) => o.sku), "SKU-0070", "SKU-0095"],
      "exactly the offers seen by the held run or since stay listed",
    );
    const runRow = await pool.query("select records_delisted from ingestion_runs where id = $1", [
      held.runId,
    ]);
    t.equal(runRow.rows[0]?.records_delisted, 24, "counted on the held run");
    t.same((await decide(client, held.runId, "approve")).decided, [], "approving again changes nothing");
  },
);

t.test("a later complete walk decides the delisting itself: the held item goes stale", async (t) => {
  const { pool, client } = await setup(t);
  await walk(client, catalog(100));
  const held = await walk(client, catalog(10));
  t.equal(held.errorCode, "GUARD");
  const next = await walk(client, catalog(100));
  t.same([next.state, next.delisted], ["succeeded", 0], "the supplier corrected itself");
  const [item] = await listHeld(pool, { runId: held.runId, all: true });
  t.same([item?.state, item?.decidedBy], ["stale", `run ${next.runId}`]);
  t.same((await decide(client, held.runId, "approve")).decided, [], "nothing left to approve");
});

t.test("a vanished field: kept while more than half of the step's offers have it stored", async (t) => {
  const { pool, client } = await setup(t);
  const coverage = (withValue: number, records = 100): FieldCoverage[] => [
    { field: "name", source: "title", records, withValue: records },
    { field: "stock", source: "stock.total", records, withValue },
  ];
  // 51 of 100 offers have a stock stored.
  const first = catalog(100).map((o, i) => ({ ...o, stock: i < 51 ? 7 : null }));
  await walk(client, first, { coverage: coverage(51) });
  const gone = catalog(100).map((o) => ({
    ...o,
    stock: null,
    price: o.sku === "SKU-0003" ? "13.50" : o.price,
  }));
  const run = await walk(client, gone, { coverage: coverage(0) });
  t.same(run.counts[0]?.held, { field: 1 });
  t.match(run.counts[0], { updated: 1, unchanged: 99 }, "only the price change is written");
  t.same([run.state, run.errorCode], ["partial", "GUARD"]);
  t.equal((await stored(pool, "SKU-0000"))?.stock, 7, "stored stock kept");
  t.equal((await stored(pool, "SKU-0003"))?.stock, 7, "kept on an offer whose price changed too");
  t.equal((await stored(pool, "SKU-0003"))?.price, "13.50");
  const [item] = await listHeld(pool, { runId: run.runId });
  t.same(
    [item?.kind, item?.field, item?.reason],
    ["field", "stock", "stock: stock.total matched nothing in 100 of 100 records (51 offers have it stored)"],
  );
  const { rows } = await pool.query("select field_coverage from ingestion_runs where id = $1", [run.runId]);
  t.same(rows[0]?.field_coverage, {
    name: { source: "title", records: 100, withValue: 100 },
    stock: { source: "stock.total", records: 100, withValue: 0 },
  });
  // 50 of 100 stored is not more than half: applied.
  await walk(
    client,
    catalog(100).map((o, i) => ({ ...o, stock: i < 50 ? 7 : null })),
    {
      coverage: coverage(50),
      guards: null,
    },
  );
  const half = await walk(client, gone, { coverage: coverage(0) });
  t.same(half.counts[0]?.held, {});
  t.equal((await stored(pool, "SKU-0000"))?.stock, null);
});

t.test("approving a vanished field empties it where no later run changed the offer", async (t) => {
  const { pool, client } = await setup(t);
  const coverage = (withValue: number): FieldCoverage[] => [
    { field: "attributes.brand", source: "brand", records: 10, withValue },
  ];
  const branded = catalog(10).map((o) => ({ ...o, attributes: { brand: "ACME", unit: "pc" } }));
  await walk(client, branded, { coverage: coverage(10) });
  const plain = catalog(10).map((o) => ({ ...o, attributes: { unit: "pc" } }));
  const run = await walk(client, plain, { coverage: coverage(0) });
  t.same(run.counts[0]?.held, { field: 1 });
  t.same((await stored(pool, "SKU-0001"))?.attributes, { brand: "ACME", unit: "pc" });
  // A later run changes SKU-0002 (and keeps its brand again: the field is still gone).
  const later = await walk(
    client,
    plain.map((o) => (o.sku === "SKU-0002" ? { ...o, price: "99.00" } : o)),
    { coverage: coverage(0) },
  );
  t.equal(later.errorCode, "GUARD");
  const [earlier] = await listHeld(pool, { runId: run.runId, all: true });
  t.equal(earlier?.state, "stale", "the newer run's item supersedes it");
  const decision = await decide(client, later.runId, "approve");
  t.same(
    decision.decided.map((d) => [d.state, d.applied]),
    [["approved", 10]],
  );
  t.same((await stored(pool, "SKU-0001"))?.attributes, { unit: "pc" });
  t.equal((await stored(pool, "SKU-0002"))?.price, "99.00");
  t.equal((await observations(pool, later.runId)).length, 10, "each emptied offer is observed");
  const hash = await pool.query<{ same: boolean }>(
    `select bool_and(content_hash = md5(concat_ws(',', quote_nullable(name), coalesce(trim_scale(price)::text, 'NULL'),
       quote_nullable(currency), quote_nullable(stock), attributes::text))) as same from supplier_offers`,
  );
  t.equal(hash.rows[0]?.same, true, "content hashes match the stored fields");
});

t.test("approval, staleness, superseding and dismissal of held offers", async (t) => {
  const { pool, client } = await setup(t);
  await walk(client, [offer("A", "1.00"), offer("B", "1.00"), offer("C", "1.00"), offer("D", "1.00")]);
  const run = await walk(client, [
    offer("A", "100.00"),
    offer("B", "100.00"),
    offer("C", "100.00"),
    offer("D", "100.00"),
  ]);
  t.same(run.counts[0]?.held, { price_jump: 4 });
  // A later run: B changed by the supplier (not a jump), C back to 1.00, D held again.
  const later = await walk(client, [
    offer("A", "100.00"),
    offer("B", "2.00"),
    offer("C", "1.00"),
    offer("D", "100.00"),
  ]);
  const earlier = await listHeld(pool, { runId: run.runId, all: true });
  t.same(
    earlier.map((i) => [i.sku, i.state]),
    [
      ["A", "stale"],
      ["B", "stale"],
      ["C", "stale"],
      ["D", "stale"],
    ],
    "every offer the later run saw again decides the earlier items",
  );
  t.same(
    (await listHeld(pool, { runId: later.runId })).map((i) => i.sku),
    ["A", "D"],
  );
  const approved = await decide(client, later.runId, "approve", ["A", "X"]);
  t.same(
    approved.decided.map((d) => [d.item.sku, d.state, d.applied]),
    [["A", "approved", 1]],
  );
  t.same(approved.notHeld, ["X"]);
  t.equal((await stored(pool, "A"))?.price, "100.00");
  t.same(
    await observations(pool, later.runId),
    ["A", "B"],
    "the approved change is observed with the held run's id",
  );
  // D changes meanwhile (a manual fix, say): approving it now is stale.
  await pool.query("update supplier_offers set price = 3 where sku = 'D'");
  const stale = await decide(client, later.runId, "approve", ["D"]);
  t.same(
    stale.decided.map((d) => [d.item.sku, d.state]),
    [["D", "stale"]],
  );
  t.equal((await stored(pool, "D"))?.price, "3");
  // Dismiss: nothing applied.
  const again = await walk(client, [
    offer("A", "100.00"),
    offer("B", "2.00"),
    offer("C", "1.00"),
    offer("D", "300"),
  ]);
  const dismissed = await decide(client, again.runId, "dismiss");
  t.same(
    dismissed.decided.map((d) => [d.item.sku, d.state]),
    [["D", "dismissed"]],
  );
  t.equal((await stored(pool, "D"))?.price, "3");
  t.same((await decide(client, again.runId, "dismiss")).decided, [], "idempotent");
});

t.test("two decisions of the same run at once apply it once", async (t) => {
  const { pool, client } = await setup(t);
  await walk(client, catalog(50));
  const run = await walk(
    client,
    catalog(50).map((o) => ({ ...o, price: `${Number(o.price) * 100}.00` })),
  );
  t.equal(run.counts[0]?.held.price_jump, 50);
  const other = await pool.connect();
  t.teardown(() => other.release());
  const [a, b] = await Promise.all([
    decide(client, run.runId, "approve"),
    decide(other, run.runId, "approve"),
  ]);
  t.equal(a.decided.length + b.decided.length, 50, "each item decided by exactly one of them");
  t.ok(a.decided.length === 0 || b.decided.length === 0, "the second found nothing left");
  const obs = await pool.query<{ n: number }>(
    "select count(*)::int as n from supplier_offer_observations where run_id = $1",
    [run.runId],
  );
  t.equal(obs.rows[0]?.n, 50, "one observation per approved offer");
});

t.test("decisions refuse an unknown or running run", async (t) => {
  const { client } = await setup(t);
  await t.rejects(decide(client, 999_999, "approve"), /run 999999 does not exist/);
  const runId = await startRun(client, {
    supplier: SUPPLIER,
    slotStart: new Date(),
    trigger: "schedule",
    owner: OWNER,
  });
  await t.rejects(decide(client, runId, "dismiss"), /still running/);
});
