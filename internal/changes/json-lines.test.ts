import { PassThrough, Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import t from "tap";
import { CopyTextToJsonLines, decodeCopyText } from "./json-lines.js";

t.test("COPY text escapes decoded (PostgreSQL docs, COPY, Text Format)", async (t) => {
  t.equal(decodeCopyText("plain é 😀"), "plain é 😀", "no backslash: the field itself");
  t.equal(decodeCopyText("a\\\\b"), "a\\b");
  t.equal(decodeCopyText("\\b\\f\\n\\r\\t\\v"), "\b\f\n\r\t\v");
  t.equal(decodeCopyText("\\N"), "N", "\\N inside a value (null is the caller's check) is N");
  t.equal(decodeCopyText("\\\\N"), "\\N", "an escaped backslash before N is the text \\N");
  t.equal(decodeCopyText("x\\q\\\t"), "xq\t", "a backslash before any other character is that character");
  t.equal(decodeCopyText("\\101\\60\\7"), "A0\u0007", "one to three octal digits");
  t.equal(decodeCopyText("\\1011"), "A1", "at most three octal digits");
  t.equal(decodeCopyText("\\x41\\x4g\\xz"), "A\u0004gxz", "one or two hex digits; \\x alone is x");
  t.equal(decodeCopyText("\\303\\251t\\xc3\\xa9"), "été", "consecutive byte escapes decode as UTF-8");
  t.equal(decodeCopyText("a\\tb\\\\c\\nd"), "a\tb\\c\nd");
});

/** A COPY text line of the twelve JSON columns. */
function copyLine(fields: string[]): string {
  return `${fields.join("\t")}\n`;
}

const PLAIN = [
  "7741",
  "120455",
  "etm",
  "A-100",
  "changed",
  "812",
  "2026-12-05 07:31:02.118",
  "12.50",
  "EUR",
  "4",
  '{"a": 1}',
  "h1",
];
const NULLS = [
  "7741",
  "120456",
  "etm",
  'q"b\\\\s\\t\\n\\r é😀',
  "\\N",
  "813",
  "infinity",
  "\\N",
  "\\N",
  "\\N",
  "\\N",
  "h\\\\2",
];

async function convert(chunks: Buffer[]): Promise<{ text: string; t: CopyTextToJsonLines }> {
  const transform = new CopyTextToJsonLines();
  const out = new PassThrough();
  const got: Buffer[] = [];
  out.on("data", (c: Buffer) => got.push(c));
  await pipeline(Readable.from(chunks), transform, out);
  return { text: Buffer.concat(got).toString("utf8"), t: transform };
}

t.test("one JSON object per line, nulls and escapes, the last position", async (t) => {
  const { text, t: transform } = await convert([Buffer.from(copyLine(PLAIN) + copyLine(NULLS))]);
  t.equal(
    text,
    '{"cursor":"7741:120455","supplier":"etm","sku":"A-100","kind":"changed","run_id":812,"observed_at":"2026-12-05T07:31:02.118Z","price":"12.50","currency":"EUR","stock":4,"attributes":{"a": 1},"content_hash":"h1"}\n' +
      '{"cursor":"7741:120456","supplier":"etm","sku":"q\\"b\\\\s\\t\\n\\r é😀","kind":null,"run_id":813,"observed_at":"infinityZ","price":null,"currency":null,"stock":null,"attributes":null,"content_hash":"h\\\\2"}\n',
  );
  const objects = text
    .trimEnd()
    .split("\n")
    .map((l) => JSON.parse(l));
  t.equal(objects[1].sku, 'q"b\\s\t\n\r é😀');
  t.equal(transform.lines, 2);
  t.equal(transform.lastPosition, "7741:120456");
});

t.test("chunks split anywhere, inside a line and inside a UTF-8 sequence: the same output", async (t) => {
  const input = Buffer.from(copyLine(PLAIN) + copyLine(NULLS) + copyLine(PLAIN));
  const whole = (await convert([input])).text;
  for (const size of [1, 2, 3, 5, 7, 64]) {
    const chunks: Buffer[] = [];
    for (let i = 0; i < input.length; i += size) chunks.push(input.subarray(i, i + size));
    const split = await convert(chunks);
    t.equal(split.text, whole, `chunks of ${size} bytes`);
    t.equal(split.t.lines, 3);
    t.equal(split.t.lastPosition, "7741:120455");
  }
});

t.test("no lines: nothing out, no position", async (t) => {
  const { text, t: transform } = await convert([]);
  t.equal(text, "");
  t.equal(transform.lines, 0);
  t.equal(transform.lastPosition, null);
});

t.test("a line cut short or of the wrong shape fails the stream", async (t) => {
  await t.rejects(convert([Buffer.from(copyLine(PLAIN).slice(0, 20))]), /ended inside a line/);
  await t.rejects(convert([Buffer.from(copyLine(PLAIN.slice(1)))]), /has 11 fields, not 12/);
});
