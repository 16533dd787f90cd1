import { gzipSync } from "node:zlib";
import t from "tap";
import { formatSchema } from "./format-schema.js";
import { readFeed } from "./read-feed.js";
import type { FeedBatch } from "./types.js";

/** Edge cases of the record readers on in-memory bodies (the HTTP paths are in read-feed.e2e.test.ts). */

async function* chunks(text: string | Buffer, size = 1000): AsyncGenerator<Buffer> {
  const buf = typeof text === "string" ? Buffer.from(text) : text;
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}

async function read(
  body: string | Buffer,
  format: unknown,
  extra: { recordsPath?: string; maxBytes?: number } = {},
) {
  const batches: FeedBatch[] = [];
  let error: (Error & { code?: string }) | undefined;
  try {
    for await (const b of readFeed(chunks(body), {
      format: formatSchema.parse(format),
      maxBytes: 1e9,
      ...extra,
    })) {
      batches.push(b);
    }
  } catch (err) {
    error = err as Error;
  }
  return {
    records: batches.flatMap((b) => b.records),
    rejects: batches.flatMap((b) => b.rejects),
    batches,
    error,
  };
}

t.test("XML: the record rules of docs/feeds.md", async (t) => {
  const xml = `<?xml version="1.0"?><root><group><offer id="1" available="true">
      <price>1.50</price><name> Кабель &amp; &lt;провод&gt; &#x41;</name><param name="a">x</param><param name="b">y</param>
      <pictures/><description><![CDATA[<b>bold</b>]]></description><mixed at="1">text<sub>s</sub></mixed>
      <__proto__>p</__proto__></offer></group><offer>just text</offer></root>`;
  const r = await read(xml, { type: "xml", element: "offer" });
  t.equal(r.error, undefined);
  t.equal(r.records.length, 2);
  const first = r.records[0] as Record<string, unknown>;
  t.equal(
    Object.getOwnPropertyDescriptor(first, "__proto__")?.value,
    "p",
    "a <__proto__> element is an own key",
  );
  t.equal(Object.getPrototypeOf(first), Object.prototype, "and never sets the prototype");
  const { ["__proto__"]: _own, ...rest } = first;
  t.same(rest, {
    "@id": "1",
    "@available": "true",
    price: "1.50",
    name: " Кабель & <провод> A",
    param: [
      { "@name": "a", "#text": "x" },
      { "@name": "b", "#text": "y" },
    ],
    pictures: "",
    description: "<b>bold</b>",
    mixed: { "@at": "1", "#text": "text", sub: "s" },
  });
  t.same(r.records[1], { "#text": "just text" });
});

t.test("XML: namespaced record elements match by local name", async (t) => {
  const r = await read('<c:root xmlns:c="urn:x"><c:offer c:id="1"/></c:root>', {
    type: "xml",
    element: "offer",
  });
  t.same(r.records, [{ "@c:id": "1" }]);
});

t.test(
  "XML: an undefined entity in an attribute rejects the record; an oversized record is one reject",
  async (t) => {
    const big = "x".repeat(1024 * 1024 + 10);
    const xml = `<r><offer id="&bad;"><price>1</price></offer><offer id="2"><d>${big}</d><e><f>deep</f></e></offer><offer id="3"/></r>`;
    const r = await read(xml, { type: "xml", element: "offer" });
    t.equal(r.error, undefined);
    t.same(r.records, [{ "@id": "3" }]);
    t.equal(r.rejects.length, 2);
    t.match(r.rejects[0]!.reason, /undefined entity/);
    t.match(r.rejects[1], {
      reason: /at line 1 is larger than 1048576 characters/,
      raw: { element: "offer", line: 1 },
    });
  },
);

t.test("XML: mismatched tags are CONTRACT; a file ending inside an element says so", async (t) => {
  const bad = await read("<r><offer><price>1</prix></offer></r>", { type: "xml", element: "offer" });
  t.match(bad.error, { code: "CONTRACT", message: /XML feed is not well-formed: .*unexpected close tag/ });
  const cut = await read("<r><offer><price>1</price></offer><offer>", { type: "xml", element: "offer" });
  t.match(cut.error, { code: "CONTRACT", message: /truncated\?/ });
  t.equal(cut.records.length, 0, "the partial step is not yielded");
});

t.test("complete steps are yielded before a failure", async (t) => {
  const offers = Array.from({ length: 25 }, (_, i) => `<offer id="${i}"/>`).join("");
  const cut = await read(`<r>${offers}<offer>`, { type: "xml", element: "offer", pageSize: 10 });
  t.same(
    cut.batches.map((b) => b.records.length),
    [10, 10],
  );
  t.match(cut.error, { code: "CONTRACT" });
});

t.test("CSV: a row cut inside a quote at the end is a reject; quote and delimiter options", async (t) => {
  const r = await read("a|b\n'1|x'|2\n3|'unclosed\n", { type: "csv", delimiter: "|", quote: "'" });
  t.same(r.records, [{ a: "1|x", b: "2" }]);
  t.equal(r.rejects.length, 1);
  t.match(r.rejects[0]!.reason, /Quote Not Closed/);
});

t.test("JSON lines: blank lines skipped, CRLF, a line over 1 MiB is one reject", async (t) => {
  const long = `{"x":"${"y".repeat(1024 * 1024 + 1)}"}`;
  const r = await read(`{"a":1}\r\n\n${long}\n{"a":2}`, { type: "jsonl" });
  t.same(r.records, [{ a: 1 }, { a: 2 }]);
  t.equal(r.rejects.length, 1);
  t.match(r.rejects[0]!.reason, /^line 3 is longer than 1048576 characters/);
});

t.test("streamed JSON: not an array, too deep, cut", async (t) => {
  const fmt = { type: "json", stream: true };
  t.match((await read('{"data":{"items":5}}', fmt, { recordsPath: "data.items" })).error, {
    code: "CONTRACT",
    message: 'records.path "data.items" is number, not an array',
  });
  const deep = `[${"[".repeat(100)}${"]".repeat(100)}]`;
  t.match((await read(deep, fmt)).error, { code: "CONTRACT", message: /deeper than maxJsonDepth \(64\)/ });
  const cut = await read('[{"a":1},{"a":', fmt);
  t.match(cut.error, { code: "CONTRACT" });
  const root = await read('[1, "two", {"three": 3}, null]', fmt);
  t.same(root.records, [1, "two", { three: 3 }, null]);
});

t.test("gzip magic bytes, encoding from the XML declaration, maxBytes on the raw body", async (t) => {
  const body = gzipSync(
    Buffer.from('<?xml version="1.0" encoding="iso-8859-1"?><r><offer n="\xe9"/></r>', "latin1"),
  );
  const r = await read(body, { type: "xml", element: "offer" });
  t.same(r.records, [{ "@n": "é" }]);
  const limited = await read("x".repeat(5000), { type: "jsonl" }, { maxBytes: 4000 });
  t.match(limited.error, { code: "CONTRACT", message: /larger than maxResponseBytes \(4000 bytes\)/ });
});

t.test(
  "a zip that cannot be spooled is INTERNAL (the host's temp dir), not the supplier's CONTRACT",
  async (t) => {
    const { Readable } = await import("node:stream");
    const { readFeed } = await import("./read-feed.js");
    const zipHead = Buffer.from([0x50, 0x4b, 0x03, 0x04, 0, 0, 0, 0]);
    const reading = readFeed(Readable.from([zipHead]), {
      format: formatSchema.parse({ type: "csv" }),
      maxBytes: 1e9,
      spoolDir: "/nonexistent/spool",
    });
    await t.rejects(reading.next(), {
      code: "INTERNAL",
      message: /cannot spool the zip archive to \/nonexistent\/spool/,
    });
    const corrupt = await read(zipHead, { type: "csv" });
    t.match(corrupt.error, { code: "CONTRACT", message: /not a readable zip archive/ });
  },
);
