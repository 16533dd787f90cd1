import { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import zlib from "node:zlib";
import t from "tap";
import {
  contentCodings,
  contentDecoders,
  exceedsDecompressionRatio,
  MAX_DECOMPRESSION_RATIO,
  RATIO_FLOOR_BYTES,
} from "./content-encoding.js";
import { isIngestionError } from "./errors.js";

/** `body` piped through the decoders of `header`, fed in chunks of `chunk` bytes. */
async function decode(body: Buffer, header: string | undefined, chunk = 7): Promise<Buffer> {
  const pieces: Buffer[] = [];
  for (let i = 0; i < body.length; i += chunk) pieces.push(body.subarray(i, i + chunk));
  const out: Buffer[] = [];
  const sink = new Writable({
    write(piece: Buffer, _encoding, done) {
      out.push(piece);
      done();
    },
  });
  await pipeline([Readable.from(pieces), ...contentDecoders(header, "response"), sink]);
  return Buffer.concat(out);
}

const text = Buffer.from("Кабель ВВГнг 3x2.5;1250.00;RUB\n".repeat(200));

t.test("codings: a list undone last first, lower-cased, identity and blanks dropped", async (t) => {
  t.same(contentCodings(undefined), []);
  t.same(contentCodings(""), []);
  t.same(contentCodings(" Identity "), []);
  t.same(contentCodings("GZIP"), ["gzip"]);
  t.same(contentCodings("deflate, identity,, br"), ["br", "deflate"]);
});

t.test("each coding, and a list of two, decodes to the bytes sent", async (t) => {
  const encoded: [string, Buffer][] = [
    ["gzip", zlib.gzipSync(text)],
    ["x-gzip", zlib.gzipSync(text)],
    ["deflate", zlib.deflateSync(text)],
    // Raw deflate, without the zlib wrapper: some servers send it as `deflate`.
    ["deflate", zlib.deflateRawSync(text)],
    ["br", zlib.brotliCompressSync(text)],
    ["identity", text],
    // Applied left to right: deflate first, then gzip.
    ["deflate, gzip", zlib.gzipSync(zlib.deflateSync(text))],
  ];
  for (const [header, body] of encoded) {
    t.same(await decode(body, header), text, header);
    t.same(await decode(body, header, 1), text, `${header}, one byte at a time`);
  }
  t.same(contentDecoders(undefined, "response"), [], "no header: no decoder");
});

t.test("an unknown coding is CONTRACT, naming it and what sent it", async (t) => {
  t.throws(() => contentDecoders("gzip, compress", "feed"), {
    code: "CONTRACT",
    message: 'feed has an unsupported Content-Encoding "compress"',
  });
  try {
    contentDecoders("zstd", "response");
    t.fail("zstd accepted");
  } catch (err) {
    t.ok(isIngestionError(err) && err.message === 'response has an unsupported Content-Encoding "zstd"');
  }
});

t.test("cut or corrupt data is zlib's error, not a short body", async (t) => {
  const gzip = zlib.gzipSync(text);
  await t.rejects(decode(gzip.subarray(0, gzip.length - 10), "gzip"), { code: /^Z_|^ERR_/ });
  const brotli = zlib.brotliCompressSync(text);
  await t.rejects(decode(brotli.subarray(0, brotli.length >> 1), "br"), { code: /^ERR_|^Z_/ });
  await t.rejects(decode(Buffer.from("not deflate at all, just text"), "deflate"), { code: /^Z_/ });
});

t.test("brotli's large-window streams (RFC 7932 extension, not HTTP's) are refused", async (t) => {
  const large = zlib.brotliCompressSync(text, {
    params: { [zlib.constants.BROTLI_PARAM_LARGE_WINDOW]: 1, [zlib.constants.BROTLI_PARAM_LGWIN]: 25 },
  });
  await t.rejects(decode(large, "br"));
});

t.test("the ratio rule: past the floor, more than 100 times the compressed bytes", async (t) => {
  t.equal(MAX_DECOMPRESSION_RATIO, 100);
  t.equal(RATIO_FLOOR_BYTES, 64 * 1024);
  t.notOk(exceedsDecompressionRatio(RATIO_FLOOR_BYTES, 1), "at the floor: not judged");
  t.ok(exceedsDecompressionRatio(RATIO_FLOOR_BYTES + 1, 1), "past the floor from one byte");
  t.ok(exceedsDecompressionRatio(RATIO_FLOOR_BYTES + 1, 0), "no compressed byte counts as one");
  t.notOk(exceedsDecompressionRatio(100_000 * 100, 100_000), "exactly 100:1 is allowed");
  t.ok(exceedsDecompressionRatio(100_000 * 100 + 1, 100_000), "one byte more is refused");
});
