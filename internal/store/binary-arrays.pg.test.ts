import fc from "fast-check";
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import type { Offer } from "../ingestion/ports.js";
import { BinaryArrays } from "./binary-arrays.js";
import { arrayLiterals, pageColumns } from "./offers.js";

/**
 * The page's columns as commitPage sends them (binary arrays in a reused scratch buffer,
 * the price as a text literal) read back by PostgreSQL itself, under the casts of the page
 * statement: every column is the values it was built from.
 */

const jsonText = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom("", "NULL", "null", " a ", '"', "\\", 'a"b\\c', "{x}", "a,b", "Кабель «ВВГ»", "😀"),
);
// A lone surrogate: pg sends it as U+FFFD, and so do the binary arrays (JSON escapes it, and
// jsonb refuses the escape, with either form of the column: not in attributes here).
const text = fc.oneof(jsonText, fc.constant("\ud800"));
/** Plain decimals of every length around the 4-digit groups, leading and trailing zeros included. */
const price = fc.oneof(
  fc.constantFrom("0", "0.0", "1.50", "0.0001", "10000", "9999.9999", "123456789012345678901234.5678"),
  fc
    .tuple(fc.stringMatching(/^\d{1,13}$/), fc.option(fc.stringMatching(/^\d{1,13}$/), { nil: undefined }))
    .map(([integer, fraction]) => (fraction === undefined ? integer : `${integer}.${fraction}`)),
);
const offer: fc.Arbitrary<Offer> = fc.record({
  sku: text,
  name: fc.option(text, { nil: null }),
  price: fc.option(price, { nil: null }),
  currency: fc.option(fc.constantFrom("RUB", "EUR"), { nil: null }),
  stock: fc.option(fc.oneof(fc.nat(), fc.constant(2_147_483_647)), { nil: null }),
  attributes: fc.option(fc.dictionary(fc.constantFrom("a", 'b"', "c\\"), jsonText, { maxKeys: 2 }), {
    nil: null,
  }),
});

/** What each column should read back as, cast to text by PostgreSQL (a lone surrogate is U+FFFD, as pg sends it). */
function columns(offers: Offer[]) {
  const utf8 = (s: string | null) => (s === null ? null : Buffer.from(s, "utf8").toString("utf8"));
  const attributes = offers.some((o) => o.attributes) ? offers.map((o) => o.attributes ?? null) : null;
  return [
    offers.map((o) => utf8(o.sku)),
    offers.map((o) => utf8(o.name)),
    offers.map((o) => o.price),
    offers.map((o) => o.currency),
    offers.map((o) => (o.stock === null ? null : String(o.stock))),
    attributes && JSON.parse(Buffer.from(JSON.stringify(attributes), "utf8").toString("utf8")),
  ];
}

const READ = `select $1::text[] as sku, $2::text[] as name, $3::numeric[]::text[] as price, $4::text[] as currency,
                     $5::int[]::text[] as stock, $6::jsonb[] as attrs`;

t.test("every column reads back as its values, page after page in one scratch buffer", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 1);
  const arrays = new BinaryArrays();
  const read = async (offers: Offer[]) => (await pool.query(READ, pageColumns(offers, arrays))).rows[0];
  t.same(
    await read([]),
    { sku: [], name: [], price: [], currency: [], stock: [], attrs: null },
    "an empty page",
  );
  const plain: Offer[] = [
    { sku: "A-1", name: "Выключатель", price: "10.50", currency: "RUB", stock: 3 },
    { sku: "A-2", name: null, price: "0.01", currency: null, stock: null },
  ];
  t.same(
    await read(plain),
    {
      sku: ["A-1", "A-2"],
      name: ["Выключатель", null],
      price: ["10.50", "0.01"],
      currency: ["RUB", null],
      stock: ["3", null],
      attrs: null,
    },
    "a page with nulls",
  );
  // A page larger than the buffer's first capacity: it grows while the page is written.
  const large: Offer[] = Array.from({ length: 5_000 }, (_, i) => ({
    sku: `SKU-${String(i).padStart(7, "0")}`,
    name: `Кабель ${i} «ВВГ»`,
    price: `${i}.99`,
    currency: "EUR",
    stock: i,
    attributes: i % 2 === 0 ? { colour: "red", n: i } : null,
  }));
  const row = await read(large);
  const [sku, name, price, currency, stock, attrs] = columns(large);
  t.strictSame([row.sku, row.name, row.price, row.currency, row.stock], [sku, name, price, currency, stock]);
  t.same(row.attrs, attrs, "5,000 offers, the scratch buffer grown on the way");
  await fc.assert(
    fc.asyncProperty(fc.array(offer, { minLength: 1, maxLength: 8 }), async (offers) => {
      const row = await read(offers);
      const [sku, name, , currency, stock, attrs] = columns(offers);
      // numeric_in's reading of the same text (leading zeros dropped, the scale kept).
      const price = (await pool.query("select $1::numeric[]::text[] as price", [arrayLiterals(offers)[2]]))
        .rows[0].price;
      t.strictSame(row.sku, sku);
      t.strictSame(row.name, name);
      t.strictSame(row.price, price);
      t.strictSame(row.currency, currency);
      t.strictSame(row.stock, stock);
      // jsonb keeps its own key order; fast-check's dictionaries have no prototype.
      t.same(row.attrs, attrs === null ? null : JSON.parse(JSON.stringify(attrs)));
      return true;
    }),
    { numRuns: 300 },
  );
});

t.test("a price with an exponent sends the page's prices as a text literal", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 1);
  const offers: Offer[] = [
    { sku: "A", name: null, price: "1.5e3", currency: null, stock: 1 },
    { sku: "B", name: null, price: "2.50", currency: null, stock: 2 },
  ];
  const columns = pageColumns(offers, new BinaryArrays());
  t.equal(columns[2], '{"1.5e3","2.50"}');
  t.strictSame((await pool.query(READ, columns)).rows[0].price, ["1500", "2.50"]);
});

t.test("a stock that is no 32-bit integer goes as text, for PostgreSQL to refuse as before", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 1);
  const offers: Offer[] = [{ sku: "A", name: null, price: "1", currency: null, stock: 2_147_483_648 }];
  const columns = pageColumns(offers, new BinaryArrays());
  t.equal(columns[4], "{2147483648}");
  await t.rejects(pool.query(READ, columns), /out of range for type integer/);
});
