/**
 * `supplier-sync preview NAME [--steps N] [--json]` (README.md, Command line): walks the
 * first N steps of one connector the way a run would (same transport: rate
 * limit, retries, auth, origin pinning) and reports what it would store.
 *
 * Invariants: no lease is taken and nothing is written; the database is only read,
 * through the injected `checkGuards` (what the guards would hold, docs/connectors.md,
 * Guards), when the caller has one; step N+1 is never requested (the walk runs without
 * prefetch); every byte of the report passes through the redaction registry,
 * and request URLs have their secret query parameters replaced before that.
 */

import { type ConnectorModule, createConnector, type RequestEvent } from "../connectors/index.js";
import type { ConnectorDefinition } from "../connectors/schema/connector-schema.js";
import type { FieldCoverage, Offer, Reject } from "../ingestion/ports.js";
import { rejectRatioExceeded } from "../ingestion/reject-ratio.js";
import { createMetrics } from "../observability/metrics.js";
import type { Clock } from "../platform/clock.js";
import { errorMessage, isIngestionError } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";
import type { SecretRegistry } from "../platform/redact.js";
import type { GuardPreview } from "../store/guard-preview.js";
import { coverageLines } from "./coverage-lines.js";

export interface PreviewStep {
  seq: number;
  requests: RequestEvent[];
  offers: Offer[];
  rejects: Reject[];
  /** Per mapped field, how many of the step's records had a value (docs/connectors.md, Field coverage). */
  coverage?: FieldCoverage[];
  /** Why the step failed: its error code and (redacted) message. */
  error?: { code: string; message: string };
  /** More rejects than `maxRejectRatio` allows: a run would fail this step `CONTRACT`. */
  overRejectRatio?: boolean;
  /** A workbook's sheet and the header row found (docs/feeds.md, Workbooks). */
  workbook?: { sheet: string; headerRow: number | undefined; header: string[] };
}

export interface PreviewReport {
  supplier: string;
  steps: PreviewStep[];
  /** True when the walk reached the end of the catalog within the steps shown. */
  complete: boolean;
  /** What the guards would hold, read against the database; or why that was not checked. */
  guards: ({ checked: true } & GuardPreview) | { checked: false; reason: string };
}

/** The guard check `preview` is given when it can read the database. */
export type GuardCheck = (
  steps: { seq: number; offers: Offer[]; coverage?: FieldCoverage[] | undefined }[],
  complete: boolean,
) => Promise<GuardPreview>;

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
  /** The supplier's schedule zone, when `SUPPLIER_SYNC_SUPPLIERS` names one (`{date:…}` reads today there). */
  timeZone?: string | undefined;
  /** Reads what the guards would hold (absent: `DATABASE_URL` is not set). */
  checkGuards?: GuardCheck | undefined;
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
    timeZone: options.timeZone,
    observer: (event) => pending.push(event),
  });
  const report: PreviewReport = {
    supplier: options.supplier,
    steps: [],
    complete: false,
    guards: { checked: false, reason: "DATABASE_URL is not set" },
  };
  const walked: Parameters<GuardCheck>[0] = [];
  let ok = true;
  const stop = new AbortController();
  try {
    // The walk's log carries the supplier, as a run's does (a preview has no run id).
    const log = options.log.child({ supplier: options.supplier });
    const walk = connector.walk({ signal: stop.signal, log, runId: "preview", prefetch: false });
    let hasNext = true;
    try {
      for await (const page of walk) {
        const step: PreviewStep = {
          seq: page.seq,
          requests: pending,
          offers: page.offers,
          rejects: page.rejects,
          ...(page.coverage ? { coverage: page.coverage } : {}),
          ...(page.workbook ? { workbook: page.workbook } : {}),
        };
        pending = [];
        walked.push({ seq: page.seq, offers: page.offers, coverage: page.coverage });
        report.steps.push(step);
        const overRatio = rejectRatioExceeded(page, options.definition.maxRejectRatio);
        if (overRatio !== null) {
          // A run fails this step CONTRACT and goes no further: neither does the preview.
          step.overRejectRatio = true;
          step.error = { code: "CONTRACT", message: overRatio };
          ok = false;
          break;
        }
        hasNext = page.hasNext ?? true;
        if (report.steps.length >= options.steps) break;
      }
      report.complete = ok && (report.steps.length < options.steps || !hasNext);
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
  report.guards = await guardVerdict(options, walked, report.complete);
  return { report, ok };
}

async function guardVerdict(
  options: PreviewOptions,
  walked: Parameters<GuardCheck>[0],
  complete: boolean,
): Promise<PreviewReport["guards"]> {
  if (options.definition.guards === false)
    return { checked: false, reason: "the connector turns guards off" };
  if (!options.checkGuards) return { checked: false, reason: "DATABASE_URL is not set" };
  try {
    return { checked: true, ...(await options.checkGuards(walked, complete)) };
  } catch (err) {
    return {
      checked: false,
      reason: `the database could not be read: ${options.secrets.safeText(errorMessage(err), 300)}`,
    };
  }
}

/** Held offers listed per step in the text report; `--json` has them all. */
const GUARD_LINES = 20;

function guardLines(guards: PreviewReport["guards"]): string[] {
  if (!guards.checked) return [`guards: not checked (${guards.reason})`];
  const lines = ["guards (checked against the database):"];
  for (const o of guards.offers.slice(0, GUARD_LINES))
    lines.push(`  would hold ${o.sku} (step ${o.seq}): ${o.reason}`);
  if (guards.offers.length > GUARD_LINES)
    lines.push(`  … and ${guards.offers.length - GUARD_LINES} more offers`);
  for (const f of guards.fields) lines.push(`  would hold the field (step ${f.seq}): ${f.reason}`);
  if (guards.delist === null)
    lines.push("  delisting: not known (the walk did not reach the end of the catalog)");
  else if (guards.delist.held) lines.push(`  would hold the delisting: ${guards.delist.reason}`);
  else
    lines.push(
      `  delisting: ${guards.delist.missing} of ${guards.delist.listed} listed offers would be delisted`,
    );
  if (guards.offers.length === 0 && guards.fields.length === 0 && !guards.delist?.held) {
    lines.push("  nothing would be held");
  }
  return lines;
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

/** How the walk ended: complete, stopped by a failed step, or going on past the steps shown. */
function walkEnd(report: PreviewReport): string {
  const failed = report.steps.find((s) => s.error !== undefined);
  if (failed?.error)
    return `the walk stopped: step ${failed.seq} failed ${failed.error.code}, a run would stop there too`;
  return report.complete
    ? "the walk is complete: the end of the catalog was reached"
    : "the walk would go on: more steps follow";
}

/** Rows of offers (and rejects) shown per step in the text report; `--json` has them all. */
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
      if (r.answer !== undefined) lines.push(`    the supplier answered: ${r.answer}`);
    }
    if (step.workbook) {
      const w = step.workbook;
      lines.push(
        `  workbook sheet ${JSON.stringify(w.sheet)}, header ${w.headerRow === undefined ? "none (columns by letter)" : `row ${w.headerRow}`}${w.header.length > 0 ? `: ${w.header.map((h) => JSON.stringify(h)).join(" | ")}` : ""}`,
      );
    }
    if (step.error && !step.overRejectRatio) lines.push(`  failed ${step.error.code}: ${step.error.message}`);
    else {
      lines.push(`  ${step.offers.length} offers, ${step.rejects.length} rejects`);
      lines.push(...coverageLines(step.coverage ?? []));
      if (step.offers.length > 0) {
        const shown = step.offers.slice(0, PREVIEW_TABLE_ROWS) as unknown as Record<string, unknown>[];
        for (const line of table(shown)) lines.push(`    ${line}`);
        if (step.offers.length > shown.length)
          lines.push(`    … and ${step.offers.length - shown.length} more`);
      }
      for (const reject of step.rejects.slice(0, PREVIEW_TABLE_ROWS))
        lines.push(`  reject: ${reject.reason}`);
      if (step.rejects.length > PREVIEW_TABLE_ROWS)
        lines.push(`  … and ${step.rejects.length - PREVIEW_TABLE_ROWS} more rejects`);
      if (step.overRejectRatio)
        lines.push("  more rejects than maxRejectRatio: a run would fail this step CONTRACT");
    }
  }
  lines.push("", walkEnd(report), "", ...guardLines(report.guards));
  return secrets.safeText(lines.join("\n"), Number.POSITIVE_INFINITY);
}
