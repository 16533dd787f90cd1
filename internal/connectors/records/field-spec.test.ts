// Field specs and attributes (docs/connectors.md, Records and fields): how a record's values are found, nulled,
// read with a decimal comma, and what becomes a reject.
import t from "tap";
import { LosslessNumber } from "../../platform/exact-json.js";
import { connectorDefinitionSchema } from "../schema/connector-schema.js";
import { formatSchemaIssues } from "../schema/json-text.js";
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
    { StoreCode: "1", StoreType: "rc", StoreQuantRem: 12 },
    { StoreCode: "2", StoreType: "op", StoreQuantRem: 3 },
  ],
};

t.test("the spec forms: dot path, path, jmespath, const", async (t) => {
  const m = mapping({
    sku: { path: "gdscode" },
    price: { const: "0" },
    currency: { const: "RUB" },
    stock: { jmespath: "sum(InfoStores[].StoreQuantRem)" },
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
    stock: { jmespath: "sum(InfoStores[?StoreType=='rc'].StoreQuantRem)" },
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

t.test("sum: a list or an object's values added exactly; nothing found is no value, never 0", async (t) => {
  const m = mapping({
    sku: "art",
    price: { path: "prices", sum: true },
    stock: { jmespath: "stores[].qty", sum: true },
  });
  const read = (record: Record<string, unknown>) => {
    const r = normalizeRecord({ art: "A", prices: ["1"], ...record }, m);
    return "offer" in r ? r.offer : r.reject.reason;
  };
  t.match(read({ stores: [{ qty: "12" }, { qty: 3 }, { qty: " 5 " }] }), { stock: 20 }, "strings as numbers");
  t.match(read({ stores: [{ qty: "4.000" }, { qty: "8" }] }), { stock: 12 }, "an integral sum is a stock");
  t.match(read({ stores: [{ qty: null }, { qty: "" }, { qty: 2 }] }), { stock: 2 }, "null and empty skipped");
  t.match(read({ stores: [] }), { stock: null }, "an empty list is no value");
  t.match(read({ stores: [{ other: 1 }] }), { stock: null }, "no item has the field: no value");
  t.match(read({}), { stock: null }, "no list at all: no value");
  t.match(
    read({ stores: [{ qty: "12" }, { qty: "много" }] }),
    /^stock \(sum of stores\[\]\.qty\) sums a value that is not a number: "много"$/,
  );
  t.match(
    read({ stores: [{ qty: "0.5" }, { qty: "1" }] }),
    /^stock \(sum of stores\[\]\.qty\) is not an integer: 1\.5$/,
  );
  t.match(
    read({ prices: ["0.1", "0.2", "12345678901234567890.05"] }),
    {
      price: "12345678901234567890.35",
    },
    "exact, never through a float",
  );
  t.match(
    read({ prices: [new LosslessNumber("1.10"), 2] }),
    { price: "3.10" },
    "a LosslessNumber keeps its digits",
  );
  t.match(read({ prices: "12" }), /^price \(sum of prices\) is not a list or an object to sum: "12"$/);
  const residues = mapping({ sku: "art", price: "p", stock: { path: "residues", sum: true } });
  t.match(normalizeRecord({ art: "A", p: "1", residues: { "1": 4, "7": "6" } }, residues), {
    offer: { stock: 10 },
  });
  t.match(normalizeRecord({ art: "A", p: "1", residues: {} }, residues), { offer: { stock: null } });
  const comma = mapping({ sku: "art", price: { path: "p", sum: true, decimalSeparator: "," } });
  t.match(normalizeRecord({ art: "A", p: ["1 234,5", "0,25"] }, comma), { offer: { price: "1234.75" } });
  t.match(normalizeRecord({ art: "A", p: ["1.234,5"] }, comma), {
    reject: { reason: /sums a value that is not a number: "1\.234,5"/ },
  });
});

t.test("else: read when the first finds nothing; ETM's all row, else the sum of the others", async (t) => {
  const m = mapping({
    sku: "gdscode",
    price: { const: "1" },
    stock: {
      jmespath: "InfoStores[?StoreType=='all'] | [0].StoreQuantRem",
      else: { jmespath: "InfoStores[?StoreType!='all'].StoreQuantRem", sum: true },
    },
    name: { path: "name", else: "title" },
  });
  const stock = (InfoStores: unknown) => {
    const r = normalizeRecord({ gdscode: "1", InfoStores }, m);
    return "offer" in r ? r.offer.stock : r.reject.reason;
  };
  const rows = [
    { StoreType: "rc", StoreQuantRem: "5" },
    { StoreType: "op", StoreQuantRem: 7 },
  ];
  t.equal(
    stock([...rows, { StoreType: "all", StoreQuantRem: "20" }]),
    20,
    "the all row wins, wherever it is",
  );
  t.equal(stock(rows), 12, "no all row: the others summed, strings as numbers");
  t.equal(stock([{ StoreType: "all", StoreQuantRem: "0" }, ...rows]), 0, "an all row of 0 is 0, not the sum");
  t.equal(stock([{ StoreType: "all" }, ...rows]), 12, "an all row without a quantity: the sum");
  t.equal(stock([{ StoreType: "rc", Remain: 5 }]), null, "no quantity anywhere: null, not 0");
  t.equal(stock(undefined), null, "no stores: null");
  t.match(
    stock([{ StoreType: "all", StoreQuantRem: "n/a" }]),
    /^stock \(.* else sum of .*\) is not an integer: "n\/a"$/,
  );
  t.match(normalizeRecord({ gdscode: "1", title: "Bolt" }, m), { offer: { name: "Bolt" } });
  t.match(normalizeRecord({ gdscode: "1", name: "Nut", title: "Bolt" }, m), { offer: { name: "Nut" } });
});

t.test("nullWhen: null when a condition on the record holds, price sent or not", async (t) => {
  const m = mapping({
    sku: "art",
    price: { path: "price", nullWhen: { path: "extra", contains: "Цена по запросу" } },
  });
  const price = (record: Record<string, unknown>) => {
    const r = normalizeRecord({ art: "A", ...record }, m);
    return "offer" in r ? r.offer.price : r.reject.reason;
  };
  t.equal(price({ price: 1520.4, extra: "Цена по запросу" }), null, "the flag wins over a price sent");
  t.equal(
    price({ price: 1520.4, extra: "  Цена по запросу; снято с производства " }),
    null,
    "with other text",
  );
  t.equal(price({ extra: "Цена по запросу" }), null, "no price sent, flagged: null, not a reject");
  t.equal(price({ price: 1520.4, extra: "" }), "1520.4", "not flagged: the price");
  t.equal(price({ price: 1520.4 }), "1520.4", "no extra at all: the price");
  t.equal(price({ price: 1520.4, extra: "цена по запросу" }), "1520.4", "contains is case-sensitive");
  t.match(price({ extra: "" }), /^price \(price\) is missing/, "neither: still a reject");
  const tests = (nullWhen: Record<string, unknown>, record: Record<string, unknown>) => {
    const r = normalizeRecord(
      { art: "A", p: "5", ...record },
      mapping({ sku: "art", price: { path: "p", nullWhen } }),
    );
    return "offer" in r ? r.offer.price : r.reject.reason;
  };
  t.equal(tests({ path: "f", equals: 1 }, { f: " 1 " }), null, "equals: a number and its string");
  t.equal(tests({ path: "f", equals: "x" }, { f: " x " }), null, "equals: strings trimmed");
  t.equal(tests({ path: "f", in: ["a", 2] }, { f: 2 }), null);
  t.equal(tests({ path: "f", notIn: ["ok"] }, { f: "bad" }), null);
  t.equal(tests({ path: "f", notIn: ["ok"] }, {}), "5", "absent never matches notIn");
  t.equal(tests({ path: "f", exists: true }, { f: null }), null, "exists: present, null included");
  t.equal(tests({ path: "f", exists: false }, {}), null);
  t.equal(tests({ path: "f.g", equals: true }, { f: { g: true } }), null, "a dot path");
  const onStock = mapping({
    sku: "art",
    price: "p",
    stock: { path: "s", nullWhen: { path: "s", equals: "-1" } },
  });
  t.match(normalizeRecord({ art: "A", p: "1", s: -1 }, onStock), { offer: { stock: null } }, "any field");
});

t.test("sum, else and nullWhen: configuration errors name the key path", async (t) => {
  t.equal(
    schemaError({ sku: "a", price: "b", name: { path: "n", sum: true } }),
    'fields.name: Unrecognized key: "sum"',
    "sum is for price, stock and attributes",
  );
  t.equal(
    schemaError({ sku: "a", price: { path: "p", sum: "yes" } }),
    "fields.price.sum: Invalid input: expected boolean, received string",
  );
  t.equal(
    schemaError({ sku: "a", price: { path: "p", else: { jmespath: "[" } } }),
    'fields.price.else.jmespath: is not a valid JMESPath expression: Syntax error: invalid token (EOF): ""',
  );
  t.equal(
    schemaError({ sku: "a", price: { path: "p", else: { path: "q", nullIf: [""] } } }),
    'fields.price.else: Unrecognized key: "nullIf"',
    "modifiers belong to the outer spec",
  );
  t.equal(
    schemaError({ sku: "a", price: { path: "p", nullWhen: { path: "extra" } } }),
    "fields.price.nullWhen: needs exactly one of equals, in, notIn, exists or contains",
  );
  t.equal(
    schemaError({ sku: "a", price: { path: "p", nullWhen: { path: "x", contains: "a", equals: "b" } } }),
    "fields.price.nullWhen: needs exactly one of equals, in, notIn, exists or contains",
  );
  t.equal(
    schemaError({ sku: "a", price: { path: "p", nullWhen: { path: "x", contains: "" } } }),
    "fields.price.nullWhen.contains: Too small: expected string to have >=1 characters",
  );
  t.equal(
    schemaError({ sku: "a", price: { path: "p", nullWhen: { path: "x", status: [500] } } }),
    'fields.price.nullWhen: Unrecognized key: "status"; fields.price.nullWhen: needs exactly one of equals, in, notIn, exists or contains',
  );
  t.equal(
    schemaError({ sku: "a", price: "b" }, { s: { path: "x", nullWhen: { equals: 1 } } }),
    "attributes.s.nullWhen.path: Invalid input: expected string, received undefined",
  );
  t.equal(schemaError({ sku: "a", price: { const: "1", nullWhen: { path: "x", exists: true } } }), "valid");
});

t.test("sum: whole numbers past 2^53 and mixed with decimals stay exact", async (t) => {
  const m = mapping({ sku: "art", price: { path: "p", sum: true }, stock: { path: "s", sum: true } });
  const read = (p: unknown, s?: unknown) => {
    const r = normalizeRecord({ art: "A", p, s }, m);
    return "offer" in r ? r.offer : r.reject.reason;
  };
  t.match(
    read(["999999999999999", "999999999999999", "999999999999999", "999999999999999", "999999999999999"]),
    {
      price: "4999999999999995",
    },
  );
  t.match(read([2 ** 52 - 1, 2 ** 52 - 1, 1]), { price: String(2 ** 53 - 1) });
  t.match(read(["0.5", 2, "3", 0.25]), { price: "5.75" }, "decimals and integers in any order");
  t.match(read(["1"], ["-3", "1"]), /^stock \(sum of s\) is negative: -2$/);
});

t.test("flat records (a CSV or workbook row): a dotted or spaced header names one column", async (t) => {
  // The record a CSV feed gives for `Артикул;Цена,  руб.\u00a0с НДС` (workbook.test.ts): header
  // texts whitespace-normalised, so the field's own spacing does not matter either.
  const record = { Артикул: "00123", "Цена, руб. с НДС": "12.5" };
  const fields = compileFields({ sku: "Артикул", price: "Цена,   руб. с НДС" }, undefined, { flat: true });
  t.equal(fields.price?.read(record), "12.5");
  t.equal(fields.sku.read(record), "00123");
  const dotted = compileFields({ sku: "a.b", price: "p" }, undefined, { flat: true });
  t.equal(dotted.sku.read({ "a.b": "X", a: { b: "nested" } }), "X", "a dotted path is one column's name");
});
