// check-config and the feed keys (docs/feeds.md, including Export jobs): a streamed format or an export
// job combined with pagination, partitions or skus, and malformed format/export keys,
// are refused with exit 2 naming the key path; the shipped feed.json and
// etm-catalog.json are valid.
import { readFileSync } from "node:fs";
import t from "tap";
import { connectorDefinitionSchema } from "../../internal/connectors/schema/connector-schema.js";
import { type BrokenKeyCases, checkBrokenKeys } from "../helpers/check-config.js";

const base = { baseUrl: "https://feeds.example", fields: { sku: "@id", price: "price" } };
const yml = { type: "xml", element: "offer" };
const job = {
  create: { method: "POST", path: "/api/v1/job/create/1", jobIdPath: "data.id" },
  poll: { path: "/api/v1/job/{job}", readyWhen: { path: "data.state", equals: 1 } },
  download: { urlPath: "data.urls.0.url" },
};

/** supplier name → its broken definition and what check-config must say about it. */
const cases: BrokenKeyCases = {
  xmlpaged: [
    { format: yml, pagination: { type: "page", param: "page", start: 1 } },
    /pagination: a streamed format \(format\.type xml\) is one file: it cannot be combined with pagination/,
  ],
  csvparts: [
    { format: { type: "csv" }, partitions: { values: ["a"] }, request: { path: "/{partition}.csv" } },
    /partitions: a streamed format \(format\.type csv\) is one file/,
  ],
  jsonskus: [
    {
      format: { type: "json", stream: true },
      skus: { from: "file", file: "s.txt" },
      request: { path: "/goods/{sku}" },
    },
    /skus: a streamed format \(format\.type json with stream\) is one file/,
  ],
  exportpaged: [
    { export: job, pagination: { type: "offset", offsetParam: "o", limitParam: "l", limit: 5 } },
    /pagination: an export job downloads one file/,
  ],
  formattype: [{ format: { type: "ods" } }, /format\.type: must be one of json, jsonl, csv, xml, xlsx, xls/],
  csvkey: [
    { format: { type: "xml", element: "offer", delimiter: ";" } },
    /format: Unrecognized key.*delimiter/,
  ],
  pagesize: [{ format: { type: "jsonl", pageSize: 0 } }, /format\.pageSize: must be at least 1/],
  encoding: [{ format: { type: "csv", encoding: "cp866" } }, /format\.encoding: must be one of auto, utf-8/],
  jobid: [
    { export: { ...job, create: { method: "POST", path: "/api/v1/job/create/1" } } },
    /export\.create\.jobIdPath/,
  ],
  jobplaceholder: [
    { export: { ...job, create: { ...job.create, path: "/api/v1/job/create/{job}" } } },
    /export\.create\.path: placeholder \{job\} is not defined by this walk/,
  ],
  ready: [
    { export: { ...job, poll: { path: "/api/v1/job/{job}", readyWhen: { path: "data.state" } } } },
    /export\.poll\.readyWhen\.path: needs exactly one of equals, in, notIn or exists/,
  ],
  maxbytes: [{ format: yml, maxResponseBytes: -1 }, /maxResponseBytes/],
};

t.test("check-config: exit 2, each broken feed key named with its path", async (t) => {
  await checkBrokenKeys(t, base, cases);
});

t.test("maxResponseBytes: optional; the shipped feed.json and etm-catalog.json are valid", async (t) => {
  const fields = { sku: "a", price: "b" };
  const plain = connectorDefinitionSchema.parse({ ...base, fields });
  t.equal(plain.maxResponseBytes, 52_428_800, "a JSON body read whole: 50 MiB");
  const whole = connectorDefinitionSchema.parse({ ...base, fields, format: { type: "json" } });
  t.equal(whole.maxResponseBytes, 52_428_800);
  for (const format of [yml, { type: "csv" }, { type: "jsonl" }, { type: "json", stream: true }]) {
    const streamed = connectorDefinitionSchema.parse({ ...base, fields, format });
    t.equal(streamed.maxResponseBytes, 4 * 1024 ** 3, `${JSON.stringify(format)}: 4 GiB decompressed`);
  }
  const set = connectorDefinitionSchema.parse({ ...base, fields, format: yml, maxResponseBytes: 1_000_000 });
  t.equal(set.maxResponseBytes, 1_000_000, "a value set is kept");
  for (const file of ["feed.json", "etm-catalog.json"]) {
    const raw = JSON.parse(readFileSync(new URL(`../../config/suppliers/${file}`, import.meta.url), "utf8"));
    const parsed = connectorDefinitionSchema.safeParse(raw);
    t.ok(parsed.success, `${file}: ${parsed.success ? "" : JSON.stringify(parsed.error.issues)}`);
  }
  const etm = connectorDefinitionSchema.parse(
    JSON.parse(readFileSync(new URL("../../config/suppliers/etm-catalog.json", import.meta.url), "utf8")),
  );
  t.equal(etm.export?.poll.intervalMs, 15_000);
  t.equal(
    etm.timeouts.runMs,
    14_400_000,
    "ETM's export may take up to 3 hours, then its codes are priced at 1/s",
  );
});
