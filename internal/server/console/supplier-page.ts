/**
 * `GET /suppliers/<name>` (docs/operations.md, Operator console): one supplier's
 * readiness, pause state, pending triggers and held items, three charts of its last
 * {@link CHART_RUNS} runs (duration, records changed, freshness), and its whole run
 * history newest first, filtered by state and trigger and paged by keyset (links
 * `?before=<id>` / `?after=<id>`, the filters kept). Without JavaScript: the filters
 * are a plain GET form. The charts are inline SVG; every number placed in them is
 * computed here, and every text goes through {@link html} or `escapeHtml`.
 */
import type { SupplierConfig } from "../../config/types.js";
import { formatElapsed } from "../../platform/duration.js";
import type { SecretRegistry } from "../../platform/redact.js";
import {
  CHART_RUNS,
  type ChartRun,
  HELD_COUNT_CAP,
  MAX_HELD_SHOWN,
  MAX_TRIGGERS_SHOWN,
  RUN_STATES,
  RUN_TRIGGERS,
  type RunListFilter,
  type SupplierDetail,
} from "../../store/console-supplier-queries.js";
import type { SupplierReadiness } from "../readiness.js";
import { escapeHtml, Html, html } from "./html.js";
import { type ConsoleInstance, formatSpan, formatTime, page, stateBadge } from "./layout.js";

export interface SupplierPageInput {
  supplier: SupplierConfig;
  detail: SupplierDetail;
  filter: RunListFilter;
  readiness: SupplierReadiness;
  instance: ConsoleInstance;
  secrets: SecretRegistry;
  nowMs: number;
}

/** The query string of a list page: the filters, and a cursor when given. */
export function listQuery(filter: RunListFilter, cursor?: { before?: number; after?: number }): string {
  const params = new URLSearchParams();
  for (const s of filter.states) params.append("state", s);
  for (const t of filter.triggers) params.append("trigger", t);
  if (cursor?.before !== undefined) params.set("before", String(cursor.before));
  if (cursor?.after !== undefined) params.set("after", String(cursor.after));
  const text = params.toString();
  return text === "" ? "" : `?${text}`;
}

export function supplierPath(name: string): string {
  return `/suppliers/${encodeURIComponent(name)}`;
}

const JSON_MAX = 400;

export function renderSupplier(input: SupplierPageInput): Html {
  const { supplier, detail, filter, readiness, secrets } = input;
  const base = supplierPath(supplier.name);
  const control = detail.control;
  const paused = control?.pausedAt != null;
  const thresholdMs = readiness.threshold_seconds * 1000;
  const filtered = filter.states.length > 0 || filter.triggers.length > 0;
  const { runs, older, newer } = detail.page;

  const status = html`<dl class="cols narrow" id="status">
<dt>Readiness</dt><dd data-status="${readiness.status}">${stateBadge(readiness.status)} last success ${formatTime(
    readiness.last_success === null ? null : new Date(readiness.last_success),
  )}${
    readiness.age_seconds === null
      ? html` <span class="muted">(never; threshold ${formatElapsed(thresholdMs)})</span>`
      : html` <span class="muted">(${formatElapsed(readiness.age_seconds * 1000)} ago; threshold ${formatElapsed(thresholdMs)})</span>`
  }</dd>
<dt>Schedule</dt><dd>every ${formatElapsed(supplier.intervalMs)}</dd>
<dt>Pause</dt><dd data-paused="${paused ? "yes" : "no"}">${
    paused && control
      ? html`<span class="badge paused">paused</span> since ${formatTime(control.pausedAt)}${
          control.pausedBy ? html` by <b>${control.pausedBy}</b>` : ""
        }${control.pauseReason ? html`: ${secrets.safeText(control.pauseReason, 500)}` : ""}`
      : html`<span class="muted">not paused: ticks run on schedule</span>`
  }</dd>
<dt>Pending triggers</dt><dd data-pending-triggers="${detail.pendingTriggers.length}">${
    detail.pendingTriggers.length === 0
      ? html`<span class="muted">none</span>`
      : html`${detail.pendingTriggers.map(
          (p, i) => html`${i > 0 ? ", " : ""}${formatTime(p.requestedAt)} by <b>${p.requestedBy}</b>`,
        )}${detail.pendingTriggers.length >= MAX_TRIGGERS_SHOWN ? html` <span class="muted">(first ${MAX_TRIGGERS_SHOWN})</span>` : ""}`
  }</dd>
<dt>Held items</dt><dd data-held="${detail.heldTotal}">${
    detail.heldTotal === 0
      ? html`<span class="muted">none</span>`
      : html`<a href="#held"><span class="badge held">held</span> ${heldCount(detail.heldTotal)} undecided</a>`
  }</dd>
</dl>`;

  const held =
    detail.held.length === 0
      ? ""
      : html`<h2 id="held">Held by the guards (${heldCount(detail.heldTotal)})</h2>
<table id="held-items" class="wide">
<thead><tr><th>SKU / field</th><th>Kind</th><th>Stored</th><th>Proposed</th><th>Reason</th><th>Run</th><th>Held at</th></tr></thead>
<tbody>
${detail.held.map(
  (h) =>
    html`<tr data-held-id="${h.id}"><td class="code">${h.sku ?? h.field ?? html`<span class="muted">—</span>`}</td><td>${h.kind}</td><td class="code wrap">${jsonText(h.stored, secrets)}</td><td class="code wrap">${jsonText(h.proposed, secrets)}</td><td class="wrap">${secrets.safeText(h.reason, 500)}</td><td><a href="/runs/${h.runId}">#${h.runId}</a></td><td>${formatTime(h.createdAt)}</td></tr>`,
)}
</tbody>
</table>
${
  detail.heldTotal > detail.held.length
    ? html`<p class="note">Showing ${MAX_HELD_SHOWN} of ${heldCount(detail.heldTotal)} (table ingestion_held, state = 'held').</p>`
    : ""
}`;

  const charts = html`<h2 id="charts-title">Last ${detail.chart.length} runs${
    detail.chart.length === CHART_RUNS ? "" : html` <span class="muted">(of up to ${CHART_RUNS})</span>`
  }</h2>
${
  detail.chart.length === 0
    ? html`<p class="muted">No run yet.</p>`
    : html`<div class="charts">
${durationChart(detail.chart, input.nowMs)}
${changedChart(detail.chart)}
${freshnessChart(detail.chart, detail.successBeforeChart, thresholdMs)}
</div>`
}`;

  const option = (value: string, chosen: readonly string[]) =>
    html`<option value="${value}"${chosen.includes(value) ? html` selected` : ""}>${value}</option>`;
  const form = html`<form method="get" action="${base}" class="filters" id="filters">
<label>State <select name="state"><option value="">any</option>${RUN_STATES.map((s) => option(s, filter.states))}</select></label>
<label>Trigger <select name="trigger"><option value="">any</option>${RUN_TRIGGERS.map((t) => option(t, filter.triggers))}</select></label>
<button type="submit">Filter</button>
${filtered ? html`<a href="${base}">clear filters</a>` : ""}
</form>`;

  const pager = html`<nav class="pager">${
    newer === null
      ? html`<span class="muted">newest</span>`
      : html`<a href="${base}${listQuery(filter)}" data-page="newest">« newest</a> <a href="${base}${listQuery(filter, { after: newer })}" rel="prev" data-page="newer">‹ newer</a>`
  } ${
    older === null
      ? html`<span class="muted">oldest</span>`
      : html`<a href="${base}${listQuery(filter, { before: older })}" rel="next" data-page="older">older ›</a>`
  }</nav>`;

  const table =
    runs.length === 0
      ? html`<p class="muted" id="no-runs">${filtered ? "No run matches these filters." : "No run yet."}</p>`
      : html`<table id="runs" class="wide">
<thead><tr><th class="num">Run</th><th>State</th><th>Trigger</th><th>Started</th><th class="num">Duration</th><th>Error</th><th class="num">Pages</th><th class="num">Seen</th><th class="num">New</th><th class="num">Changed</th><th class="num">Same</th><th class="num">Rejected</th><th class="num">Delisted</th><th class="num">Held</th></tr></thead>
<tbody>
${runs.map(
  (r) =>
    html`<tr data-run="${r.id}"><td class="num"><a href="/runs/${r.id}">#${r.id}</a></td><td>${stateBadge(r.state)}</td><td data-trigger>${r.trigger}</td><td>${formatTime(r.startedAt)}</td><td class="num">${formatSpan(r.startedAt, r.finishedAt)}</td><td>${
      r.errorCode === null
        ? html`<span class="muted">—</span>`
        : html`<span class="err code" title="${secrets.safeText(r.errorMessage ?? "", 300)}">${r.errorCode}</span>`
    }</td><td class="num">${r.counts.pages}</td><td class="num">${r.counts.recordsSeen}</td><td class="num">${r.counts.recordsInserted}</td><td class="num">${r.counts.recordsUpdated}</td><td class="num">${r.counts.recordsUnchanged}</td><td class="num">${r.counts.recordsRejected}</td><td class="num">${r.counts.recordsDelisted}</td><td class="num">${r.counts.recordsHeld}</td></tr>`,
)}
</tbody>
</table>`;

  const body = html`<p><a href="/">← all suppliers</a></p>
<h2 id="supplier" data-supplier="${supplier.name}">${supplier.name} ${stateBadge(readiness.status)}${
    paused ? html` <span class="badge paused">paused</span>` : ""
  }</h2>
${status}
${held}
${charts}
<h2 id="runs-title">Runs</h2>
${form}
${pager}
${table}
${runs.length > 0 ? pager : ""}`;
  return page(supplier.name, input.instance, "ok", body);
}

function heldCount(n: number): string {
  return n >= HELD_COUNT_CAP ? `${HELD_COUNT_CAP} or more` : String(n);
}

function jsonText(value: unknown, secrets: SecretRegistry): Html {
  if (value === null || value === undefined) return html`<span class="muted">—</span>`;
  return html`${secrets.safeText(JSON.stringify(value), JSON_MAX)}`;
}

/** The page for a name that is no enabled supplier. */
export function renderSupplierNotFound(name: string, instance: ConsoleInstance): Html {
  return page(
    "Supplier not found",
    instance,
    "ok",
    html`<p><a href="/">← all suppliers</a></p><h2>Not found</h2><p>No enabled supplier is named “${name.slice(0, 100)}”.</p>`,
  );
}

/** The page for a query string the supplier page cannot read: names the parameter and its value. */
export function renderBadQuery(name: string, problem: string, instance: ConsoleInstance): Html {
  return page(
    "Bad request",
    instance,
    "ok",
    html`<p><a href="${supplierPath(name)}">← ${name}</a></p><h2>Bad request</h2><p class="banner" id="bad-query">${problem}</p>`,
  );
}

// ---- charts -----------------------------------------------------------------

const W = 400;
const H = 130;
const LEFT = 52;
const RIGHT = 6;
const TOP = 8;
const BOTTOM = 18;
const PLOT_W = W - LEFT - RIGHT;
const PLOT_H = H - TOP - BOTTOM;
const STATE_CLASS: Record<string, string> = { succeeded: "s", partial: "p", failed: "f", running: "r" };

interface Bar {
  run: ChartRun;
  value: number | null;
  label: string;
}

/** A rounded-up axis maximum: 1, 2 or 5 times a power of ten. */
function niceMax(max: number): number {
  if (!(max > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 5, 10]) if (m * power >= max) return m * power;
  return 10 * power;
}

const TIME_STEPS_MS = [
  1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000,
  600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 10_800_000, 21_600_000, 43_200_000, 86_400_000,
  172_800_000, 432_000_000, 864_000_000,
];

/** A rounded-up axis maximum for milliseconds: a round duration (`5m`, `6h`, `2d`). */
function niceTimeMax(max: number): number {
  return TIME_STEPS_MS.find((step) => step >= max) ?? niceMax(max);
}

/** One chart: a frame, the y axis labels, one bar (or point) per run, oldest left. */
function chart(
  id: string,
  title: string,
  bars: Bar[],
  axis: (v: number) => string,
  kind: "bars" | "line",
  extra: { thresholdValue?: number; thresholdLabel?: string; time?: boolean } = {},
): Html {
  const values = bars.map((b) => b.value ?? 0);
  const highest = Math.max(...values, extra.thresholdValue ?? 0);
  const top = extra.time ? niceTimeMax(highest) : niceMax(highest);
  const step = PLOT_W / CHART_RUNS;
  const barW = Math.max(1, step - 1);
  const y = (v: number) => TOP + PLOT_H - (Math.min(v, top) / top) * PLOT_H;
  const offset = CHART_RUNS - bars.length;
  let marks = "";
  let points = "";
  bars.forEach((b, i) => {
    const x = LEFT + (offset + i) * step;
    const cls = STATE_CLASS[b.run.state] ?? "e";
    const tip = `<title>#${Math.trunc(b.run.id)} ${escapeHtml(b.run.state)} · ${escapeHtml(b.label)}</title>`;
    if (b.value === null) return;
    if (kind === "bars") {
      const h = Math.max(1, TOP + PLOT_H - y(b.value));
      marks += `<a href="/runs/${Math.trunc(b.run.id)}"><rect class="${cls}" x="${x.toFixed(1)}" y="${(TOP + PLOT_H - h).toFixed(1)}" width="${barW.toFixed(1)}" height="${h.toFixed(1)}">${tip}</rect></a>`;
    } else {
      const cx = x + barW / 2;
      const cy = y(b.value);
      points += `${cx.toFixed(1)},${cy.toFixed(1)} `;
      marks += `<a href="/runs/${Math.trunc(b.run.id)}"><circle class="${cls}" cx="${cx.toFixed(1)}" cy="${cy.toFixed(1)}" r="2.5">${tip}</circle></a>`;
    }
  });
  const threshold =
    extra.thresholdValue === undefined
      ? ""
      : `<line class="threshold" x1="${LEFT}" x2="${W - RIGHT}" y1="${y(extra.thresholdValue).toFixed(1)}" y2="${y(extra.thresholdValue).toFixed(1)}"/><text class="axis" x="${W - RIGHT - 2}" y="${(y(extra.thresholdValue) - 3).toFixed(1)}" text-anchor="end">${escapeHtml(extra.thresholdLabel ?? "")}</text>`;
  const line = points === "" ? "" : `<polyline class="trend" points="${points.trim()}"/>`;
  const frame = `<line class="frame" x1="${LEFT}" x2="${W - RIGHT}" y1="${TOP + PLOT_H}" y2="${TOP + PLOT_H}"/><line class="frame" x1="${LEFT}" x2="${LEFT}" y1="${TOP}" y2="${TOP + PLOT_H}"/>`;
  const labels = `<text class="axis" x="${LEFT - 4}" y="${TOP + 8}" text-anchor="end">${escapeHtml(axis(top))}</text><text class="axis" x="${LEFT - 4}" y="${TOP + PLOT_H}" text-anchor="end">0</text><text class="axis" x="${LEFT}" y="${H - 4}">older</text><text class="axis" x="${W - RIGHT}" y="${H - 4}" text-anchor="end">newest</text>`;
  return new Html(
    `<figure class="chart" id="${id}"><figcaption>${escapeHtml(title)}</figcaption><svg viewBox="0 0 ${W} ${H}" role="img" aria-label="${escapeHtml(`${title}, last ${bars.length} runs`)}">${frame}${labels}${threshold}${line}${marks}</svg></figure>`,
  );
}

function durationChart(runs: readonly ChartRun[], nowMs: number): Html {
  const bars = [...runs].reverse().map((run) => {
    const ms = (run.finishedAt?.getTime() ?? nowMs) - run.startedAt.getTime();
    return {
      run,
      value: Math.max(0, ms),
      label: run.finishedAt ? formatElapsed(ms) : `running ${formatElapsed(ms)}`,
    };
  });
  return chart("chart-duration", "Run duration", bars, (v) => formatElapsed(v), "bars", { time: true });
}

function changedChart(runs: readonly ChartRun[]): Html {
  const bars = [...runs].reverse().map((run) => ({
    run,
    value: run.changed,
    label: `${run.changed} records changed (new + changed + delisted)`,
  }));
  return chart("chart-changed", "Records changed", bars, (v) => String(v), "bars");
}

/**
 * Freshness after each finished run: how old the supplier's data was when the run
 * ended (0 after a success; since the last success otherwise). Before any success
 * there is no point. The dashed line is the stale threshold (2 × interval).
 */
export function freshnessAfterRuns(
  runs: readonly ChartRun[],
  successBefore: Date | null,
): { run: ChartRun; ageMs: number | null }[] {
  let last = successBefore?.getTime() ?? null;
  return [...runs].reverse().map((run) => {
    if (run.finishedAt === null) return { run, ageMs: null };
    if (run.state === "succeeded") last = run.finishedAt.getTime();
    return { run, ageMs: last === null ? null : Math.max(0, run.finishedAt.getTime() - last) };
  });
}

function freshnessChart(runs: readonly ChartRun[], successBefore: Date | null, thresholdMs: number): Html {
  const bars = freshnessAfterRuns(runs, successBefore).map(({ run, ageMs }) => ({
    run,
    value: ageMs,
    label: ageMs === null ? "no success yet" : `data ${formatElapsed(ageMs)} old after it`,
  }));
  return chart("chart-freshness", "Data age after each run", bars, (v) => formatElapsed(v), "line", {
    thresholdValue: thresholdMs,
    thresholdLabel: `stale at ${formatElapsed(thresholdMs)}`,
    time: true,
  });
}
