import { pipeline, Readable, type Transform } from "node:stream";
import { createGunzip } from "node:zlib";
import {
  contentDecoders,
  exceedsDecompressionRatio,
  MAX_DECOMPRESSION_RATIO,
} from "../platform/content-encoding.js";
import { errorMessage, IngestionError } from "../platform/errors.js";

/**
 * The byte layer of a feed: the response body, counted and bounded, with its
 * compression removed. Everything is pulled: a chunk is read from the body only
 * when the consumer asks for the next one, so back-pressure reaches the socket.
 *
 * Error classification (where the error is born):
 * - the body itself fails (socket closed before the announced end, reset,
 *   abort): `NETWORK`, retryable; the bytes were lost in transit, a new request
 *   may get them;
 * - the body ended cleanly but its compressed data is cut or corrupt (a gzip
 *   without its trailer, a bad deflate block): `CONTRACT`; the supplier served
 *   a broken file and asking again gets the same file;
 * - a limit (`maxResponseBytes`, the 100:1 ratio): `CONTRACT`.
 *
 * `Content-Encoding` and the ratio rule are the platform's, shared with API responses
 * (platform/content-encoding.ts).
 */

/** Counts of one feed's bytes, shared by the stages. */
export interface ByteCounters {
  /** Bytes read from the body (compressed as sent). */
  raw: number;
  /** Bytes handed to the decoder (after every decompression). */
  decompressed: number;
  /** Compressed bytes the decompressed ones came from; the ratio's denominator. */
  compressed: () => number;
}

export type ByteSource = AsyncIterable<Buffer | Uint8Array | string>;

/** The body, counted into `counters.raw`, bounded by `maxBytes`; its own failures become `NETWORK`. */
export async function* readBody(
  body: ByteSource,
  counters: ByteCounters,
  maxBytes: number,
  signal?: AbortSignal,
): AsyncGenerator<Buffer> {
  try {
    for await (const chunk of body) {
      signal?.throwIfAborted();
      const buf =
        typeof chunk === "string" ? Buffer.from(chunk) : Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
      counters.raw += buf.length;
      if (counters.raw > maxBytes) {
        throw new IngestionError("CONTRACT", `feed body is larger than maxResponseBytes (${maxBytes} bytes)`);
      }
      yield buf;
    }
  } catch (err) {
    if (err instanceof IngestionError || signal?.aborted) throw err;
    throw new IngestionError(
      "NETWORK",
      `feed body broke off after ${counters.raw} bytes: ${errorMessage(err)}`,
      { cause: err, retryable: true },
    );
  }
}

/** The first `n` bytes (fewer when the stream is shorter) and the whole stream again, head included. */
export async function peek(
  source: AsyncIterable<Buffer>,
  n: number,
): Promise<{ head: Buffer; stream: AsyncIterable<Buffer> }> {
  const iterator = source[Symbol.asyncIterator]();
  const taken: Buffer[] = [];
  let length = 0;
  let done = false;
  while (length < n) {
    const next = await iterator.next();
    if (next.done) {
      done = true;
      break;
    }
    taken.push(next.value);
    length += next.value.length;
  }
  const head = Buffer.concat(taken);
  async function* replay(): AsyncGenerator<Buffer> {
    try {
      if (head.length > 0) yield head;
      if (done) return;
      for (;;) {
        const next = await iterator.next();
        if (next.done) return;
        yield next.value;
      }
    } finally {
      if (!done) await iterator.return?.();
    }
  }
  return { head: head.subarray(0, n), stream: replay() };
}

export function isGzip(head: Buffer): boolean {
  return head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b;
}

/** A zip local file header (`PK\x03\x04`) or an empty archive's end record (`PK\x05\x06`). */
export function isZip(head: Buffer): boolean {
  return head.length >= 4 && head[0] === 0x50 && head[1] === 0x4b && (head[2] === 3 || head[2] === 5);
}

/** Runs `source` through a node Transform, pulled; errors of either side end the iteration. */
export function through<T = Buffer>(source: AsyncIterable<Buffer>, transform: Transform): AsyncIterable<T> {
  return pipeline(Readable.from(source, { objectMode: false }), transform, () => {}) as AsyncIterable<T>;
}

/**
 * Undoes `Content-Encoding` (a list is undone last first). `identity` and an
 * absent header pass the bytes through; an unknown coding is `CONTRACT`.
 */
export function undoContentEncoding(
  source: AsyncIterable<Buffer>,
  contentEncoding: string | undefined,
): AsyncIterable<Buffer> {
  let stream = source;
  for (const decoder of contentDecoders(contentEncoding, "feed")) stream = through(stream, decoder);
  return stream;
}

export function gunzip(source: AsyncIterable<Buffer>): AsyncIterable<Buffer> {
  return through(source, createGunzip());
}

/**
 * Counts the decompressed bytes into `counters.decompressed` and refuses, as
 * soon as a chunk crosses the line, more than `maxBytes` or (past
 * the ratio floor) more than 100 × the compressed bytes read so far ({@link exceedsDecompressionRatio}).
 * The compressed count runs ahead of the output (the decompressor reads ahead),
 * so the ratio seen is never above the true one.
 */
export async function* meterDecompressed(
  source: AsyncIterable<Buffer>,
  counters: ByteCounters,
  maxBytes: number,
  compressed: boolean,
): AsyncGenerator<Buffer> {
  for await (const chunk of source) {
    counters.decompressed += chunk.length;
    if (counters.decompressed > maxBytes) {
      throw new IngestionError(
        "CONTRACT",
        `feed is larger than maxResponseBytes (${maxBytes} bytes) once decompressed`,
      );
    }
    if (compressed && exceedsDecompressionRatio(counters.decompressed, counters.compressed())) {
      throw new IngestionError(
        "CONTRACT",
        `feed decompresses more than ${MAX_DECOMPRESSION_RATIO}:1 (${counters.decompressed} bytes from ${Math.max(1, counters.compressed())}): refused as a decompression bomb`,
      );
    }
    yield chunk;
  }
}

/** A zlib failure (corrupt or cut data after a clean body) as `CONTRACT`; anything else unchanged. */
export function classifyDecompressionError(err: unknown): unknown {
  if (err instanceof IngestionError) return err;
  const code = (err as { code?: unknown } | null)?.code;
  if (
    typeof code === "string" &&
    (code.startsWith("Z_") || code.startsWith("ERR_BROTLI") || code === "ERR__ERROR_FORMAT_PADDING_1")
  ) {
    const truncated = code === "Z_BUF_ERROR" || /unexpected end/i.test(errorMessage(err));
    return new IngestionError(
      "CONTRACT",
      truncated
        ? `feed's compressed data ends before its end marker (a truncated file): ${errorMessage(err)}`
        : `feed's compressed data is corrupt: ${errorMessage(err)}`,
      { cause: err },
    );
  }
  return err;
}
