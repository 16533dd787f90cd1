import type { ConnectorDefinition } from "../config/connector-schema.js";
import type { Connector, Page, WalkContext } from "../ingestion/ports.js";
import { ConfigError, IngestionError, isIngestionError } from "../platform/errors.js";
import { type CompiledFields, compileFields } from "./field-spec.js";
import { decodeJsonPage } from "./json-body.js";
import { normalizeRecords } from "./normalize.js";
import { firstPageUrl, nextPageUrl, ProgressGuard } from "./pagination.js";
import type { Transport } from "./transport.js";

/**
 * The declarative HTTP JSON connector (DESIGN §3): the connector file says
 * where the records are, how pages follow each other and how fields map.
 *
 * Pages stream with a prefetch of exactly one: page N+1 is requested while
 * the consumer stores page N, never further ahead, so memory stays bounded by
 * two pages whatever the catalog size. When the consumer stops iterating or
 * the walk's signal aborts, the request in flight is aborted.
 */

interface Fetched {
  page: Page;
  /** The next page, null at the end, or why the walk cannot go on (after this page is stored). */
  next: URL | null | IngestionError;
}

function nextOrError(compute: () => URL | null): URL | null | IngestionError {
  try {
    return compute();
  } catch (err) {
    if (isIngestionError(err)) return err;
    throw err;
  }
}

export function createDeclarativeConnector(transport: Transport): Connector {
  const def: ConnectorDefinition = transport.options.definition;
  if (!def.fields) throw new ConfigError("the declarative connector needs fields (sku and price at least)");
  // Field specs compiled once per connector (JMESPath expressions parsed here, not per record).
  const fields: CompiledFields = compileFields(def.fields, def.attributes);
  const limits = {
    maxDepth: def.maxJsonDepth,
    maxRecords: def.maxRecordsPerPage,
    recordsPath: def.records.path,
  };

  // No placeholder is defined by a plain walk (the schema refuses them), so the body is sent as written.
  const body = requestBody(def);

  async function fetchOne(
    url: URL,
    seq: number,
    ctx: WalkContext,
    signal: AbortSignal,
    headers: Record<string, string>,
  ): Promise<Fetched> {
    const { value, attempts } = await transport.fetchPage({
      url,
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
          nextPageUrl(def, transport.http.origins, {
            url: res.url,
            headers: res.headers,
            body,
            recordCount: records.length,
            lastRecord: records[records.length - 1],
          }),
        );
        return { records, next };
      },
    });
    const { offers, rejects } = normalizeRecords(value.records, fields);
    return { page: { seq, offers, rejects, httpAttempts: attempts }, next: value.next };
  }

  async function* walk(ctx: WalkContext): AsyncGenerator<Page> {
    ctx.signal.throwIfAborted();
    transport.beginWalk();
    const headers = { ...def.request.headers };
    const stop = new AbortController();
    const signal = AbortSignal.any([ctx.signal, stop.signal]);
    const prefetch = ctx.prefetch ?? true;
    const progress = new ProgressGuard();
    const fetchNext = (next: URL | null | IngestionError, seq: number): Promise<Fetched> | null => {
      if (!(next instanceof URL)) return null;
      const pending = (async () => {
        progress.visit(next);
        return fetchOne(next, seq, ctx, signal, headers);
      })();
      // Marked handled now; the rejection is still seen when the loop awaits it.
      pending.catch(() => {});
      return pending;
    };
    try {
      let seq = 1;
      let pending: Promise<Fetched> | null = fetchNext(firstPageUrl(def), seq);
      while (pending) {
        const fetched: Fetched = await pending;
        seq++;
        const next = fetched.next;
        fetched.page.hasNext = next !== null;
        pending = prefetch ? fetchNext(next, seq) : null;
        yield fetched.page;
        if (next instanceof IngestionError) {
          next.attempts = 0;
          throw next;
        }
        if (!prefetch) pending = fetchNext(next, seq);
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

/** `request.body` as JSON or `request.form` as a urlencoded form (DESIGN §3.3). */
function requestBody(def: ConnectorDefinition): { contentType: string; data: string } | undefined {
  if (def.request.form !== undefined) {
    return {
      contentType: "application/x-www-form-urlencoded",
      data: new URLSearchParams(def.request.form).toString(),
    };
  }
  if (def.request.body !== undefined) {
    return { contentType: "application/json", data: JSON.stringify(def.request.body) };
  }
  return undefined;
}
