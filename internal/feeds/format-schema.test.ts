import t from "tap";
import {
  feedMaxBytes,
  formatSchema,
  isStreamedFormat,
  STREAMED_MAX_RESPONSE_BYTES,
} from "./format-schema.js";

function issues(value: unknown): string[] {
  const r = formatSchema.safeParse(value);
  return r.success ? [] : r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
}

t.test("defaults of every type", async (t) => {
  t.same(formatSchema.parse({}), { type: "json", stream: false, encoding: "auto", pageSize: 5000 });
  t.same(formatSchema.parse({ type: "jsonl" }), { type: "jsonl", encoding: "auto", pageSize: 5000 });
  t.same(formatSchema.parse({ type: "csv", delimiter: ";", encoding: "windows-1251" }), {
    type: "csv",
    delimiter: ";",
    quote: '"',
    header: true,
    skipLines: 0,
    encoding: "windows-1251",
    pageSize: 5000,
  });
  t.same(formatSchema.parse({ type: "xml", element: "Предложение", zipEntry: "*.xml" }), {
    type: "xml",
    element: "Предложение",
    zipEntry: "*.xml",
    encoding: "auto",
    pageSize: 5000,
  });
});

t.test("workbook formats: defaults and messages", async (t) => {
  t.same(formatSchema.parse({ type: "xlsx" }), {
    type: "xlsx",
    sheet: 1,
    headerRow: "auto",
    header: true,
    pageSize: 5000,
  });
  t.same(issues({ type: "xls", sheet: 0 }), ["sheet: must be at least 1"]);
  t.same(issues({ type: "xlsx", headerRow: "first" }), [
    'headerRow: must be "auto" or a row number (1-based)',
  ]);
  t.same(issues({ type: "xlsx", encoding: "utf-8" }), [': Unrecognized key: "encoding"']);
  t.equal(feedMaxBytes(formatSchema.parse({ type: "xls" }), undefined, 1), 100 * 1024 ** 2);
  t.equal(feedMaxBytes(formatSchema.parse({ type: "xlsx" }), undefined, 1), STREAMED_MAX_RESPONSE_BYTES);
  t.ok(isStreamedFormat(formatSchema.parse({ type: "xlsx" })));
});

t.test("messages name the key", async (t) => {
  t.same(issues({ type: "yml" }), ["type: must be one of json, jsonl, csv, xml, xlsx, xls"]);
  t.same(issues({ type: "xml" }), ["element: is required: the name of the record element, e.g. offer"]);
  t.same(issues({ type: "xml", element: "a b" }), ["element: must be an XML element name"]);
  t.same(issues({ encoding: "cp866" }), [
    "encoding: must be one of auto, utf-8, windows-1251, koi8-r, iso-8859-1, utf-16le",
  ]);
  t.same(issues({ type: "csv", delimiter: ";;" }), ["delimiter: must be exactly one character"]);
  t.same(issues({ type: "csv", delimiter: "\n" }), ["delimiter: must not be a line break"]);
  t.same(issues({ type: "csv", delimiter: '"' }), ["quote: must differ from delimiter"]);
  t.same(issues({ type: "jsonl", pageSize: 0 }), ["pageSize: must be at least 1"]);
  t.same(issues({ type: "jsonl", pageSize: 1.5 }), ["pageSize: must be an integer"]);
  t.same(issues({ type: "csv", skipLines: -1 }).length, 1);
  t.same(issues({ type: "json", stream: "yes" }), ["stream: must be true or false"]);
});

t.test("keys of another type are refused (strict objects)", async (t) => {
  t.match(issues({ type: "csv", element: "offer" }), [/element|Unrecognized key/]);
  t.match(issues({ type: "xml", element: "offer", delimiter: ";" }), [/delimiter|Unrecognized key/]);
  t.match(issues({ type: "jsonl", stream: true }), [/stream|Unrecognized key/]);
});

t.test("streamed formats and their default maxResponseBytes", async (t) => {
  t.equal(isStreamedFormat(formatSchema.parse({})), false);
  t.equal(isStreamedFormat(formatSchema.parse({ stream: true })), true);
  t.equal(isStreamedFormat(formatSchema.parse({ type: "csv" })), true);
  t.equal(
    feedMaxBytes(formatSchema.parse({ type: "xml", element: "offer" }), undefined, 52_428_800),
    STREAMED_MAX_RESPONSE_BYTES,
  );
  t.equal(feedMaxBytes(formatSchema.parse({}), undefined, 52_428_800), 52_428_800);
  t.equal(feedMaxBytes(formatSchema.parse({ type: "jsonl" }), 1000, 52_428_800), 1000);
});
