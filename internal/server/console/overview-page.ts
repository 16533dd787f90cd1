/**
 * `GET /`: one row per enabled supplier (docs/operations.md, Operator console) with its readiness status, last
 * success and age against the threshold, the last run, and a strip of its last
 * {@link STRIP_RUNS} runs drawn as inline SVG, each mark a link to the run's page.
 */
import { formatSchedule } from "../../config/suppliers.js";
import type { SupplierConfig } from "../../config/types.js";
import { formatElapsed } from "../../platform/duration.js";
import type { SecretRegistry } from "../../platform/redact.js";
import { type RunMark, STRIP_RUNS, type SupplierLatest } from "../../store/console-queries.js";
import type { SupplierHold } from "../../store/run-queries.js";
import { evaluateSupplier, type SupplierFreshness } from "../readiness.js";
import { escapeHtml, Html, html } from "./html.js";
import { type ConsoleInstance, formatSpan, formatTime, page, stateBadge } from "./layout.js";

export interface OverviewInput {
  suppliers: readonly SupplierConfig[];
  /** Per supplier, as read by `readOverview`; undefined when the database did not answer. */
  overview: ReadonlyMap<string, SupplierLatest> | undefined;
  /** The strip of a supplier's recent runs, from {@link renderStrip} (the console keeps them). */
  strip: (supplier: string) => Html;
  /** Last success per supplier when `overview` is missing (the freshness cache's last known). */
  fallbackLastSuccess: ReadonlyMap<string, Date | null>;
  database: "ok" | "unreachable";
  /** When each supplier was paused, or null (docs/operations.md, Pausing); absent: none known. */
  paused?: ReadonlyMap<string, Date | null>;
  instance: ConsoleInstance;
  /** Action forms per supplier and the login/logout line (docs/operations.md, Console actions); absent: read-only. */
  actions?: { forSupplier(supplier: string, paused: boolean): Html; header: Html };
  /** Scrubs the stored error messages shown. */
  secrets: SecretRegistry;
  nowMs: number;
  /** What each supplier's guards hold (the readiness snapshot's); a held supplier shows `held`. */
  held?: ReadonlyMap<string, SupplierHold> | undefined;
}

/** Counts of 10,000 and more as `12K`, `1.2M`, the exact number in the cell's title: the row must fit 1280 px. */
const COMPACT = new Intl.NumberFormat("en", { notation: "compact", maximumFractionDigits: 1 });

function count(n: number): Html {
  return n < 10_000
    ? html`<td class="num">${n}</td>`
    : html`<td class="num" title="${n.toLocaleString("en")}">${COMPACT.format(n)}</td>`;
}

const MARK_WIDTH = 6;
const MARK_GAP = 2;
const MARK_HEIGHT = 16;

export function renderOverview(input: OverviewInput): Html {
  const counts: Record<SupplierFreshness, number> = { ok: 0, stale: 0, none: 0, held: 0, paused: 0 };
  const rows = input.suppliers.map((supplier) => {
    const o = input.overview?.get(supplier.name);
    const lastSuccess = o ? o.lastSuccess : (input.fallbackLastSuccess.get(supplier.name) ?? null);
    const readiness = evaluateSupplier(
      supplier,
      lastSuccess,
      input.nowMs,
      input.held?.get(supplier.name),
      input.paused?.get(supplier.name) ?? null,
    );
    counts[readiness.status] += 1;
    const ageMs = readiness.age_seconds === null ? null : readiness.age_seconds * 1000;
    const thresholdMs = readiness.threshold_seconds * 1000;
    const last = o?.lastRun ?? null;
    const fill = ageMs === null ? 0 : Math.min(100, Math.round((ageMs / thresholdMs) * 100));
    return html`<tr data-supplier="${supplier.name}">
<td><b><a href="/suppliers/${supplier.name}" data-link="supplier">${supplier.name}</a></b><br><span class="muted">${supplier.cron ? formatSchedule(supplier) : `every ${formatElapsed(supplier.intervalMs)}`}</span></td>
<td data-status="${readiness.status}">${stateBadge(readiness.status)}${
      readiness.held_run_id === undefined
        ? ""
        : html`<br><a class="sub" href="/runs/${readiness.held_run_id}" data-held-items>${readiness.held_items ?? 0} held</a>`
    }</td>
<td data-age>${
      ageMs === null
        ? html`<span class="muted">never / ${formatElapsed(thresholdMs)}</span>`
        : html`<span class="age-bar"><i class="${fill >= 100 ? "over" : ""}" style="width:${fill}%"></i></span>${formatElapsed(ageMs)} / ${formatElapsed(thresholdMs)}`
    }<br><span class="muted" data-last-success>${formatTime(lastSuccess)}</span></td>
${
  last === null
    ? html`<td colspan="9" class="muted">${o ? "no run yet" : "unknown (database unreachable)"}</td>`
    : html`<td data-last-run><a href="/runs/${last.id}">#${last.id}</a> ${stateBadge(last.state)}${
        last.errorCode === null
          ? ""
          : html` <span class="err code" data-error-code title="${input.secrets.safeText(last.errorMessage ?? "", 500)}">${last.errorCode}</span>`
      }<br><span class="muted">${last.trigger} · ${formatTime(last.startedAt)}</span></td>
${count(last.counts.pages)}
${count(last.counts.recordsSeen)}
${count(last.counts.recordsInserted)}
${count(last.counts.recordsUpdated)}
${count(last.counts.recordsUnchanged)}
${count(last.counts.recordsRejected)}
${count(last.counts.recordsDelisted)}
<td class="num">${formatSpan(last.startedAt, last.finishedAt)}</td>`
}
<td>${input.strip(supplier.name)}</td>
${input.actions ? html`<td data-actions>${input.actions.forSupplier(supplier.name, readiness.status === "paused")}</td>` : ""}
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
${counts.held > 0 ? html`<span>${stateBadge("held")} ${counts.held}</span>` : ""}
${counts.paused > 0 ? html`<span>${stateBadge("paused")} ${counts.paused}</span>` : ""}
<span class="muted">at ${formatTime(new Date(input.nowMs))}</span>
</div>
${input.actions?.header ?? ""}
<table id="suppliers" class="overview">
<thead><tr><th>Supplier</th><th>Status</th><th>Age / threshold<br>last success</th><th>Last run</th><th class="num">Pages</th><th class="num">Seen</th><th class="num">New</th><th class="num">Chan&shy;ged</th><th class="num">Same</th><th class="num">Rejec&shy;ted</th><th class="num">Delis&shy;ted</th><th class="num">Dura&shy;tion</th><th>Last ${STRIP_RUNS} runs<br>(oldest → newest)</th>${input.actions ? html`<th>Actions</th>` : ""}</tr></thead>
<tbody>
${rows}
</tbody>
</table>`;
  return page("Suppliers", input.instance, input.database, body);
}

/**
 * Class of a mark per run state. Short, and the marks' size is in the style, because
 * the page of 1,000 suppliers draws 30,000 marks: every byte of one is 30 KB.
 */
const MARK_CLASS: Record<string, string> = { succeeded: "s", partial: "p", failed: "f", running: "r" };

/**
 * The last runs as marks, oldest left, newest right; empty places for runs that
 * never were. Built by hand rather than through {@link html}: it is the hot loop of
 * the page. Only numbers go in unescaped; every text goes through `escapeHtml`.
 */
export function renderStrip(supplier: string, recent: readonly RunMark[]): Html {
  const step = MARK_WIDTH + MARK_GAP;
  const width = STRIP_RUNS * step - MARK_GAP;
  const offset = STRIP_RUNS - recent.length;
  const tally = new Map<string, number>();
  let marks = "";
  for (let i = 0; i < offset; i++) marks += `<rect class="e" x="${i * step}"/>`;
  for (let i = recent.length - 1, place = offset; i >= 0; i--, place++) {
    const run = recent[i] as RunMark;
    tally.set(run.state, (tally.get(run.state) ?? 0) + 1);
    const id = Math.trunc(run.id);
    const rect = `<rect class="${MARK_CLASS[run.state] ?? "e"}" x="${place * step}"`;
    if (run.state === "succeeded" && run.errorCode === null) {
      // Most marks: the colour says it all, and the run's page the rest.
      marks += `<a href="/runs/${id}">${rect}/></a>`;
    } else {
      const code = run.errorCode === null ? "" : ` ${escapeHtml(run.errorCode)}`;
      const label = `#${id} ${escapeHtml(run.state)}${code} · ${formatSpan(run.startedAt, run.finishedAt)}`;
      marks += `<a href="/runs/${id}">${rect}><title>${label}</title></rect></a>`;
    }
  }
  const summary = [...tally].map(([state, n]) => `${n} ${state}`).join(", ");
  const aria = escapeHtml(`${supplier}: last ${recent.length} runs${summary ? `: ${summary}` : ""}`);
  return new Html(
    `<svg class="strip" width="${width}" height="${MARK_HEIGHT}" viewBox="0 0 ${width} ${MARK_HEIGHT}" role="img" aria-label="${aria}">${marks}</svg>`,
  );
}
