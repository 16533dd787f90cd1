import { z } from "zod";
import type { Connector, Page, WalkContext } from "../../ingestion/ports.js";
import { ConfigError, IngestionError } from "../../platform/errors.js";
import { parseJsonText } from "../../platform/json-body.js";
import { compileFields } from "../records/field-spec.js";
import { normalizeRecords } from "../records/normalize.js";
import type { HttpResponse } from "../transport/http-client.js";
import type { Transport } from "../transport/transport.js";

/**
 * Example hand-written connector `"module": "json-lines"`: a feed of
 * newline-delimited JSON records (one object per line), paged with a page
 * number parameter until an empty page. It shows what a module gets from the
 * registry: the shared transport (limiter, retries, metrics, origin pinning,
 * credentials) and its own `settings`, validated here.
 *
 * ```json
 * { "module": "json-lines", "baseUrl": "https://feed.example",
 *   "settings": { "path": "/offers.ndjson", "pageParam": "page",
 *                 "fields": { "sku": "sku", "price": "price" } } }
 * ```
 */

const dotPath = z.string().regex(/^[^.\s]+(\.[^.\s]+)*$/);
const settingsSchema = z.strictObject({
  /** Path of the feed, appended to baseUrl. */
  path: z.string().startsWith("/").default("/"),
  /** Page number query parameter; pages start at 1. */
  pageParam: z.string().min(1).default("page"),
  fields: z.strictObject({
    sku: dotPath,
    price: dotPath,
    name: dotPath.optional(),
    currency: dotPath.optional(),
    stock: dotPath.optional(),
  }),
});

const NDJSON_TYPES = new Set([
  "application/x-ndjson",
  "application/jsonl",
  "application/jsonlines",
  "application/ndjson",
]);

function decodeLines(res: HttpResponse, maxDepth: number, maxRecords: number): unknown[] {
  const type = res.contentType?.split(";")[0]?.trim().toLowerCase();
  if (!type || !NDJSON_TYPES.has(type)) {
    throw new IngestionError(
      "CONTRACT",
      `response content type is ${type ? JSON.stringify(type.slice(0, 100)) : "missing"}, expected application/x-ndjson`,
    );
  }
  const records: unknown[] = [];
  const lines = res.body.toString("utf8").split("\n");
  for (const [i, line] of lines.entries()) {
    if (line.trim() === "") continue;
    if (records.length >= maxRecords) {
      throw new IngestionError("CONTRACT", `page has more than maxRecordsPerPage (${maxRecords}) records`);
    }
    try {
      records.push(parseJsonText(line, { maxDepth, maxRecords, recordsPath: "" }));
    } catch (err) {
      if (err instanceof IngestionError) throw err;
      throw new IngestionError("CONTRACT", `line ${i + 1} is not valid JSON: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }
  return records;
}

export function createJsonLinesConnector(
  transport: Transport,
  rawSettings: Record<string, unknown>,
): Connector {
  const parsed = settingsSchema.safeParse(rawSettings);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigError(
      `settings.${issue?.path.join(".") ?? ""}: ${issue?.message ?? "invalid"} (module json-lines)`,
    );
  }
  const settings = parsed.data;
  // Compiled once per connector, not per page.
  const fields = compileFields(settings.fields);
  const def = transport.options.definition;
  const base = new URL(def.baseUrl);

  async function* walk(ctx: WalkContext): AsyncGenerator<Page> {
    const headers = { ...def.request.headers, ...transport.authHeaders() };
    for (let seq = 1; ; seq++) {
      const url = new URL(`${base.origin}${base.pathname.replace(/\/+$/, "")}${settings.path}`);
      url.searchParams.set(settings.pageParam, String(seq));
      const { value: records, attempts } = await transport.fetchPage({
        url,
        seq,
        ctx,
        signal: ctx.signal,
        headers,
        accept: "application/x-ndjson",
        decode: (res) => decodeLines(res, def.maxJsonDepth, def.maxRecordsPerPage),
      });
      if (records.length === 0) return;
      const { offers, rejects, coverage } = normalizeRecords(records, fields);
      yield { seq, offers, rejects, httpAttempts: attempts, coverage };
    }
  }

  return { walk, close: () => transport.close() };
}
