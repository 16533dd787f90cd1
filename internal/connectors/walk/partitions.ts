import type { WalkContext } from "../../ingestion/ports.js";
import { IngestionError, isIngestionError } from "../../platform/errors.js";
import { isLosslessNumber } from "../../platform/exact-json.js";
import { decodeJsonPage } from "../../platform/json-body.js";
import { compileFieldSpec, FieldReadError } from "../records/field-spec.js";
import type { ConnectorDefinition, PartitionsDefinition } from "../schema/connector-schema.js";
import type { Transport } from "../transport/transport.js";
import { firstPageUrl, nextPageUrl, type PagedRequest, ProgressGuard } from "./pagination.js";
import { requestBody } from "./request-template.js";

/**
 * Partitions (docs/connectors.md, Partitions): the values the main request is walked for, one
 * after the other. A list from a request is fetched (with its own
 * pagination) at the start of the walk, through the same transport as every
 * other request; if it cannot be fetched the walk fails with that error.
 * Repeated values are walked once; an empty list is `CONTRACT`.
 */

/** The partition values of this walk, deduplicated in first-seen order. */
export async function readPartitions(
  transport: Transport,
  def: ConnectorDefinition,
  partitions: PartitionsDefinition,
  ctx: WalkContext,
  signal: AbortSignal,
): Promise<string[]> {
  const values =
    "values" in partitions
      ? partitions.values
      : await fetchPartitions(transport, def, partitions, ctx, signal);
  const unique = [...new Set(values)];
  if (unique.length === 0) {
    throw new IngestionError("CONTRACT", "partition list is empty (partitions.request answered no values)");
  }
  return unique;
}

async function fetchPartitions(
  transport: Transport,
  def: ConnectorDefinition,
  partitions: Extract<PartitionsDefinition, { request: unknown }>,
  ctx: WalkContext,
  signal: AbortSignal,
): Promise<string[]> {
  const paged: PagedRequest = {
    baseUrl: def.baseUrl,
    request: partitions.request,
    pagination: partitions.pagination,
  };
  const value = compileFieldSpec(partitions.value);
  const body = requestBody(partitions.request);
  const progress = new ProgressGuard();
  const out: string[] = [];
  let url: URL | null = firstPageUrl(paged);
  for (let page = 1; url !== null; page++) {
    progress.visit(url);
    const current: URL = url;
    let answer: { records: unknown[]; next: URL | null };
    try {
      ({ value: answer } = await transport.fetchPage({
        url: current,
        seq: 0,
        ctx,
        signal,
        headers: { ...partitions.request.headers },
        method: partitions.request.method,
        ...(body ? { body } : {}),
        decode: (res) => {
          const decoded = decodeJsonPage(res.body, res.contentType, {
            maxDepth: def.maxJsonDepth,
            maxRecords: def.maxRecordsPerPage,
            recordsPath: partitions.records.path,
            objectIsRecord: true,
          });
          const next = nextPageUrl(paged, transport.http.origins, {
            url: res.url,
            headers: res.headers,
            body: decoded.body,
            recordCount: decoded.records.length,
            lastRecord: decoded.records[decoded.records.length - 1],
          });
          return { records: decoded.records, next };
        },
      }));
    } catch (err) {
      if (isIngestionError(err)) err.message = `partition list page ${page}: ${err.message}`;
      throw err;
    }
    for (const [i, record] of answer.records.entries()) {
      let v: unknown;
      try {
        v = record !== null && typeof record === "object" ? value.read(record) : undefined;
      } catch (err) {
        if (!(err instanceof FieldReadError)) throw err;
        v = undefined;
      }
      const text =
        typeof v === "string"
          ? v.trim()
          : typeof v === "number" || isLosslessNumber(v)
            ? String(v)
            : undefined;
      if (text === undefined || text === "") {
        throw new IngestionError(
          "CONTRACT",
          `partition list page ${page}, record ${i}: partitions.value (${value.source}) is not a string or a number`,
        );
      }
      out.push(text);
    }
    url = answer.next;
  }
  return out;
}
