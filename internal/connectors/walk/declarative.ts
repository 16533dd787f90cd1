import { formatSchema, isFlatFormat, isStreamedFormat } from "../../feeds/format-schema.js";
import type { Connector, Page, WalkContext } from "../../ingestion/ports.js";
import { ConfigError, IngestionError, isIngestionError } from "../../platform/errors.js";
import { decodeJsonPage } from "../../platform/json-body.js";
import { coveragePlan } from "../records/coverage.js";
import { type CompiledFields, compileFields } from "../records/field-spec.js";
import { normalizeRecords } from "../records/normalize.js";
import type { ConnectorDefinition } from "../schema/connector-schema.js";
import { conditionalOf } from "../transport/conditional-requests.js";
import type { Transport } from "../transport/transport.js";
import { datedRequest, isDated, walkDatedFile } from "./dated-file.js";
import { createEnricher } from "./enrich.js";
import { runExportJob } from "./export-job.js";
import { walkFeed } from "./feed-walk.js";
import { firstPageUrl, nextPageUrl, ProgressGuard } from "./pagination.js";
import { readPartitions } from "./partitions.js";
import {
  batchValues,
  inBatches,
  type PlaceholderValues,
  requestBody,
  requestUrl,
} from "./request-template.js";
import { readSkuList, type SkuDatabase } from "./sku-list.js";

/**
 * The declarative HTTP JSON connector (docs/connectors.md): the connector file says
 * where the records are, how pages follow each other and how fields map.
 *
 * A walk is a sequence of **units**, each walked from its first page to its
 * last: the main request once (a plain walk), once per partition value
 * (docs/connectors.md, Partitions), or once per batch of SKUs (docs/connectors.md, SKU lists; one request each). Steps are
 * numbered on across units. The walk returns normally, so is complete for
 * delisting (docs/connectors.md, Walks and steps), only when every unit reached its end: a failing page,
 * partition or batch throws and ends the walk.
 *
 * Pages stream with a prefetch of exactly one: step N+1 (its enrichments
 * included) is requested while the consumer stores step N, never further
 * ahead, so memory stays bounded by two steps whatever the catalog size. When
 * the consumer stops iterating or the walk's signal aborts, the request in
 * flight is aborted.
 *
 * A streamed `format` (docs/feeds.md) or an `export` job (docs/feeds.md, Export jobs) makes the walk one
 * file read as a stream and cut into steps: see `feed-walk.ts` and
 * `export-job.ts`.
 */

export interface DeclarativeOptions {
  /** Where `skus.from: "sql"` lists are read; absent where no database is opened. */
  database?: SkuDatabase | undefined;
  /** Where zip archives of feeds are spooled; `os.tmpdir()` (so `TMPDIR`) by default. */
  spoolDir?: string | undefined;
  /** The supplier's time zone (IANA), for `{date:…}` (docs/feeds.md, Dated files); UTC when absent. */
  timeZone?: string | undefined;
}

/** One unit of the walk: its placeholder values, and whether it is a SKU batch (a 404 is empty). */
interface Unit {
  values: PlaceholderValues;
  batch: boolean;
}

interface Target {
  url: URL;
  unit: number;
}

interface Fetched {
  page: Page;
  /** The next page of this unit, null at its end, or why the unit cannot go on (after this page is stored). */
  next: URL | null | IngestionError;
  /** The walk's one request was answered 304 (docs/conditional-requests.md): `page` is not yielded and the walk ends. */
  notModified?: boolean;
}

function nextOrError(compute: () => URL | null): URL | null | IngestionError {
  try {
    return compute();
  } catch (err) {
    if (isIngestionError(err)) return err;
    throw err;
  }
}

export function createDeclarativeConnector(
  transport: Transport,
  options: DeclarativeOptions = {},
): Connector {
  const def: ConnectorDefinition = transport.options.definition;
  if (!def.fields) throw new ConfigError("the declarative connector needs fields (sku and price at least)");
  // Field specs compiled once per connector (JMESPath expressions parsed here, not per record).
  // CSV and workbook rows are flat: a path names a column's header text as a whole (docs/feeds.md, Workbooks).
  const flat = def.format !== undefined && isFlatFormat(def.format);
  const fields: CompiledFields = compileFields(def.fields, def.attributes, { flat });
  const enrich = createEnricher(transport, def, fields);
  // Which fields a step's coverage reports, enriched ones included (coverage.ts).
  const coverage = coveragePlan(fields, enrich?.mapped);
  const limits = {
    maxDepth: def.maxJsonDepth,
    maxRecords: def.maxRecordsPerPage,
    recordsPath: def.records.path,
  };
  const separator = def.skus?.separator ?? "";
  const plainBody = requestBody(def.request);
  const templated = def.partitions !== undefined || def.skus !== undefined;

  async function fetchOne(
    target: Target,
    unit: Unit,
    seq: number,
    ctx: WalkContext,
    signal: AbortSignal,
    headers: Record<string, string>,
  ): Promise<Fetched> {
    /** The step begins with its first request (its wait for the rate limit included). */
    const startedAt = new Date();
    const body = templated ? requestBody(def.request, unit.values) : plainBody;
    let records: unknown[];
    let next: URL | null | IngestionError;
    let attempts: number;
    // docs/conditional-requests.md: a one-request walk sends the last succeeded run's validators back (only `conditionalOf`
    // decides whether this walk is one); the answer's validators and a 304 are reported on the context.
    const conditional = conditionalOf(def, ctx);
    try {
      const fetched = await transport.fetchConditional(
        {
          url: target.url,
          seq,
          ctx,
          signal,
          headers,
          method: def.request.method,
          ...(body ? { body } : {}),
          decode: (res) => {
            const { body, records } = decodeJsonPage(res.body, res.contentType, limits);
            // A bad next pointer (foreign origin, no progress) does not spoil this page's records: the walk
            // yields them and fails on the step after.
            const next = nextOrError(() =>
              nextPageUrl(
                def,
                transport.http.origins,
                {
                  url: res.url,
                  headers: res.headers,
                  body,
                  recordCount: records.length,
                  lastRecord: records[records.length - 1],
                },
                unit.values,
              ),
            );
            return { records, next };
          },
        },
        conditional?.previous ?? null,
      );
      attempts = fetched.attempts;
      if (conditional) conditional.received = fetched.validators;
      if (fetched.notModified) {
        // Only reachable when validators were sent: the transport refuses any other 304.
        if (conditional) conditional.notModified = true;
        return {
          page: { seq, offers: [], rejects: [], httpAttempts: attempts, startedAt },
          next: null,
          notModified: true,
        };
      }
      ({ records, next } = fetched.value);
    } catch (err) {
      // A 404 for a SKU batch means none of its SKUs exist (docs/connectors.md, SKU lists): a step without offers.
      if (!(unit.batch && isIngestionError(err) && err.code === "HTTP_404")) throw err;
      records = [];
      next = null;
      attempts = err.attempts ?? 1;
    }
    let enriched: Parameters<typeof normalizeRecords>[2];
    if (enrich !== undefined && records.length > 0) {
      try {
        const result = await enrich(records, { seq, ctx, signal, values: unit.values });
        enriched = result.values;
        attempts += result.attempts;
      } catch (err) {
        if (isIngestionError(err)) err.attempts = attempts + (err.attempts ?? 0);
        throw err;
      }
    }
    const mapped = normalizeRecords(records, fields, enriched, coverage);
    const { offers, rejects } = mapped;
    return {
      page: { seq, offers, rejects, httpAttempts: attempts, coverage: mapped.coverage, startedAt },
      next,
    };
  }

  /** The units of this walk, read at its start (SKU lists re-read, partition lists re-fetched). */
  async function unitsOf(ctx: WalkContext, signal: AbortSignal): Promise<Unit[]> {
    if (def.skus !== undefined) {
      const skus = await readSkuList(def.skus, {
        supplier: transport.supplier,
        connectorsDir: transport.options.connectorsDir,
        database: options.database,
        statementTimeoutMs: def.timeouts.requestMs,
      });
      return inBatches(skus, def.skus.batch).map((batch) => ({
        values: batchValues(batch, def.skus?.separator ?? ","),
        batch: true,
      }));
    }
    if (def.partitions !== undefined) {
      const values = await readPartitions(transport, def, def.partitions, ctx, signal);
      return values.map((partition) => ({ values: { partition }, batch: false }));
    }
    return [{ values: {}, batch: false }];
  }

  /** Format of a file walk: a streamed format, or any format of an export's download (json read whole included). */
  const feedFormat =
    def.format !== undefined && (def.export !== undefined || isStreamedFormat(def.format))
      ? def.format
      : def.export !== undefined
        ? formatSchema.parse({ type: "json" })
        : undefined;

  /** The walk of one file (docs/feeds.md): the main request, or an export job's download (docs/feeds.md, Export jobs). */
  async function* walkFile(
    ctx: WalkContext,
    signal: AbortSignal,
    headers: Record<string, string>,
    prefetch: boolean,
  ): AsyncGenerator<Page> {
    if (feedFormat === undefined) return;
    const common = {
      transport,
      def,
      format: feedFormat,
      fields,
      enrich,
      coverage,
      ctx,
      signal,
      prefetch,
      spoolDir: options.spoolDir,
    };
    if (def.export !== undefined) {
      const startedAt = new Date();
      const ready = await runExportJob(transport, def, def.export, ctx, signal, headers);
      // The download is a plain GET of the URL the supplier gave: no configured body or query.
      yield* walkFeed({ ...common, url: ready.url, headers, attemptsBefore: ready.attempts, startedAt });
      return;
    }
    if (isDated(def.request)) {
      // docs/feeds.md, Dated files: today's file, else the day before, up to dateFallbackDays back.
      yield* walkDatedFile(
        (date, attemptsBefore) =>
          walkFeed({
            ...common,
            url: requestUrl(def.baseUrl, datedRequest(def.request, date)),
            headers,
            method: def.request.method,
            ...(plainBody ? { body: plainBody } : {}),
            conditional: conditionalOf(def, ctx),
            attemptsBefore,
          }),
        {
          now: transport.options.clock.now(),
          timeZone: options.timeZone,
          fallbackDays: def.request.dateFallbackDays ?? 0,
          ctx,
        },
      );
      return;
    }
    yield* walkFeed({
      ...common,
      url: requestUrl(def.baseUrl, def.request),
      headers,
      method: def.request.method,
      ...(plainBody ? { body: plainBody } : {}),
      conditional: conditionalOf(def, ctx),
    });
  }

  async function* walk(ctx: WalkContext): AsyncGenerator<Page> {
    ctx.signal.throwIfAborted();
    transport.beginWalk();
    const headers = { ...def.request.headers };
    const stop = new AbortController();
    const signal = AbortSignal.any([ctx.signal, stop.signal]);
    const prefetch = ctx.prefetch ?? true;
    try {
      if (feedFormat !== undefined) {
        yield* walkFile(ctx, signal, headers, prefetch);
        return;
      }
      const units = await unitsOf(ctx, signal);
      if (units.length === 0) {
        // An empty SKU list with `allowEmpty`: one step without offers, so the run can succeed
        // (and delist what is no longer listed) like any complete walk.
        yield { seq: 1, offers: [], rejects: [], httpAttempts: 0, hasNext: false };
        return;
      }
      // Each unit paginates on its own: a next page seen before in the same unit means no progress.
      let progress = new ProgressGuard();
      const firstOf = (unit: number): Target | null =>
        unit < units.length
          ? { url: firstPageUrl(def, (units[unit] as Unit).values, separator), unit }
          : null;
      /** Where the walk goes after a page of `unit`: its next page, the next unit, or the end. */
      const after = (unit: number, next: URL | null): Target | null =>
        next !== null ? { url: next, unit } : firstOf(unit + 1);
      const fetchNext = (target: Target | null, seq: number): Promise<Fetched> | null => {
        if (target === null) return null;
        const pending = (async () => {
          progress.visit(target.url);
          return fetchOne(target, units[target.unit] as Unit, seq, ctx, signal, headers);
        })();
        // Marked handled now; the rejection is still seen when the loop awaits it.
        pending.catch(() => {});
        return pending;
      };
      let seq = 1;
      let target = firstOf(0);
      let pending: Promise<Fetched> | null = fetchNext(target, seq);
      while (pending && target) {
        const fetched: Fetched = await pending;
        // 304 (docs/conditional-requests.md): the catalog is as the last succeeded run left it; the walk ends with no step.
        if (fetched.notModified) return;
        seq++;
        const next = fetched.next;
        const following = next instanceof IngestionError ? null : after(target.unit, next);
        if (following !== null && following.unit !== target.unit) progress = new ProgressGuard();
        fetched.page.hasNext = next instanceof IngestionError || following !== null;
        target = following;
        pending = prefetch ? fetchNext(following, seq) : null;
        yield fetched.page;
        if (next instanceof IngestionError) {
          next.attempts = 0;
          throw next;
        }
        if (!prefetch) pending = fetchNext(following, seq);
      }
    } finally {
      stop.abort(new Error("walk ended"));
    }
  }

  return {
    walk,
    close: () => transport.close(),
  };
}
