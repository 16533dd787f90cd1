/**
 * `GET /`: one row per enabled supplier (DESIGN §8) with its readiness status, last
 * success and age against the threshold, the last run, and a strip of its last
 * {@link STRIP_RUNS} runs drawn as inline SVG, each mark a link to the run's page.
 */
import type { SupplierConfig } from "../../config/types.js";
import { formatElapsed } from "../../platform/duration.js";
import { safeText } from "../../platform/redact.js";
import { type RunMark, STRIP_RUNS, type SupplierOverview } from "../../store/console-queries.js";
import { evaluateSupplier, type SupplierFreshness } from "../readiness.js";
import { type Html, html } from "./html.js";
import { type ConsoleInstance, formatSpan, formatTime, page, stateBadge } from "./layout.js";

export interface OverviewInput {
  suppliers: readonly SupplierConfig[];
  /** Per supplier, as read by `readOverview`; undefined when the database did not answer. */
  overview: ReadonlyMap<string, SupplierOverview> | undefined;
  /** Last success per supplier when `overview` is missing (the freshness cache's last known). */
  fallbackLastSuccess: ReadonlyMap<string, Date | null>;
  database: "ok" | "unreachable";
  instance: ConsoleInstance;
  nowMs: number;
}

const MARK_WIDTH = 8;
const MARK_GAP = 2;
const MARK_HEIGHT = 16;

export function renderOverview(input: OverviewInput): Html {
  const counts: Record<SupplierFreshness, number> = { ok: 0, stale: 0, none: 0 };
  const rows = input.suppliers.map((supplier) => {
    const o = input.overview?.get(supplier.name);
    const lastSuccess = o ? o.lastSuccess : (input.fallbackLastSuccess.get(supplier.name) ?? null);
    const readiness = evaluateSupplier(supplier, lastSuccess, input.nowMs);
    counts[readiness.status] += 1;
    const ageMs = readiness.age_seconds === null ? null : readiness.age_seconds * 1000;
    const thresholdMs = readiness.threshold_seconds * 1000;
    const last = o?.lastRun ?? null;
    const fill = ageMs === null ? 0 : Math.min(100, Math.round((ageMs / thresholdMs) * 100));
    return html`<tr data-supplier="${supplier.name}">
<td><b>${supplier.name}</b><br><span class="muted">every ${formatElapsed(supplier.intervalMs)}</span></td>
<td data-status="${readiness.status}">${stateBadge(readiness.status)}</td>
<td>${formatTime(lastSuccess)}</td>
<td data-age>${
      ageMs === null
        ? html`<span class="muted">never / ${formatElapsed(thresholdMs)}</span>`
        : html`<span class="age-bar"><i class="${fill >= 100 ? "over" : ""}" style="width:${fill}%"></i></span>${formatElapsed(ageMs)} / ${formatElapsed(thresholdMs)}`
    }</td>
${
  last === null
    ? html`<td colspan="10" class="muted">${o ? "no run yet" : "unknown (database unreachable)"}</td>`
    : html`<td data-last-run><a href="/runs/${last.id}">#${last.id}</a> ${stateBadge(last.state)}<br><span class="muted">${last.trigger} · ${formatTime(last.startedAt)}</span></td>
<td data-error-code>${
        last.errorCode === null
          ? html`<span class="muted">—</span>`
          : html`<span class="err code" title="${safeText(last.errorMessage ?? "", 500)}">${last.errorCode}</span>`
      }</td>
<td class="num">${last.counts.pages}</td>
<td class="num">${last.counts.recordsSeen}</td>
<td class="num">${last.counts.recordsInserted}</td>
<td class="num">${last.counts.recordsUpdated}</td>
<td class="num">${last.counts.recordsUnchanged}</td>
<td class="num">${last.counts.recordsRejected}</td>
<td class="num">${last.counts.recordsDelisted}</td>
<td class="num">${formatSpan(last.startedAt, last.finishedAt)}</td>`
}
<td>${strip(supplier.name, o?.recent ?? [])}</td>
</tr>`;
  });
  const body = html`${
    input.database === "unreachable"
      ? html`<p class="banner">The database is unreachable: run history cannot be shown. Freshness is the last known.</p>`
      : ""
  }<div class="summary">
<span>${input.suppliers.length} enabled suppliers</span>
<span>${stateBadge("ok")} ${counts.ok}</span>
<span>${stateBadge("stale")} ${counts.stale}</span>
<span>${stateBadge("none")} ${counts.none}</span>
<span class="muted">at ${formatTime(new Date(input.nowMs))}</span>
</div>
<table id="suppliers">
<thead><tr><th>Supplier</th><th>Status</th><th>Last success</th><th>Age / threshold</th><th>Last run</th><th>Error</th><th class="num">Pages</th><th class="num">Seen</th><th class="num">New</th><th class="num">Changed</th><th class="num">Same</th><th class="num">Rejected</th><th class="num">Delisted</th><th class="num">Duration</th><th>Last ${STRIP_RUNS} runs (oldest → newest)</th></tr></thead>
<tbody>
${rows}
</tbody>
</table>`;
  return page("Suppliers", input.instance, input.database, body);
}

/** The last runs as marks, oldest left, newest right; empty places for runs that never were. */
function strip(supplier: string, recent: readonly RunMark[]): Html {
  const width = STRIP_RUNS * (MARK_WIDTH + MARK_GAP) - MARK_GAP;
  const oldestFirst = [...recent].reverse();
  const offset = STRIP_RUNS - oldestFirst.length;
  const empties = Array.from({ length: offset }, (_, i) => {
    const x = i * (MARK_WIDTH + MARK_GAP);
    return html`<rect class="empty" x="${x}" y="0" width="${MARK_WIDTH}" height="${MARK_HEIGHT}"/>`;
  });
  const marks = oldestFirst.map((run, i) => {
    const x = (offset + i) * (MARK_WIDTH + MARK_GAP);
    const label = `#${run.id} ${run.state}${run.errorCode ? ` ${run.errorCode}` : ""} · ${run.trigger} · ${formatTime(run.startedAt)} · ${formatSpan(run.startedAt, run.finishedAt)}`;
    return html`<a href="/runs/${run.id}"><title>${label}</title><rect class="${run.state}" x="${x}" y="0" width="${MARK_WIDTH}" height="${MARK_HEIGHT}"/></a>`;
  });
  const tally = recent.reduce<Record<string, number>>((acc, r) => {
    acc[r.state] = (acc[r.state] ?? 0) + 1;
    return acc;
  }, {});
  const summary = Object.entries(tally)
    .map(([state, n]) => `${n} ${state}`)
    .join(", ");
  return html`<svg class="strip" xmlns="http://www.w3.org/2000/svg" width="${width}" height="${MARK_HEIGHT}" viewBox="0 0 ${width} ${MARK_HEIGHT}" role="img" aria-label="${supplier}: last ${recent.length} runs${summary ? `: ${summary}` : ""}">${empties}${marks}</svg>`;
}
