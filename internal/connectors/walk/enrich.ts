import type { WalkContext } from "../../ingestion/ports.js";
import { IngestionError, isIngestionError } from "../../platform/errors.js";
import { decodeJsonPage } from "../../platform/json-body.js";
import type { EnrichMapping } from "../records/coverage.js";
import { type CompiledField, type CompiledFields, compileFieldSpec } from "../records/field-spec.js";
import { type EnrichedValues, skuOfRecord, skuOfValue } from "../records/normalize.js";
import type { ConnectorDefinition, EnrichDefinition } from "../schema/connector-schema.js";
import type { Transport } from "../transport/transport.js";
import { batchValues, inBatches, requestBody, requestUrl } from "./request-template.js";

/**
 * Enrichment (docs/connectors.md, Enrichment): once a step's records are read and their SKUs
 * mapped, every `enrich` entry is requested for the step's SKUs in batches,
 * its records matched by `key` (or, with batch 1, by the request), and its
 * fields handed to validation in place of the main record's. The requests of all
 * entries and batches run at most `rateLimit.maxConcurrency` at a time (each still
 * paced by the rate limiter). All of it happens before the step is yielded, so
 * before its transaction. A 404 or a SKU no
 * record answers leaves the entry's fields unset (or fails the step
 * `CONTRACT` with `onMissing: "fail"`). No pagination.
 */

interface CompiledEnrichment {
  index: number;
  def: EnrichDefinition;
  key: CompiledField | undefined;
  fields: [keyof EnrichedValues["fields"], CompiledField][];
  attributes: [string, CompiledField][];
}

export interface StepEnrichment {
  /** Per main record (same order), what the enrichments give it; undefined for a record without a SKU. */
  values: (EnrichedValues | undefined)[];
  /** HTTP requests it took, retries included. */
  attempts: number;
}

export interface Enricher {
  (
    records: readonly unknown[],
    step: { seq: number; ctx: WalkContext; signal: AbortSignal; values: Readonly<Record<string, string>> },
  ): Promise<StepEnrichment>;
  /** What each entry maps, for field coverage (coverage.ts). */
  readonly mapped: readonly EnrichMapping[];
}

/** Compiles the definition's `enrich` entries once; undefined when it has none. */
export function createEnricher(
  transport: Transport,
  def: ConnectorDefinition,
  mapping: CompiledFields,
): Enricher | undefined {
  if (def.enrich === undefined) return undefined;
  const entries: CompiledEnrichment[] = def.enrich.map((e, index) => ({
    index,
    def: e,
    key: e.key === undefined ? undefined : compileFieldSpec(e.key),
    fields: Object.entries(e.fields ?? {}).flatMap(([name, spec]) =>
      spec === undefined ? [] : [[name as keyof EnrichedValues["fields"], compileFieldSpec(spec)]],
    ),
    attributes: Object.entries(e.attributes ?? {}).map(([name, spec]) => [name, compileFieldSpec(spec)]),
  }));
  const separator = def.skus?.separator ?? ",";

  const concurrency = def.rateLimit.maxConcurrency;

  const enrich = async (
    records: readonly unknown[],
    step: Parameters<Enricher>[1],
  ): Promise<StepEnrichment> => {
    const skus = records.map((r) => skuOfRecord(r, mapping));
    const unique = [...new Set(skus.filter((s): s is string => s !== undefined))];
    const bySku = new Map<string, EnrichedValues>(unique.map((s) => [s, { fields: {}, attributes: {} }]));
    const jobs = entries.flatMap((entry) =>
      inBatches(unique, entry.def.batch).map((batch) => ({ entry, batch })),
    );
    const { answers, attempts } = await fetchAll(jobs, concurrency, step.signal, (job, signal) =>
      fetchEnrichment(transport, def, job.entry, job.batch, separator, { ...step, signal }),
    );
    let job = 0;
    for (const entry of entries) {
      const found = new Map<string, object>();
      // Answers are read in batch order whatever order they arrived in: the first record of a SKU wins.
      for (const batch of inBatches(unique, entry.def.batch)) {
        for (const record of (answers[job++] as unknown[] | undefined) ?? []) {
          if (record === null || typeof record !== "object" || Array.isArray(record)) continue;
          const sku = entry.key === undefined ? batch[0] : skuOfValue(record, entry.key);
          if (sku !== undefined && !found.has(sku)) found.set(sku, record);
        }
      }
      for (const sku of unique) {
        const record = found.get(sku);
        if (record === undefined && entry.def.onMissing === "fail") {
          throw new IngestionError(
            "CONTRACT",
            `enrich.${entry.index}: no record for SKU ${JSON.stringify(sku)} (onMissing: "fail")`,
            { attempts },
          );
        }
        const values = bySku.get(sku) as EnrichedValues;
        for (const [name, field] of entry.fields) values.fields[name] = { field, record };
        for (const [name, field] of entry.attributes) values.attributes[name] = { field, record };
      }
    }
    return { values: skus.map((s) => (s === undefined ? undefined : bySku.get(s))), attempts };
  };
  return Object.assign(enrich, {
    mapped: entries.map((e) => ({ fields: e.fields, attributes: e.attributes })),
  });
}

/**
 * Runs `fetch` for every job, at most `concurrency` at once (the supplier's
 * `rateLimit.maxConcurrency`; the rate limiter still paces each request). The first
 * failure aborts the requests still in flight and is thrown, carrying the attempts of
 * every request made; answers come back in job order.
 */
async function fetchAll<J>(
  jobs: readonly J[],
  concurrency: number,
  outer: AbortSignal,
  fetch: (job: J, signal: AbortSignal) => Promise<{ records: unknown[]; attempts: number }>,
): Promise<{ answers: unknown[][]; attempts: number }> {
  const answers: unknown[][] = new Array(jobs.length);
  const stop = new AbortController();
  const signal = AbortSignal.any([outer, stop.signal]);
  let attempts = 0;
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async () => {
    while (failure === undefined && next < jobs.length) {
      const index = next++;
      try {
        const answer = await fetch(jobs[index] as J, signal);
        attempts += answer.attempts;
        answers[index] = answer.records;
      } catch (err) {
        attempts += (isIngestionError(err) ? err.attempts : undefined) ?? 0;
        if (failure === undefined) {
          failure = { error: err };
          stop.abort(new Error("another enrichment request failed"));
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, jobs.length) }, worker));
  if (failure !== undefined) {
    const err = failure.error;
    if (isIngestionError(err)) err.attempts = attempts;
    throw err;
  }
  return { answers, attempts };
}

async function fetchEnrichment(
  transport: Transport,
  def: ConnectorDefinition,
  entry: CompiledEnrichment,
  batch: string[],
  separator: string,
  step: Parameters<Enricher>[1],
): Promise<{ records: unknown[]; attempts: number }> {
  const values = { ...step.values, ...batchValues(batch, separator) };
  const request = entry.def.request;
  const body = requestBody(request, values);
  try {
    const { value, attempts } = await transport.fetchPage({
      url: requestUrl(def.baseUrl, request, values, separator),
      seq: step.seq,
      ctx: step.ctx,
      signal: step.signal,
      headers: { ...request.headers },
      method: request.method,
      ...(body ? { body } : {}),
      decode: (res) =>
        decodeJsonPage(res.body, res.contentType, {
          maxDepth: def.maxJsonDepth,
          maxRecords: def.maxRecordsPerPage,
          recordsPath: entry.def.records.path,
          objectIsRecord: true,
        }).records,
    });
    return { records: value, attempts };
  } catch (err) {
    // A 404 means none of the batch's SKUs are known there (docs/connectors.md, Enrichment): not an error.
    if (isIngestionError(err) && err.code === "HTTP_404") return { records: [], attempts: err.attempts ?? 1 };
    if (isIngestionError(err)) err.message = `enrich.${entry.index}: ${err.message}`;
    throw err;
  }
}
