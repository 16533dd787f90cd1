import fc from "fast-check";
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import type { Offer } from "../ingestion/ports.js";
import { arrayLiterals } from "./offers.js";

/**
 * The page's array literals (offers.ts) read back by PostgreSQL itself: every column
 * casts to the values it was built from, whether the fast path (one join) or the
 * element-by-element path built it.
 */

const text = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom("", "NULL", "null", " a ", '"', "\\", 'a"b\\c', "{x}", "a,b", "Кабель «ВВГ»", "😀"),
);
const offer: fc.Arbitrary<Offer> = fc.record({
  sku: text,
  name: fc.option(text, { nil: null }),
  price: fc.option(fc.constantFrom("0", "1.50", "123456789012345678901234.5678"), { nil: null }),
  currency: fc.option(fc.constantFrom("RUB", "EUR"), { nil: null }),
  stock: fc.option(fc.nat(), { nil: null }),
  attributes: fc.option(fc.dictionary(fc.constantFrom("a", 'b"', "c\\"), text, { maxKeys: 2 }), {
    nil: null,
  }),
});

/** What each column should read back as, cast to text by PostgreSQL. */
function columns(offers: Offer[]) {
  const attributes = offers.some((o) => o.attributes) ? offers.map((o) => o.attributes ?? null) : null;
  return [
    offers.map((o) => o.sku),
    offers.map((o) => o.name),
    offers.map((o) => o.price),
    offers.map((o) => o.currency),
    offers.map((o) => (o.stock === null ? null : String(o.stock))),
    attributes,
  ];
}

t.test("every column's literal reads back as its values (fast and element paths)", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 1);
  const read = async (offers: Offer[]) => {
    const [sku, name, price, currency, stock, attrs] = arrayLiterals(offers);
    const { rows } = await pool.query(
      `select $1::text[] as sku, $2::text[] as name, $3::numeric[]::text[] as price, $4::text[] as currency,
              $5::integer[]::text[] as stock,
              (select array_agg(case when a is null then null else a::jsonb end order by o)
                 from unnest($6::text[]) with ordinality as u(a, o)) as attrs`,
      [sku, name, price, currency, stock, attrs],
    );
    return rows[0];
  };
  t.same(
    await read([]),
    { sku: [], name: [], price: [], currency: [], stock: [], attrs: null },
    "an empty page",
  );
  const plain: Offer[] = [
    { sku: "A-1", name: "Выключатель", price: "10.50", currency: "RUB", stock: 3 },
    { sku: "A-2", name: "Розетка", price: "0.01", currency: "RUB", stock: 0 },
  ];
  t.same(
    await read(plain),
    {
      sku: ["A-1", "A-2"],
      name: ["Выключатель", "Розетка"],
      price: ["10.50", "0.01"],
      currency: ["RUB", "RUB"],
      stock: ["3", "0"],
      attrs: null,
    },
    "a page without nulls or escapes (one join a column)",
  );
  await fc.assert(
    fc.asyncProperty(fc.array(offer, { minLength: 1, maxLength: 8 }), async (offers) => {
      const row = await read(offers);
      const [sku, name, price, currency, stock, attrs] = columns(offers);
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
