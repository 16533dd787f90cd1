import { Readable } from "node:stream";
import { contentCodings } from "../platform/content-encoding.js";
import { errorMessage, IngestionError } from "../platform/errors.js";
import {
  type ByteCounters,
  type ByteSource,
  classifyDecompressionError,
  gunzip,
  isGzip,
  isZip,
  meterDecompressed,
  peek,
  readBody,
  undoContentEncoding,
} from "./bytes.js";
import { csvRecordReader } from "./csv-records.js";
import { chooseEncoding, decodeText, SNIFF_BYTES } from "./decode.js";
import { type FeedFormat, isWorkbookFormat, type WorkbookFormat } from "./format-schema.js";
import { jsonStreamRecordReader, jsonWholeRecordReader } from "./json-records.js";
import { jsonlRecordReader } from "./jsonl-records.js";
import { Collector, type FeedBatch, type RecordReader } from "./types.js";
import { pickSheet, rowsToRecords, type SheetRow } from "./workbook.js";
import { readWhole, xlsSheetRows } from "./xls-rows.js";
import { openXlsxSheet } from "./xlsx-rows.js";
import { xmlRecordReader } from "./xml-records.js";
import { type OpenedZipEntry, openZipEntry, type SpooledFile, spoolToFile } from "./zip.js";

/**
 * One feed response body → batches of records (docs/feeds.md), end to end as a
 * stream: body → Content-Encoding undone → gzip (by its magic bytes) or zip
 * (its `zipEntry`) opened → decompressed bytes metered (`maxBytes`, 100:1) →
 * decoded (iconv-lite) → parsed (saxes, csv-parse, stream-json, JSON lines).
 *
 * Memory: one batch of records plus what one decoded chunk (≤ 64 KiB) holds;
 * a batch is only read once the consumer asked for it (the generator is
 * pulled), so a slow consumer slows the socket, not the heap.
 *
 * Failures: complete batches read before a failure are yielded first; the
 * partial batch in progress is dropped and the error thrown (the step that
 * was being read fails). Codes: the body breaking off → `NETWORK` (retryable);
 * a cut or corrupt compressed stream, malformed XML/JSON, a limit → `CONTRACT`.
 * An aborted `signal` ends the read with its reason.
 */

export interface ReadFeedOptions {
  /** The connector's parsed `format`. */
  format: FeedFormat;
  /** `maxResponseBytes` in force ({@link feedMaxBytes}): bounds the raw body and the decompressed stream. */
  maxBytes: number;
  /** The response's `Content-Encoding`, when the transport has not undone it. */
  contentEncoding?: string | undefined;
  /** The response's `Content-Type` (its `charset` is used by `encoding: auto`). */
  contentType?: string | undefined;
  signal?: AbortSignal | undefined;
  /** `records.path` of a `json` format (`""`: the body is the array). */
  recordsPath?: string | undefined;
  /** `maxJsonDepth` (default 64) for `json` and `jsonl`. */
  maxJsonDepth?: number | undefined;
  /** Where a zip archive is spooled (default `os.tmpdir()`); it needs room for the whole archive. */
  spoolDir?: string | undefined;
  /** `xlsx`/`xls`: the mapped column names (field paths); `headerRow: "auto"` looks for a row holding all. */
  columns?: readonly string[] | undefined;
}

/** What the byte layer learnt, for logs and metrics; filled as the read goes. */
export interface FeedReadStats {
  rawBytes: number;
  decompressedBytes: number;
  encoding: string | undefined;
  compression: "none" | "content-encoding" | "gzip" | "zip";
  zipEntry: string | undefined;
  /** `xlsx`/`xls`: the sheet read, its header row (1-based) and the header's normalised texts. */
  sheet?: string | undefined;
  headerRow?: number | undefined;
  header?: string[] | undefined;
}

function readerFor(options: ReadFeedOptions, encoding: string): RecordReader {
  const { format } = options;
  const maxDepth = options.maxJsonDepth ?? 64;
  switch (format.type) {
    case "xlsx":
    case "xls":
      throw new Error("a workbook is read from bytes, not text");
    case "xml":
      return xmlRecordReader(format, encoding);
    case "csv":
      return csvRecordReader(format, encoding);
    case "jsonl":
      return jsonlRecordReader(encoding, maxDepth);
    case "json":
      return format.stream
        ? jsonStreamRecordReader(options.recordsPath ?? "", encoding, maxDepth)
        : jsonWholeRecordReader(options.recordsPath ?? "", maxDepth);
  }
}

/**
 * A workbook's records: `xlsx` spooled to a file and its sheet streamed (xlsx-rows.ts),
 * `xls` read whole (xls-rows.ts); rows become records in `out` (workbook.ts).
 */
async function* readWorkbook(
  bytes: AsyncIterable<Buffer>,
  format: WorkbookFormat,
  options: ReadFeedOptions,
  out: Collector,
  info: FeedReadStats,
  onSpool: (file: SpooledFile) => void,
): AsyncGenerator<void, void, undefined> {
  const wb = { sheet: undefined, headerRow: undefined, header: undefined } as {
    sheet: string | undefined;
    headerRow: number | undefined;
    header: string[] | undefined;
  };
  let sheet: { name: string; rows: AsyncIterable<SheetRow[]> };
  if (format.type === "xls") {
    sheet = await xlsSheetRows(await readWhole(bytes, options.maxBytes), format.sheet);
  } else {
    const file = await spoolToFile(bytes, options.maxBytes, options.spoolDir, "xlsx workbook");
    onSpool(file);
    sheet = await openXlsxSheet(file.path, options.maxBytes, (names) => pickSheet(names, format.sheet));
  }
  info.sheet = sheet.name;
  try {
    for await (const _ of rowsToRecords(sheet.rows, format, options.columns ?? [], sheet.name, out, wb)) {
      info.headerRow = wb.headerRow;
      info.header = wb.header;
      yield;
    }
  } finally {
    info.headerRow = wb.headerRow;
    info.header = wb.header;
  }
}

function classify(err: unknown, signal: AbortSignal | undefined): unknown {
  if (signal?.aborted) return signal.reason;
  const classified = classifyDecompressionError(err);
  if (classified instanceof IngestionError) return classified;
  const code = (classified as { code?: unknown } | null)?.code;
  if (code === "ABORT_ERR" || (classified as Error | null)?.name === "AbortError") return classified;
  return new IngestionError("CONTRACT", `feed cannot be read: ${errorMessage(err)}`, { cause: err });
}

/**
 * Reads `body` as `options.format` and yields batches of at most
 * `format.pageSize` records and rejects together.
 */
export async function* readFeed(
  body: ByteSource | Readable,
  options: ReadFeedOptions,
  stats?: FeedReadStats,
): AsyncGenerator<FeedBatch, void, undefined> {
  const { format, maxBytes, signal } = options;
  const info: FeedReadStats = stats ?? {
    rawBytes: 0,
    decompressedBytes: 0,
    encoding: undefined,
    compression: "none",
    zipEntry: undefined,
  };
  const counters: ByteCounters = { raw: 0, decompressed: 0, compressed: () => counters.raw };
  let zip: OpenedZipEntry | undefined;
  let spooledWorkbook: SpooledFile | undefined;
  const workbook = isWorkbookFormat(format);
  const out = new Collector(format.pageSize);
  // Destroying the body ends every stage above it: on abort (a stalled socket would
  // otherwise wait for its own timeout) and when the read ends early for any reason.
  const stop = () => {
    if (body instanceof Readable && !body.destroyed) body.destroy();
  };
  signal?.addEventListener("abort", stop, { once: true });
  try {
    signal?.throwIfAborted();
    let bytes: AsyncIterable<Buffer> = readBody(body as ByteSource, counters, maxBytes, signal);
    let compressed = false;
    if (contentCodings(options.contentEncoding).length > 0) {
      bytes = undoContentEncoding(bytes, options.contentEncoding);
      compressed = true;
      info.compression = "content-encoding";
    }
    let { head, stream } = await peek(bytes, 4);
    if (isGzip(head)) {
      stream = gunzip(stream);
      compressed = true;
      info.compression = "gzip";
      ({ head, stream } = await peek(stream, 4));
    }
    // A workbook's own zip (xlsx) is read as one; a zipped workbook is opened by its zipEntry.
    if (isZip(head) && (!workbook || format.zipEntry !== undefined)) {
      zip = await openZipEntry(stream, format.zipEntry, maxBytes, () => {}, options.spoolDir);
      const entry = zip;
      counters.compressed = () => Math.min(counters.raw, Math.max(entry.compressedSize, 1));
      stream = zip.stream;
      compressed = true;
      info.compression = "zip";
      info.zipEntry = zip.name;
    }
    const metered = meterDecompressed(stream, counters, maxBytes, compressed);
    if (isWorkbookFormat(format)) {
      const keep = (file: SpooledFile) => {
        spooledWorkbook = file;
      };
      try {
        for await (const _ of readWorkbook(metered, format, options, out, info, keep)) {
          info.rawBytes = counters.raw;
          info.decompressedBytes = counters.decompressed;
          while (out.full) yield out.take();
          signal?.throwIfAborted();
        }
      } catch (err) {
        while (out.full) yield out.take();
        throw err;
      }
      info.rawBytes = counters.raw;
      info.decompressedBytes = counters.decompressed;
      while (out.size > 0) yield out.take();
      return;
    }
    const sniffed = await peek(metered, SNIFF_BYTES);
    const encoding = chooseEncoding(format.encoding, sniffed.head, {
      xml: format.type === "xml",
      contentType: options.contentType,
    });
    info.encoding = encoding;
    const text = decodeText(sniffed.stream, encoding);
    const read = readerFor(options, encoding);
    try {
      for await (const _ of read(text, out)) {
        info.rawBytes = counters.raw;
        info.decompressedBytes = counters.decompressed;
        while (out.full) yield out.take();
        signal?.throwIfAborted();
      }
    } catch (err) {
      // Complete batches read before the failure are the consumer's to commit.
      while (out.full) yield out.take();
      throw err;
    }
    info.rawBytes = counters.raw;
    info.decompressedBytes = counters.decompressed;
    while (out.size > 0) yield out.take();
  } catch (err) {
    throw classify(err, signal);
  } finally {
    signal?.removeEventListener("abort", stop);
    stop();
    await zip?.close();
    await spooledWorkbook?.remove();
  }
}
