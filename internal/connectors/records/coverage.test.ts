// Field coverage (docs/connectors.md, Field coverage): per mapped field, how many of a step's
// records gave it a value, counted by normalizeRecords on the records the field is read from.
import { readFileSync } from "node:fs";
import t from "tap";
import { connectorDefinitionSchema } from "../schema/connector-schema.js";
import { coveragePlan } from "./coverage.js";
import { compileFieldSpec, compileFields } from "./field-spec.js";
import { type EnrichedValues, normalizeRecords } from "./normalize.js";

function mapping(fields: Record<string, unknown>, attributes?: Record<string, unknown>) {
  const def = connectorDefinitionSchema.parse({ baseUrl: "https://x.example", fields, attributes });
  if (!def.fields) throw new Error("no fields");
  return compileFields(def.fields, def.attributes);
}

const byField = (coverage: { field: string; withValue: number; records: number }[]) =>
  Object.fromEntries(coverage.map((c) => [c.field, `${c.withValue}/${c.records}`]));

t.test("every mapped field but sku, records of the step alike offers and rejects", async (t) => {
  const m = mapping(
    { sku: "sku", price: "price", name: "name", stock: "stock" },
    { brand: "brand", unit: { const: "pcs" } },
  );
  const { offers, rejects, coverage } = normalizeRecords(
    [
      { sku: "A", price: "1", name: "Bolt", stock: 3, brand: "X" },
      { sku: "B", price: "2", name: null, stock: 0 },
      { price: "3", name: "Nut", brand: "Y" },
      { sku: "D", price: "bad", stock: -1 },
      "not an object",
    ],
    m,
  );
  t.equal(offers.length, 2);
  t.equal(rejects.length, 3);
  t.same(
    coverage.map((c) => [c.field, c.source]),
    [
      ["price", "price"],
      ["name", "name"],
      ["stock", "stock"],
      ["attributes.brand", "brand"],
      ["attributes.unit", "const"],
    ],
    "mapped fields only (no currency), in report order, with their sources",
  );
  t.same(
    byField(coverage),
    {
      price: "4/5",
      name: "2/5",
      stock: "3/5",
      "attributes.brand": "2/5",
      "attributes.unit": "4/5",
    },
    "a reject's fields still count; a stock of 0 is a value, a null name is not; a non-object gives none",
  );
});

t.test("nullIf and nullWhen null a value that was found: it still counts", async (t) => {
  const m = mapping({
    sku: "art",
    price: { path: "price", nullWhen: { path: "extra", contains: "Цена по запросу" } },
    name: { path: "name", nullIf: ["-"] },
  });
  const { offers, coverage } = normalizeRecords(
    [
      { art: "A", price: 10, extra: "Цена по запросу", name: "-" },
      { art: "B", extra: "Цена по запросу", name: "Nut" },
      { art: "C", price: 12 },
    ],
    m,
  );
  t.same(
    offers.map((o) => [o.price, o.name]),
    [
      [null, null],
      [null, "Nut"],
      ["12", null],
    ],
  );
  t.same(byField(coverage), { price: "2/3", name: "2/3" }, "B sent no price: nulled, but not a value");
});

t.test("a failing expression gives no value, and the record's other fields are still counted", async (t) => {
  const m = mapping({ sku: "sku", price: { jmespath: "sum(p)" }, name: "name" });
  const { rejects, coverage } = normalizeRecords(
    [
      { sku: "A", p: "x", name: "Bolt" },
      { sku: "B", p: [1, 2], name: "Nut" },
    ],
    m,
  );
  t.match(rejects, [{ reason: /^price \(sum\(p\)\) could not be evaluated/ }]);
  t.same(byField(coverage), { price: "1/2", name: "2/2" });
});

t.test("a JMESPath sum over a missing field hides it; sum: true does not", async (t) => {
  const records = [{ sku: "A", p: "1", stores: [{ Remain: 4 }] }];
  const hiding = mapping({ sku: "sku", price: "p", stock: { jmespath: "sum(stores[].Qty)" } });
  const r1 = normalizeRecords(records, hiding);
  t.equal(r1.offers[0]?.stock, 0, "JMESPath's sum of nothing is 0 …");
  t.same(byField(r1.coverage), { price: "1/1", stock: "1/1" }, "… and looks like a value");
  const exact = mapping({ sku: "sku", price: "p", stock: { jmespath: "stores[].Qty", sum: true } });
  const r2 = normalizeRecords(records, exact);
  t.equal(r2.offers[0]?.stock, null);
  t.same(byField(r2.coverage), { price: "1/1", stock: "0/1" }, "sum: true: nothing found, no value");
});

/** The shipped etm.json's fields and its remains enrichment, compiled as the connector compiles them. */
function shippedEtm() {
  const def = connectorDefinitionSchema.parse(
    JSON.parse(readFileSync(new URL("../../../config/suppliers/etm.json", import.meta.url), "utf8")),
  );
  if (!def.fields || !def.enrich?.[0]) throw new Error("etm.json has no fields or enrich");
  const e = def.enrich[0];
  const stock = compileFieldSpec(e.fields?.stock ?? "x");
  const byStore = compileFieldSpec(e.attributes?.stockByStore ?? "x");
  const fields = compileFields(def.fields, def.attributes);
  const plan = coveragePlan(fields, [
    { fields: [["stock", stock]], attributes: [["stockByStore", byStore]] },
  ]);
  const enriched = (remains: object | undefined): EnrichedValues => ({
    fields: { stock: { field: stock, record: remains } },
    attributes: { stockByStore: { field: byStore, record: remains } },
  });
  return { fields, plan, enriched };
}

t.test(
  "shipped etm.json: remains without any StoreQuantRem give stock coverage 0, not stock 0",
  async (t) => {
    const { fields, plan, enriched } = shippedEtm();
    const prices = [0, 1, 2].map((i) => ({ gdscode: `C${i}`, price: "10.5", pricewnds: "12.60" }));
    const renamed = {
      InfoStores: [
        { StoreCode: "S1", StoreType: "rc", StockRem: "5" },
        { StoreCode: "all", StoreType: "all", StockRem: "9" },
      ],
    };
    const drifted = normalizeRecords(
      prices,
      fields,
      [enriched(renamed), enriched(renamed), enriched(undefined)],
      plan,
    );
    t.same(
      drifted.offers.map((o) => o.stock),
      [null, null, null],
      "stock null (unknown), never 0",
    );
    const stock = drifted.coverage.find((c) => c.field === "stock");
    t.match(stock, {
      records: 3,
      withValue: 0,
      source: /^InfoStores\[\?StoreType=='all'\] \| \[0\]\.StoreQuantRem else sum of /,
    });

    const real = {
      InfoStores: [
        { StoreCode: "S1", StoreType: "rc", StoreQuantRem: "5" },
        { StoreCode: "S2", StoreType: "op", StoreQuantRem: 2 },
        { StoreCode: "all", StoreType: "all", StoreQuantRem: "9" },
      ],
    };
    const withoutAll = { InfoStores: real.InfoStores.slice(0, 2) };
    const good = normalizeRecords(
      prices,
      fields,
      [enriched(real), enriched(withoutAll), enriched(undefined)],
      plan,
    );
    t.same(
      good.offers.map((o) => [o.stock, o.attributes?.stockByStore]),
      [
        [
          9,
          [
            { store: "S1", type: "rc", quantity: "5" },
            { store: "S2", type: "op", quantity: 2 },
          ],
        ],
        [
          7,
          [
            { store: "S1", type: "rc", quantity: "5" },
            { store: "S2", type: "op", quantity: 2 },
          ],
        ],
        [null, undefined],
      ],
      "the all row, else the others summed; stockByStore without the total row; no remains answer: null",
    );
    t.same(byField(good.coverage), {
      price: "3/3",
      currency: "3/3",
      stock: "2/3",
      "attributes.priceWithVat": "3/3",
      "attributes.priceTariff": "0/3",
      "attributes.priceRetail": "0/3",
      "attributes.stockByStore": "2/3",
    });
  },
);
