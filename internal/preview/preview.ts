/**
 * `supplier-sync preview NAME [--steps N] [--json]` (README.md, Command line): walks the
 * first N steps of one connector the way a run would (same transport: rate
 * limit, retries, auth, origin pinning) and reports what it would store.
 *
 * Invariants: no lease is taken and the database is never opened (nothing
 * here imports the store); step N+1 is never requested (the walk runs without
 * prefetch); every byte of the report passes through the redaction registry,
 * and request URLs have their secret query parameters replaced before that.
 */
import type { ConnectorDefinition } from "../config/connector-schema.js";
import { type ConnectorModule, createConnector, type RequestEvent } from "../connectors/index.js";
import type { Offer, Reject } from "../ingestion/ports.js";
import { createMetrics } from "../observability/metrics.js";
import type { Clock } from "../platform/clock.js";
import { errorMessage, isIngestionError } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";
import type { SecretRegistry } from "../platform/redact.js";

export interface PreviewStep {
  seq: number;
  requests: RequestEvent[];
  offers: Offer[];
  rejects: Reject[];
  /** Why the step failed: its error code and (redacted) message. */
  error?: { code: string; message: string };
  /** More rejects than `maxRejectRatio` allows: a run would fail this step `CONTRACT`. */
  overRejectRatio?: boolean;
}

export interface PreviewReport {
  supplier: string;
  steps: PreviewStep[];
  /** True when the walk reached the end of the catalog within the steps shown. */
  complete: boolean;
}

export interface PreviewOptions {
  supplier: string;
  definition: ConnectorDefinition;
  /** The default export of a `"module": "./<file>.mjs"`, as `loadConnector` imported it. */
  module?: ConnectorModule | undefined;
  connectorsDir: string;
  readSecretEnv: (name: string) => string | undefined;
  /** The app's redaction registry; the connector registers the secrets it resolves in it. */
  secrets: SecretRegistry;
  steps: number;
  log: Logger;
  clock?: Clock;
}

/** Walks up to `steps` steps. `ok` is false when a step failed or went over `maxRejectRatio`. */
export async function previewConnector(
  options: PreviewOptions,
): Promise<{ report: PreviewReport; ok: boolean }> {
  let pending: RequestEvent[] = [];
  const connector = createConnector({
    supplier: options.supplier,
    definition: options.definition,
    module: options.module,
    connectorsDir: options.connectorsDir,
    readSecretEnv: options.readSecretEnv,
    secrets: options.secrets,
    log: options.log,
    metrics: createMetrics({ processMetrics: false }),
    ...(options.clock ? { clock: options.clock } : {}),
    observer: (event) => pending.push(event),
  });
  const report: PreviewReport = { supplier: options.supplier, steps: [], complete: false };
  let ok = true;
  const stop = new AbortController();
  try {
    const walk = connector.walk({ signal: stop.signal, log: options.log, runId: "preview", prefetch: false });
    let hasNext = true;
    try {
      for await (const page of walk) {
        const total = page.offers.length + page.rejects.length;
        const step: PreviewStep = {
          seq: page.seq,
          requests: pending,
          offers: page.offers,
          rejects: page.rejects,
        };
        pending = [];
        if (total > 0 && page.rejects.length / total > options.definition.maxRejectRatio) {
          step.overRejectRatio = true;
          ok = false;
        }
        report.steps.push(step);
        hasNext = page.hasNext ?? true;
        if (report.steps.length >= options.steps) break;
      }
      report.complete = report.steps.length < options.steps || !hasNext;
    } catch (err) {
      ok = false;
      report.steps.push({
        seq: (report.steps[report.steps.length - 1]?.seq ?? 0) + 1,
        requests: pending,
        offers: [],
        rejects: [],
        error: {
          code: isIngestionError(err) ? err.code : "INTERNAL",
          message: options.secrets.safeText(errorMessage(err), 1_000),
        },
      });
    }
  } finally {
    stop.abort();
    await connector.close();
  }
  return { report, ok };
}

function cell(value: unknown): string {
  if (value === null || value === undefined) return "";
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > 40 ? `${text.slice(0, 39)}…` : text;
}

function table(rows: Record<string, unknown>[]): string[] {
  const columns = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cells = [columns, ...rows.map((r) => columns.map((c) => cell(r[c])))];
  const widths = columns.map((_, i) => Math.max(...cells.map((row) => (row[i] ?? "").length)));
  return cells.map((row) =>
    row
      .map((v, i) => v.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd(),
  );
}

/** Rows of offers shown per step in the text report. */
export const PREVIEW_TABLE_ROWS = 20;

/**
 * The report for people: per step its requests, the first offers in a table, every reject.
 * Scrubbed with `secrets`, the registry the walk ({@link previewConnector}) registered its secrets in.
 */
export function formatPreview(report: PreviewReport, asJson: boolean, secrets: SecretRegistry): string {
  if (asJson) return secrets.safeText(JSON.stringify(report, null, 2), Number.POSITIVE_INFINITY);
  const lines: string[] = [`preview of ${report.supplier}`];
  for (const step of report.steps) {
    lines.push("", `step ${step.seq}`);
    for (const r of step.requests) {
      lines.push(
        `  ${r.method} ${r.url} -> ${r.status ?? "no response"}, ${r.bytes} bytes, ${Math.round(r.ms)} ms${r.error ? ` (${r.error})` : ""}`,
      );
    }
    if (step.error) lines.push(`  failed ${step.error.code}: ${step.error.message}`);
    if (!step.error) {
      lines.push(`  ${step.offers.length} offers, ${step.rejects.length} rejects`);
      if (step.offers.length > 0) {
        const shown = step.offers.slice(0, PREVIEW_TABLE_ROWS) as unknown as Record<string, unknown>[];
        for (const line of table(shown)) lines.push(`    ${line}`);
        if (step.offers.length > shown.length)
          lines.push(`    … and ${step.offers.length - shown.length} more`);
      }
      for (const reject of step.rejects) lines.push(`  reject: ${reject.reason}`);
      if (step.overRejectRatio)
        lines.push("  more rejects than maxRejectRatio: a run would fail this step CONTRACT");
    }
  }
  lines.push(
    "",
    report.complete
      ? "the walk is complete: the end of the catalog was reached"
      : "the walk would go on: more steps follow",
  );
  return secrets.safeText(lines.join("\n"), Number.POSITIVE_INFINITY);
}
