// The connector keys of issue 17 (partitions, skus, enrich): valid examples with their
// defaults, and every malformed one refused with its key path.
import t from "tap";
import { connectorDefinitionSchema, definedPlaceholders } from "./connector-schema.js";
import { formatSchemaIssues } from "./json-text.js";

const base = { baseUrl: "https://ipro.etm.ru", fields: { sku: "gdscode", price: "price" } };

function issues(extra: Record<string, unknown>): string {
  const parsed = connectorDefinitionSchema.safeParse({ ...base, ...extra });
  return parsed.success ? "<valid>" : formatSchemaIssues(parsed.error.issues);
}

const remains = {
  request: { path: "/api/v1/goods/{sku}/remains", query: { type: "etm" } },
  records: { path: "data" },
  fields: {
    stock: {
      jmespath: "InfoStores[?StoreType=='all'] | [0].StoreQuantRem",
      else: { jmespath: "InfoStores[?StoreType!='all'].StoreQuantRem", sum: true },
    },
  },
};

t.test(
  "the examples of docs/connectors.md (Partitions, SKU lists, Enrichment) are valid, with defaults",
  async (t) => {
    const etm = connectorDefinitionSchema.parse({
      ...base,
      skus: { from: "file", file: "etm-skus.txt", batch: 50 },
      request: { path: "/api/v1/goods/{skus}/price", query: { type: "etm" } },
      enrich: [remains],
    });
    t.same(etm.skus, { from: "file", file: "etm-skus.txt", batch: 50, separator: ",", allowEmpty: false });
    t.equal(etm.enrich?.[0]?.batch, 1, "enrich batch defaults to 1");
    t.same([...definedPlaceholders(etm)], ["skus", "sku_list"], "batch 50 defines {skus} and {sku_list}");
    const sql = connectorDefinitionSchema.parse({
      ...base,
      skus: {
        from: "sql",
        query: "select sku from supplier_offers where supplier = $1 and delisted_at is null",
      },
      request: { path: "/goods/{sku}" },
    });
    t.same(
      [...definedPlaceholders(sql)],
      ["skus", "sku_list", "sku"],
      "batch 1 defines {skus}, {sku_list} and {sku}",
    );
    const iek = connectorDefinitionSchema.parse({
      ...base,
      partitions: { request: { path: "/api/ddp" }, records: { path: "" }, value: "groupId" },
      request: { path: "/api/products", query: { groupId: "{partition}" } },
      enrich: [
        {
          request: { path: "/residues", query: { sku: "{skus}" } },
          batch: 100,
          records: { path: "shopItems" },
          key: "sku",
          fields: { stock: { jmespath: "sum(values(residues))" } },
        },
      ],
    });
    t.same(iek.partitions && "request" in iek.partitions ? iek.partitions.pagination : null, {
      type: "none",
    });
    const values = connectorDefinitionSchema.parse({
      ...base,
      partitions: { values: ["cables", "breakers"] },
      request: { method: "POST", path: "/x", body: { group: "{partition}" } },
    });
    t.same([...definedPlaceholders(values)], ["partition"]);
    const priceByEnrich = connectorDefinitionSchema.parse({
      ...base,
      fields: { sku: "code" },
      enrich: [{ ...remains, fields: { price: "price" } }],
    });
    t.equal(priceByEnrich.fields?.price, undefined, "price may come from an enrich entry");
  },
);

const rejections: [string, Record<string, unknown>, RegExp][] = [
  [
    "partitions with skus",
    { partitions: { values: ["a"] }, skus: { from: "file", file: "s.txt" } },
    /skus: cannot be combined with partitions/,
  ],
  ["empty static partitions", { partitions: { values: [] } }, /partitions/],
  [
    "partition request with a placeholder",
    { partitions: { request: { path: "/g/{partition}" }, records: { path: "" }, value: "id" } },
    /partitions\.request\.path: placeholder \{partition\} is not defined by this walk/,
  ],
  [
    "partition value bad JMESPath",
    { partitions: { request: { path: "/g" }, records: { path: "" }, value: { jmespath: "[[" } } },
    /partitions/,
  ],
  ["skus unknown source", { skus: { from: "ftp", file: "x" } }, /skus\.from/],
  ["skus file missing", { skus: { from: "file" } }, /skus\.file/],
  ["skus batch zero", { skus: { from: "file", file: "s", batch: 0 } }, /skus\.batch/],
  ["skus empty separator", { skus: { from: "file", file: "s", separator: "" } }, /skus\.separator/],
  ["skus unknown key", { skus: { from: "sql", query: "select 1", batchSize: 5 } }, /skus: Unrecognized key/],
  [
    "skus with pagination",
    { skus: { from: "file", file: "s" }, pagination: { type: "page" } },
    /pagination: a SKU batch is one request/,
  ],
  [
    "{sku} with a batch of several",
    { skus: { from: "file", file: "s", batch: 50 }, request: { path: "/goods/{sku}" } },
    /request\.path: placeholder \{sku\} needs batch 1; a batch of several SKUs is \{skus\}/,
  ],
  [
    "{partition} in a SKU walk",
    { skus: { from: "file", file: "s" }, request: { query: { g: "{partition}" } } },
    /request\.query\.g: placeholder \{partition\} is not defined by this walk \(it needs partitions\)/,
  ],
  [
    "enrich without key at batch 100",
    { enrich: [{ ...remains, request: { path: "/r", query: { s: "{skus}" } }, batch: 100 }] },
    /enrich\.0\.key: is required when batch is more than 1/,
  ],
  [
    "enrich {sku} at batch 2",
    { enrich: [{ ...remains, batch: 2, key: "sku" }] },
    /enrich\.0\.request\.path: placeholder \{sku\} needs batch 1/,
  ],
  [
    "enrich {partition} without partitions",
    { enrich: [{ ...remains, request: { path: "/r/{partition}" } }] },
    /enrich\.0\.request\.path: placeholder \{partition\} is not defined/,
  ],
  [
    "enrich without fields",
    { enrich: [{ request: { path: "/r/{sku}" } }] },
    /enrich\.0\.fields: an enrichment needs/,
  ],
  [
    "enrich mapping sku",
    { enrich: [{ ...remains, fields: { sku: "code" } }] },
    /enrich\.0\.fields: Unrecognized key/,
  ],
  [
    "enrich bad JMESPath",
    { enrich: [{ ...remains, fields: { stock: { jmespath: "sum(" } } }] },
    /enrich\.0\.fields\.stock/,
  ],
  ["enrich onMissing other", { enrich: [{ ...remains, onMissing: "skip" }] }, /enrich\.0\.onMissing/],
  ["enrich empty list", { enrich: [] }, /enrich/],
  [
    "price neither in fields nor in enrich",
    { fields: { sku: "code" }, enrich: [remains] },
    /fields\.price: is required, here or in the fields of an enrich entry/,
  ],
];

for (const [name, extra, pattern] of rejections) {
  t.test(`rejected: ${name}`, async (t) => {
    t.match(issues(extra), pattern);
  });
}
