import type { FeedFormat, FeedReadStats } from "../../feeds/index.js";
import type { FeedBatch } from "../../feeds/types.js";
import type { ConditionalWalk, Page, Reject, WalkContext } from "../../ingestion/ports.js";
import { isIngestionError } from "../../platform/errors.js";
import type { CoveragePlan } from "../records/coverage.js";
import { type CompiledFields, mappedColumns } from "../records/field-spec.js";
import { normalizeRecords } from "../records/normalize.js";
import type { ConnectorDefinition } from "../schema/connector-schema.js";
import { type SpooledBody, spoolBody } from "../transport/download-spool.js";
import { validatorsOf } from "../transport/http-client.js";
import type { Transport } from "../transport/transport.js";
import type { Enricher } from "./enrich.js";

/**
 * A streamed feed walk (docs/feeds.md): the one request of the walk (or the
 * export job's download, docs/feeds.md, Export jobs) is opened as a stream and read by
 * {@link readFeed}; every batch of `format.pageSize` records is one step,
 * mapped by the compiled fields (and enriched) like any page.
 *
 * Steps stream with a prefetch of one, as paged walks do: batch N+1 is read
 * and enriched while the consumer stores step N, never further ahead, so
 * memory is bounded by two steps whatever the file's size, and a slow
 * database slows the socket, not the heap.
 *
 * Failures: a batch that cannot be completed (a truncated gzip, a cut
 * transfer, malformed XML, a decompression bomb) fails its own step; the
 * steps before it were yielded, so committed, and the walk is not complete,
 * so nothing is delisted. The first step carries the requests that opened
 * the stream (and, for an export, created and polled the job).
 *
 * A walk with enrichments spools the file to disk first (download-spool.ts): it would
 * otherwise hold the download still while each step is enriched, and a server that
 * closes the idle-looking connection would cut the file.
 */

export interface FeedWalkOptions {
  transport: Transport;
  def: ConnectorDefinition;
  format: FeedFormat;
  fields: CompiledFields;
  enrich: Enricher | undefined;
  /** The fields a step's coverage reports (coverage.ts). */
  coverage: CoveragePlan;
  ctx: WalkContext;
  /** The walk's signal: ends the read (and the socket) when it aborts. */
  signal: AbortSignal;
  url: URL;
  /** Configured headers (sent to the baseUrl origin only, with credentials). */
  headers: Record<string, string>;
  method?: "GET" | "POST";
  body?: { contentType: string; data: string };
  /** Requests made before this one (an export job's create and polls): counted into the first step. */
  attemptsBefore?: number;
  /** When the first of those requests was made: the first step's start (default: this request's). */
  startedAt?: Date;
  /** Where a zip archive is spooled; `os.tmpdir()` (so `TMPDIR`) by default. */
  spoolDir?: string | undefined;
  /** Request step N+1 while step N is stored (`WalkContext.prefetch`). */
  prefetch: boolean;
  /**
   * The walk's conditional state when the file is the walk's one request (docs/conditional-requests.md):
   * its `previous` validators are sent back, a 304 ends the walk with no step.
   */
  conditional?: ConditionalWalk | undefined;
}

const ACCEPT: Record<FeedFormat["type"], string> = {
  xml: "application/xml, text/xml;q=0.9, */*;q=0.8",
  csv: "text/csv, text/plain;q=0.9, */*;q=0.8",
  jsonl: "application/x-ndjson, application/jsonl;q=0.9, */*;q=0.8",
  json: "application/json, */*;q=0.8",
  xlsx: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet, application/zip;q=0.9, */*;q=0.8",
  xls: "application/vnd.ms-excel, application/zip;q=0.9, */*;q=0.8",
};

interface Step {
  page: Page;
  /** False once the file ended: this was its last step. */
  more: boolean;
}

export async function* walkFeed(o: FeedWalkOptions): AsyncGenerator<Page> {
  const { transport, def, format, ctx, signal } = o;
  // The feed layer and its parsers (saxes, csv-parse, stream-json, yauzl, iconv-lite) are
  // loaded by the first file walk, not by every daemon: one that only walks JSON APIs keeps
  // them out of its heap (bench/README.md, Heap growth). Loaded before the request goes out.
  const { readFeed } = await import("../../feeds/read-feed.js");
  let seq = 1;
  /** The first step began with the walk's first request; each later one when its batch began to be read. */
  const walkStarted = o.startedAt ?? new Date();
  let firstStart: Date | undefined = walkStarted;
  const stepStart = (): Date => {
    const started = firstStart ?? new Date();
    firstStart = undefined;
    return started;
  };
  const opened = await transport.openStream({
    url: o.url,
    seq,
    ctx,
    signal,
    headers: o.headers,
    accept: ACCEPT[format.type],
    ...(o.method ? { method: o.method } : {}),
    ...(o.body ? { body: o.body } : {}),
    ...(o.conditional?.previous ? { conditional: o.conditional.previous } : {}),
  });
  const response = opened.value;
  if (o.conditional) {
    o.conditional.received = validatorsOf(response);
    if (response.status === 304) {
      // Not modified since the last succeeded run: nothing to read, no step.
      response.body.destroy();
      o.conditional.notModified = true;
      return;
    }
  }
  let attempts = (o.attemptsBefore ?? 0) + opened.attempts;
  // An enriched walk reads at the enrichment's pace: the body is spooled first (download-spool.ts).
  let spooled: SpooledBody | undefined;
  if (o.enrich !== undefined) {
    try {
      spooled = await spoolBody(response.body, { maxBytes: def.maxResponseBytes, signal, dir: o.spoolDir });
    } catch (err) {
      if (isIngestionError(err)) err.attempts = attempts + (err.attempts ?? 0);
      throw err;
    } finally {
      if (!response.body.destroyed) response.body.destroy();
    }
    ctx.log.debug({ bytes: spooled.bytes }, "download spooled before its steps are enriched");
  }
  const body = spooled?.body ?? response.body;
  const stats: FeedReadStats = {
    rawBytes: 0,
    decompressedBytes: 0,
    encoding: undefined,
    compression: "none",
    zipEntry: undefined,
  };
  let workbookShown = false;
  const batches = readFeed(
    body,
    {
      format,
      // In force: the definition's, else its format's default (the schema resolved it).
      maxBytes: def.maxResponseBytes,
      contentEncoding: response.contentEncoding,
      contentType: response.contentType,
      signal,
      recordsPath: def.records.path,
      maxJsonDepth: def.maxJsonDepth,
      spoolDir: o.spoolDir,
      // A workbook's header row is the one holding every mapped column (docs/feeds.md, Workbooks).
      columns: def.fields !== undefined ? mappedColumns(def.fields, def.attributes) : undefined,
    },
    stats,
  );

  /** Reads the next batch and makes it a step; `null` past the end of the file. */
  const readStep = async (n: number): Promise<Step | null> => {
    const startedAt = stepStart();
    const next = await batches.next();
    if (next.done) return null;
    const page = await toPage(next.value, n, attempts, o);
    page.startedAt = startedAt;
    attempts = 0;
    if (!workbookShown && stats.sheet !== undefined) {
      // The first step of a workbook says where its table was found (preview prints it).
      workbookShown = true;
      page.workbook = { sheet: stats.sheet, headerRow: stats.headerRow, header: stats.header ?? [] };
    }
    return { page, more: true };
  };
  const start = (n: number): Promise<Step | null> => {
    const pending = readStep(n);
    // Marked handled now; the rejection is still seen when the loop awaits it.
    pending.catch(() => {});
    return pending;
  };

  try {
    let pending: Promise<Step | null> | null = start(seq);
    let yielded = 0;
    while (pending !== null) {
      let step: Step | null;
      try {
        step = await pending;
      } catch (err) {
        // Only the first step is charged the requests that opened the stream.
        if (isIngestionError(err) && yielded > 0) err.attempts = 0;
        else if (isIngestionError(err)) err.attempts = attempts + (err.attempts ?? 0);
        throw err;
      }
      if (step === null) {
        if (yielded === 0) {
          // A file without records: one step without offers, so the walk ends like any complete one.
          yield {
            seq,
            offers: [],
            rejects: [],
            httpAttempts: attempts,
            hasNext: false,
            startedAt: walkStarted,
          };
        }
        return;
      }
      seq++;
      pending = o.prefetch ? start(seq) : null;
      yielded++;
      yield step.page;
      if (!o.prefetch) pending = start(seq);
    }
  } finally {
    // Ends the read if the walk stopped early: the socket first, so a batch being read fails at once.
    if (!body.destroyed) body.destroy();
    await batches.return(undefined).catch(() => {});
    await spooled?.remove();
  }
}

async function toPage(batch: FeedBatch, seq: number, attempts: number, o: FeedWalkOptions): Promise<Page> {
  let enriched: Parameters<typeof normalizeRecords>[2];
  let httpAttempts = attempts;
  if (o.enrich !== undefined && batch.records.length > 0) {
    try {
      const result = await o.enrich(batch.records, { seq, ctx: o.ctx, signal: o.signal, values: {} });
      enriched = result.values;
      httpAttempts += result.attempts;
    } catch (err) {
      if (isIngestionError(err)) err.attempts = httpAttempts + (err.attempts ?? 0);
      throw err;
    }
  }
  const { offers, rejects, coverage } = normalizeRecords(batch.records, o.fields, enriched, o.coverage);
  const unread: Reject[] = batch.rejects.map((r) => ({ reason: r.reason, raw: r.raw }));
  // A row the reader could not make a record of is one of the step's records too, with no value.
  if (unread.length > 0) for (const c of coverage) c.records += unread.length;
  return {
    seq,
    offers,
    rejects: unread.length > 0 ? [...unread, ...rejects] : rejects,
    httpAttempts,
    coverage,
  };
}
