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
import { type Html, html } from "./html.js";
import { type ConsoleInstance, formatSpan, formatTime, page, stateBadge } from "./layout.js";

/** Longest text of one column value shown (error messages are already cut at 2,000 when stored). */
const COLUMN_TEXT_MAX = 4_000;

export function renderRun(
  id: string,
  detail: RunDetail,
  instance: ConsoleInstance,
  secrets: SecretRegistry,
): Html {
  const safeText = (text: string, maxLength: number) => secrets.safeText(text, maxLength);
  const columnValue = (value: unknown) => columnHtml(value, secrets);
  const startedAt = detail.columns.find((c) => c.name === "started_at")?.value;
  const finishedAt = detail.columns.find((c) => c.name === "finished_at")?.value;
  const duration =
    startedAt instanceof Date ? formatSpan(startedAt, finishedAt instanceof Date ? finishedAt : null) : "—";
  const body = html`<p><a href="/">← all suppliers</a></p>
<h2 id="run">Run #${id} · ${detail.supplier} ${stateBadge(detail.state)}${
    detail.errorCode ? html` <span class="err code" data-error-code>${detail.errorCode}</span>` : ""
  }</h2>
<dl class="cols" id="columns">
${detail.columns.map((c) => html`<dt>${c.name}</dt><dd data-column="${c.name}">${columnValue(c.value)}</dd>`)}
<dt>duration</dt><dd data-column="duration">${duration}</dd>
</dl>
<h2 id="steps-title">Steps (${detail.stepsTotal})</h2>
${
  detail.steps.length === 0
    ? html`<p class="muted">No step was recorded.</p>`
    : html`<table id="steps">
<thead><tr><th class="num">Seq</th><th>State</th><th class="num">Records</th><th class="num">HTTP attempts</th><th>Error code</th><th class="num">Duration</th><th>Started</th></tr></thead>
<tbody>
${detail.steps.map(
  (s) =>
    html`<tr data-seq="${s.seq}"><td class="num">${s.seq}</td><td>${stateBadge(s.state)}</td><td class="num">${s.records}</td><td class="num">${s.httpAttempts}</td><td>${s.errorCode === null ? html`<span class="muted">—</span>` : html`<span class="err code">${s.errorCode}</span>`}</td><td class="num">${formatSpan(s.startedAt, s.finishedAt)}</td><td>${formatTime(s.startedAt)}</td></tr>`,
)}
</tbody>
</table>`
}
${
  detail.stepsTotal > detail.steps.length
    ? html`<p class="note">Showing the first ${MAX_STEPS_SHOWN} steps; ${detail.stepsTotal - detail.steps.length} more are not shown.</p>`
    : ""
}
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
