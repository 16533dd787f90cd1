/**
 * `GET /runs/<id>`: every column of one run, its steps and its rejects, each
 * reject's raw payload pretty-printed and cut at 10 KB (docs/operations.md, Operator console). A payload is
 * supplier text: it is escaped like everything else, so markup in it shows as text.
 */
import type { SecretRegistry } from "../../platform/redact.js";
import {
  MAX_REJECTS_SHOWN,
  MAX_STEPS_SHOWN,
  REJECT_RAW_MAX_BYTES,
  type RunDetail,
} from "../../store/console-queries.js";
import { renderHeldSection } from "./held-section.js";
import { type Html, html } from "./html.js";
import { type ConsoleInstance, formatSpan, formatTime, page, stateBadge } from "./layout.js";

/** Longest text of one column value shown (error messages are already cut at 2,000 when stored). */
const COLUMN_TEXT_MAX = 4_000;

/** The links around a run: its supplier's page (when enabled) and its neighbours. */
export interface RunNavigation {
  /** Whether the run's supplier is enabled here (so its page exists). */
  enabled: boolean;
  /** The supplier's previous and next runs; undefined when they could not be read. */
  neighbours: { previous: number | null; next: number | null } | undefined;
}

/** Columns laid out by name on the run page; any other column is listed after them as it is. */
const LAID_OUT = new Set([
  "id",
  "supplier",
  "slot_start",
  "trigger",
  "state",
  "error_code",
  "error_message",
  "owner",
  "started_at",
  "heartbeat_at",
  "finished_at",
  "pages",
  "records_seen",
  "records_inserted",
  "records_updated",
  "records_unchanged",
  "records_rejected",
  "records_delisted",
  "records_held",
  "etag",
  "last_modified",
  "source_date",
  "field_coverage",
]);

export function renderRun(
  id: string,
  detail: RunDetail,
  instance: ConsoleInstance,
  secrets: SecretRegistry,
  nav: RunNavigation = { enabled: false, neighbours: undefined },
  /** Approve/dismiss forms (docs/operations.md, Console actions), shown when the run holds items and a session is open. */
  actions?: Html,
): Html {
  const safeText = (text: string, maxLength: number) => secrets.safeText(text, maxLength);
  const values = new Map(detail.columns.map((c) => [c.name, c.value]));
  const time = (name: string) => {
    const v = values.get(name);
    return v instanceof Date ? v : null;
  };
  const num = (name: string) => {
    const v = values.get(name);
    return typeof v === "number" ? v : null;
  };
  const text = (name: string) => {
    const v = values.get(name);
    return v === null || v === undefined ? null : String(v);
  };
  const startedAt = time("started_at");
  const finishedAt = time("finished_at");
  const duration = startedAt ? formatSpan(startedAt, finishedAt) : "—";
  const owner = ownerOf(values.get("owner"));
  const supplierLink = nav.enabled
    ? html`<a href="/suppliers/${detail.supplier}" data-link="supplier">${detail.supplier}</a>`
    : html`${detail.supplier} <span class="muted">(not enabled here)</span>`;
  const none = html`<span class="muted">—</span>`;
  const optional = (name: string, label: string) => {
    const v = text(name);
    return v === null
      ? ""
      : html`<dt>${label}</dt><dd data-column="${name}" class="code">${safeText(v, COLUMN_TEXT_MAX)}</dd>`;
  };
  const counts: [string, string][] = [
    ["records_seen", "seen"],
    ["records_inserted", "new"],
    ["records_updated", "changed"],
    ["records_unchanged", "unchanged"],
    ["records_rejected", "rejected"],
    ["records_delisted", "delisted"],
    ["records_held", "held"],
  ];
  const others = detail.columns.filter((c) => !LAID_OUT.has(c.name));
  const neighbours = nav.neighbours;
  const body = html`<nav class="crumbs"><a href="/">← all suppliers</a> · ${supplierLink}${
    neighbours === undefined
      ? ""
      : html` · ${
          neighbours.previous === null
            ? html`<span class="muted">first run</span>`
            : html`<a href="/runs/${neighbours.previous}" rel="prev" data-link="previous">‹ previous run #${neighbours.previous}</a>`
        } · ${
          neighbours.next === null
            ? html`<span class="muted">latest run</span>`
            : html`<a href="/runs/${neighbours.next}" rel="next" data-link="next">next run #${neighbours.next} ›</a>`
        }`
  }</nav>
<h2 id="run">Run #${id} · ${detail.supplier} ${stateBadge(detail.state)}${
    detail.errorCode ? html` <span class="err code" data-error-code>${detail.errorCode}</span>` : ""
  }</h2>
${Number(detail.columns.find((c) => c.name === "records_held")?.value ?? 0) > 0 ? (actions ?? "") : ""}
<dl class="cols" id="columns">
<dt>Run</dt><dd data-column="id">#${id}</dd>
<dt>Supplier</dt><dd data-column="supplier">${supplierLink}</dd>
<dt>State</dt><dd data-column="state">${stateBadge(detail.state)}</dd>
<dt>Error</dt><dd data-column="error_code">${
    detail.errorCode === null
      ? none
      : html`<span class="err code">${detail.errorCode}</span>${
          text("error_message") === null
            ? ""
            : html` <span data-column="error_message">${safeText(text("error_message") ?? "", COLUMN_TEXT_MAX)}</span>`
        }`
  }</dd>
<dt>Trigger</dt><dd data-column="trigger">${text("trigger") ?? none}</dd>
<dt>Slot</dt><dd data-column="slot_start">${formatTime(time("slot_start"))}</dd>
<dt>Started</dt><dd data-column="started_at">${formatTime(startedAt)}</dd>
<dt>Finished</dt><dd data-column="finished_at">${finishedAt === null ? html`<span class="muted">still running</span>` : formatTime(finishedAt)}</dd>
<dt>Duration</dt><dd data-column="duration">${duration}</dd>
<dt>Last heartbeat</dt><dd data-column="heartbeat_at">${formatTime(time("heartbeat_at"))}</dd>
<dt>Owner</dt><dd data-column="owner">${
    owner === null
      ? html`<span class="code">${safeText(JSON.stringify(values.get("owner") ?? null), COLUMN_TEXT_MAX)}</span>`
      : html`<span class="code">${owner.hostname}/${owner.pid}</span>${owner.bootId ? html` <span class="muted">boot ${owner.bootId}</span>` : ""}`
  }</dd>
<dt>Pages</dt><dd data-column="pages">${num("pages") ?? none}</dd>
<dt>Records</dt><dd data-column="records">${counts.map(
    ([name, label], i) =>
      html`${i > 0 ? " · " : ""}<span data-column="${name}"><b>${num(name) ?? 0}</b> ${label}</span>`,
  )}</dd>
${optional("source_date", "Source date")}${optional("etag", "ETag")}${optional("last_modified", "Last-Modified")}
${coverageHtml(values.get("field_coverage"), secrets)}
${others.map((c) => html`<dt>${c.name}</dt><dd data-column="${c.name}">${columnHtml(c.value, secrets)}</dd>`)}
</dl>
<h2 id="steps-title">Steps (${detail.stepsTotal})</h2>
${
  detail.steps.length === 0
    ? html`<p class="muted">No step was recorded.</p>`
    : html`<table id="steps">
<thead><tr><th class="num">Seq</th><th>State</th><th class="num">Records</th><th class="num">HTTP attempts</th><th>Error code</th><th class="num">Duration</th><th>Started</th><th>Finished</th></tr></thead>
<tbody>
${detail.steps.map(
  (s) =>
    html`<tr data-seq="${s.seq}"><td class="num">${s.seq}</td><td>${stateBadge(s.state)}</td><td class="num">${s.records}</td><td class="num">${s.httpAttempts}</td><td>${s.errorCode === null ? html`<span class="muted">—</span>` : html`<span class="err code">${s.errorCode}</span>`}</td><td class="num">${formatSpan(s.startedAt, s.finishedAt)}</td><td>${formatTimeMs(s.startedAt)}</td><td>${s.finishedAt === null ? html`<span class="muted">—</span>` : formatTimeMs(s.finishedAt)}</td></tr>`,
)}
</tbody>
</table>`
}
${
  detail.stepsTotal > detail.steps.length
    ? html`<p class="note">Showing the first ${MAX_STEPS_SHOWN} steps; ${detail.stepsTotal - detail.steps.length} more are not shown.</p>`
    : ""
}
${renderHeldSection(id, detail.held, detail.heldTotal, secrets)}
${detail.held.some((item) => item.state === "held") ? (actions ?? "") : ""}
<h2 id="rejects-title">Rejects (${detail.rejectsTotal})</h2>
${detail.rejects.length === 0 ? html`<p class="muted">No record of this run was rejected.</p>` : ""}
<div id="rejects">
${detail.rejects.map(
  (r) => html`<section class="reject" data-reject="${r.id}">
<h3>step ${r.seq} · <span class="reason">${safeText(r.reason, COLUMN_TEXT_MAX)}</span> <span class="muted">${formatTime(r.createdAt)}</span></h3>
${r.raw === null ? html`<p class="muted">No raw payload was kept.</p>` : html`<pre>${safeText(r.raw, REJECT_RAW_MAX_BYTES)}</pre>`}
${
  r.rawBytes > REJECT_RAW_MAX_BYTES
    ? html`<p class="note" data-cut>Cut at 10 KB of ${r.rawBytes} bytes.</p>`
    : ""
}
</section>`,
)}
</div>
${
  detail.rejectsTotal > detail.rejects.length
    ? html`<p class="note" id="rejects-rest">Showing the first ${MAX_REJECTS_SHOWN} rejects; ${detail.rejectsTotal - detail.rejects.length} more are not shown (table ingestion_rejects, run_id = ${id}).</p>`
    : ""
}`;
  return page(`Run #${id}`, instance, "ok", body);
}

/** `08:00:00.123Z`: steps are often shorter than a second; the run's date is above. */
function formatTimeMs(date: Date): string {
  return `${date.toISOString().slice(11, 23)}Z`;
}

function ownerOf(value: unknown): { hostname: string; pid: number; bootId: string | null } | null {
  if (typeof value !== "object" || value === null) return null;
  const o = value as Record<string, unknown>;
  if (typeof o["hostname"] !== "string" || typeof o["pid"] !== "number") return null;
  return {
    hostname: o["hostname"],
    pid: o["pid"],
    bootId: typeof o["bootId"] === "string" ? o["bootId"] : null,
  };
}

/** `field_coverage` as a small table: field, source, records with a value of all. */
function coverageHtml(value: unknown, secrets: SecretRegistry): Html | string {
  if (typeof value !== "object" || value === null) return "";
  const rows = Object.entries(value as Record<string, unknown>).map(([field, entry]) => {
    const e = (typeof entry === "object" && entry !== null ? entry : {}) as Record<string, unknown>;
    const records = typeof e["records"] === "number" ? e["records"] : null;
    const withValue = typeof e["withValue"] === "number" ? e["withValue"] : null;
    return html`<tr><td class="code">${field}</td><td class="code">${secrets.safeText(String(e["source"] ?? ""), 200)}</td><td class="num">${withValue ?? "—"} / ${records ?? "—"}</td></tr>`;
  });
  if (rows.length === 0) return "";
  return html`<dt>Field coverage</dt><dd data-column="field_coverage"><table class="inner"><thead><tr><th>Field</th><th>Source</th><th class="num">With a value / records</th></tr></thead><tbody>${rows}</tbody></table></dd>`;
}

function columnHtml(value: unknown, secrets: SecretRegistry): Html {
  if (value === null || value === undefined) return html`<span class="muted">null</span>`;
  if (value instanceof Date) return html`${value.toISOString()}`;
  const text = typeof value === "object" ? JSON.stringify(value) : String(value);
  return html`${secrets.safeText(text, COLUMN_TEXT_MAX)}`;
}

/** The page for an id that is malformed or names no run. */
export function renderRunNotFound(text: string, instance: ConsoleInstance, database: string): Html {
  return page(
    "Run not found",
    instance,
    database,
    html`<p><a href="/">← all suppliers</a></p><h2>Not found</h2><p>${text}</p>`,
  );
}

/** The page shown when the database did not answer in time. */
export function renderUnavailable(what: string, instance: ConsoleInstance): Html {
  return page(
    "Database unreachable",
    instance,
    "unreachable",
    html`<p><a href="/">← all suppliers</a></p><p class="banner">${what}</p>`,
  );
}
