// Field specs and attributes (docs/connectors.md, Records and fields): how a record's values are found, nulled,
// read with a decimal comma, and what becomes a reject.
import t from "tap";
import { connectorDefinitionSchema } from "../config/connector-schema.js";
import { formatSchemaIssues } from "../config/connectors.js";
import { LosslessNumber } from "../platform/exact-json.js";
import { compileFields } from "./field-spec.js";
import { MAX_ATTRIBUTES_BYTES, normalizeRecord } from "./normalize.js";

function mapping(fields: Record<string, unknown>, attributes?: Record<string, unknown>) {
  const def = connectorDefinitionSchema.parse({ baseUrl: "https://x.example", fields, attributes });
  if (!def.fields) throw new Error("no fields");
  return compileFields(def.fields, def.attributes);
}

function schemaError(fields: Record<string, unknown>, attributes?: Record<string, unknown>): string {
  const r = connectorDefinitionSchema.safeParse({ baseUrl: "https://x.example", fields, attributes });
  return r.success ? "valid" : formatSchemaIssues(r.error.issues);
}

const ETM_REMAINS = {
  gdscode: "9536092",
  InfoStores: [
    { StoreCode: "1", StoreType: "rc", Remain: 12 },
    { StoreCode: "2", StoreType: "shop", Remain: 3 },
  ],
};

t.test("the spec forms: dot path, path, jmespath, const", async (t) => {
  const m = mapping({
    sku: { path: "gdscode" },
    price: { const: "0" },
    currency: { const: "RUB" },
    stock: { jmespath: "sum(InfoStores[].Remain)" },
    name: "gdscode",
  });
  t.same(normalizeRecord(ETM_REMAINS, m), {
    offer: { sku: "9536092", price: "0", currency: "RUB", stock: 15, name: "9536092" },
  });
  const iek = mapping({ sku: "sku", price: { const: 1 }, stock: { jmespath: "sum(values(residues))" } });
  t.match(normalizeRecord({ sku: "A", residues: { "1": 4, "7": 6 } }, iek), { offer: { stock: 10 } });
  t.match(normalizeRecord({ sku: "A", residues: {} }, iek), { offer: { stock: 0 } }, "sum of nothing is 0");
  t.match(
    normalizeRecord({ sku: "A" }, iek),
    { reject: { reason: /^stock \(sum\(values\(residues\)\)\) could not be evaluated \(.*\)$/ } },
    "a failing expression is a reject naming the field and the expression",
  );
  const filtered = mapping({
    sku: "gdscode",
    price: { const: "1" },
    stock: { jmespath: "sum(InfoStores[?StoreType=='rc'].Remain)" },
  });
  t.match(normalizeRecord(ETM_REMAINS, filtered), { offer: { stock: 12 } });
});

t.test("nullIf: a price on request is null, a missing price still a reject", async (t) => {
  const m = mapping({ sku: "art", price: { path: "price", nullIf: ["Цена по запросу", 0] } });
  t.match(
    normalizeRecord({ art: "A", price: "  Цена по запросу " }, m),
    { offer: { price: null } },
    "trimmed",
  );
  t.match(normalizeRecord({ art: "A", price: 0 }, m), { offer: { price: null } });
  t.match(normalizeRecord({ art: "A", price: "12.5" }, m), { offer: { price: "12.5" } });
  t.match(normalizeRecord({ art: "A" }, m), { reject: { reason: /^price \(price\) is missing/ } });
  t.match(normalizeRecord({ art: "A", price: null }, m), {
    reject: { reason: /^price \(price\) is missing/ },
  });
  t.match(normalizeRecord({ art: "A", price: "по запросу" }, m), {
    reject: { reason: /^price \(price\) is not a decimal number: "по запросу"/ },
  });
  const name = mapping({ sku: "art", price: "p", name: { path: "n", nullIf: ["-", ""] } });
  t.match(normalizeRecord({ art: "A", p: "1", n: "-" }, name), { offer: { name: null } });
  const lossless = mapping({ sku: "art", price: { path: "p", nullIf: ["12345678901234567890"] } });
  t.match(normalizeRecord({ art: "A", p: new LosslessNumber("12345678901234567890") }, lossless), {
    offer: { price: null },
  });
});

t.test("decimalSeparator: group spaces dropped, a comma read as the point", async (t) => {
  const m = mapping({
    sku: "art",
    price: { path: "p", decimalSeparator: "," },
    stock: { path: "s", decimalSeparator: "," },
  });
  const price = (p: unknown) => {
    const r = normalizeRecord({ art: "A", p }, m);
    return "offer" in r ? r.offer.price : r.reject.reason;
  };
  t.equal(price("1 234,50"), "1234.50");
  t.equal(price("1\u00a0234\u00a0567,5"), "1234567.5", "no-break spaces");
  t.equal(price("1\u202f234,5"), "1234.5", "narrow no-break space");
  t.equal(price("12,5"), "12.5");
  t.equal(price("12"), "12");
  t.equal(price(12.5), "12.5", "JSON numbers are numbers already");
  t.match(price("1.234,50"), /is not a decimal number with ',' as its separator: "1\.234,50"/);
  t.match(price("1.234"), /is not a decimal number with ',' as its separator/, "a dot is never guessed");
  t.match(price("1,2,3"), /is not a decimal number: "1,2,3"/);
  t.match(price("1 2 3 ,5"), /is not a decimal number/, "a space before the comma is no digit group");
  const stock = (s: unknown) => {
    const r = normalizeRecord({ art: "A", p: "1", s }, m);
    return "offer" in r ? r.offer.stock : r.reject.reason;
  };
  t.equal(stock("1 234"), 1234);
  t.equal(stock("12,0"), 12, "an integral decimal is a stock");
  t.match(stock("12,5"), /^stock \(s\) is not an integer: "12,5"/);
  const plain = mapping({ sku: "art", price: "p", stock: "s" });
  t.match(normalizeRecord({ art: "A", p: "1", s: "12.0" }, plain), { offer: { stock: 12 } });
  t.match(normalizeRecord({ art: "A", p: "12,5" }, plain), {
    reject: { reason: /^price \(p\) is not a decimal number: "12,5"/ },
  });
});

t.test("attributes: kept as one object, absent values left out, bounded", async (t) => {
  const m = mapping(
    { sku: "art", price: "price" },
    {
      brand: "TM",
      vat: { path: "vat", nullIf: [""] },
      minOrder: { jmespath: "min_ship" },
      stores: { jmespath: "residues" },
      unit: { const: "pcs" },
    },
  );
  t.same(normalizeRecord({ art: "A", price: "1", TM: "IEK", vat: "", min_ship: 10, residues: { a: 1 } }, m), {
    offer: {
      sku: "A",
      price: "1",
      currency: null,
      stock: null,
      name: null,
      attributes: { brand: "IEK", minOrder: 10, stores: { a: 1 }, unit: "pcs" },
    },
  });
  const none = mapping({ sku: "art", price: "price" }, { brand: "TM" });
  const bare = normalizeRecord({ art: "A", price: "1" }, none);
  t.ok("offer" in bare && bare.offer.attributes === undefined, "no attribute present: none stored");
  const big = normalizeRecord({ art: "A", price: "1", TM: "x".repeat(MAX_ATTRIBUTES_BYTES) }, none);
  t.match(big, { reject: { reason: /^attributes are larger than 16384 bytes of JSON \(16396\)$/ } });
  const failing = mapping({ sku: "art", price: "price" }, { total: { jmespath: "sum(stores)" } });
  t.match(normalizeRecord({ art: "A", price: "1", stores: "x" }, failing), {
    reject: { reason: /^attributes\.total \(sum\(stores\)\) could not be evaluated/ },
  });
});

t.test("configuration errors name the key path", async (t) => {
  t.equal(
    schemaError({ sku: "a", price: { jmespath: "sum(" } }),
    'fields.price.jmespath: is not a valid JMESPath expression: Syntax error: invalid token (EOF): ""',
  );
  t.equal(
    schemaError({ sku: "a", price: { path: 1 } }),
    "fields.price.path: Invalid input: expected string, received number",
  );
  t.equal(
    schemaError({ sku: "a", price: { foo: 1 } }),
    "fields.price: must be a dot path, or an object with one of path, jmespath or const",
  );
  t.equal(
    schemaError({ sku: "a", price: "b", name: { path: "n", decimalSeparator: "," } }),
    'fields.name: Unrecognized key: "decimalSeparator"',
  );
  t.equal(
    schemaError({ sku: "a", price: { path: "p", decimalSeparator: ";" } }),
    'fields.price.decimalSeparator: Invalid option: expected one of ","|"."',
  );
  t.equal(
    schemaError({ sku: "a", price: "b" }, { "1x": "a" }),
    "attributes.1x: must match ^[A-Za-z_][A-Za-z0-9_]{0,62}$",
  );
  t.equal(
    schemaError({ sku: "a", price: "b" }, { ok: { jmespath: "[" } }),
    'attributes.ok.jmespath: is not a valid JMESPath expression: Syntax error: invalid token (EOF): ""',
  );
  const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`a${i}`, "x"]));
  t.equal(schemaError({ sku: "a", price: "b" }, many), "attributes: at most 64 attributes");
  t.equal(
    schemaError({ sku: "a", price: { const: "1", nullIf: [] } }),
    "fields.price.nullIf: Too small: expected array to have >=1 items",
  );
});
