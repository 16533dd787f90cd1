import { Duplex, PassThrough, type Transform, Writable } from "node:stream";
import { constants, createBrotliDecompress, createGunzip, createInflate, createInflateRaw } from "node:zlib";
import { IngestionError } from "./errors.js";

/**
 * The one `Content-Encoding` decoder and the one decompression-bomb rule, for API
 * responses (connectors/transport/http-client.ts) and feed files (feeds/bytes.ts) alike.
 */

/** A body that decompresses to more than this many times its compressed size is a decompression bomb. */
export const MAX_DECOMPRESSION_RATIO = 100;

/** Below this many decompressed bytes the ratio is not judged: tiny bodies compress absurdly well. */
export const RATIO_FLOOR_BYTES = 64 * 1024;

/**
 * Whether `decompressed` bytes out of `compressed` ones cross the line: past
 * {@link RATIO_FLOOR_BYTES}, more than {@link MAX_DECOMPRESSION_RATIO} times the compressed
 * bytes (at least one). Judged on every chunk, so a bomb is refused on the chunk that crosses it.
 */
export function exceedsDecompressionRatio(decompressed: number, compressed: number): boolean {
  return decompressed > RATIO_FLOOR_BYTES && decompressed > MAX_DECOMPRESSION_RATIO * Math.max(1, compressed);
}

/**
 * The codings of a `Content-Encoding` header in the order they are undone: a list
 * (`gzip, br`) was applied left to right, so it is undone last first. Lower-cased;
 * `identity` and empty items dropped; an absent header is no coding.
 */
export function contentCodings(header: string | undefined): string[] {
  if (header === undefined) return [];
  return header
    .split(",")
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== "" && coding !== "identity")
    .reverse();
}

/**
 * One decoder per coding of `header`, in the order to pipe the body through them (none:
 * the body is not encoded). `subject` names what was sent in the error for a coding
 * this does not undo (`CONTRACT`). Each decoder reports cut or corrupt data as zlib's
 * own error (strict flushing: a truncated body is an error, not a short one).
 */
export function contentDecoders(header: string | undefined, subject: string): Transform[] {
  return contentCodings(header).map((coding) => {
    const decoder = decoderFor(coding);
    if (decoder === undefined) {
      throw new IngestionError(
        "CONTRACT",
        `${subject} has an unsupported Content-Encoding ${JSON.stringify(coding.slice(0, 50))}`,
      );
    }
    return decoder;
  });
}

function decoderFor(coding: string): Transform | undefined {
  switch (coding) {
    case "gzip":
    case "x-gzip":
      return createGunzip();
    case "deflate":
      return createDeflateDecoder();
    case "br":
      // No large-window streams (RFC 7932's, not HTTP's): a window of up to 16 MiB each.
      return createBrotliDecompress({ params: { [constants.BROTLI_DECODER_PARAM_LARGE_WINDOW]: 0 } });
    default:
      return undefined;
  }
}

/**
 * `deflate` is meant to be zlib-wrapped (RFC 9110 §8.4.1.2), but some servers send raw
 * deflate: the first two bytes tell them apart (a zlib header is method 8 and a multiple of 31).
 */
function createDeflateDecoder(): Transform {
  let inner: Transform | undefined;
  /** The body's first byte while it is the only one: the header is two bytes. */
  let first: Buffer | undefined;
  const out = new PassThrough();
  const start = (head: Buffer) => {
    const b0 = head[0] ?? 0;
    const b1 = head[1] ?? 0;
    const zlibHeader = head.length >= 2 && (b0 & 0x0f) === 8 && ((b0 << 8) | b1) % 31 === 0;
    const decoder = zlibHeader ? createInflate() : createInflateRaw();
    decoder.on("error", (err) => out.destroy(err));
    decoder.pipe(out);
    return decoder;
  };
  const sniff = new Writable({
    write(chunk: Buffer, _encoding, done) {
      let data = chunk;
      if (!inner) {
        data = first ? Buffer.concat([first, chunk]) : chunk;
        if (data.length < 2) {
          first = data;
          done();
          return;
        }
        first = undefined;
        inner = start(data);
      }
      if (inner.write(data)) done();
      else inner.once("drain", () => done());
    },
    final(done) {
      // A body of one byte: judged on it alone (raw deflate; zlib reports what is wrong).
      if (inner) inner.end();
      else if (first) start(first).end(first);
      else out.end();
      done();
    },
  });
  return Duplex.from({ writable: sniff, readable: out }) as unknown as Transform;
}
