/**
 * The "Held" section of a run's page: what the run's guards held (docs/connectors.md,
 * Guards), each item with its stored and proposed values, its reason and its decision.
 * The values are the CLI's (`supplier-sync held`), so both read the same.
 */
import type { SecretRegistry } from "../../platform/redact.js";
import { MAX_HELD_SHOWN } from "../../store/console-queries.js";
import { heldValues } from "../../store/format-held.js";
import type { HeldItem } from "../../store/held.js";
import { type Html, html } from "./html.js";
import { formatTime } from "./layout.js";

const TEXT_MAX = 2_000;

export function renderHeldSection(
  runId: string,
  held: readonly HeldItem[],
  heldTotal: number,
  secrets: SecretRegistry,
): Html {
  const text = (value: string) => secrets.safeText(value, TEXT_MAX);
  const undecided = held.filter((i) => i.state === "held").length;
  return html`<h2 id="held-title">Held (${heldTotal})</h2>
${
  held.length === 0
    ? html`<p class="muted">The guards held nothing of this run.</p>`
    : html`${
        undecided > 0
          ? html`<p class="banner" id="held-waiting">${undecided} item(s) wait for a decision: <code>supplier-sync approve ${runId}</code> or <code>supplier-sync dismiss ${runId}</code> (add <code>--sku …</code> for single offers).</p>`
          : ""
      }<table id="held">
<thead><tr><th>Kind</th><th>SKU / field</th><th>Stored</th><th>Proposed</th><th>Reason</th><th>State</th><th>Decided</th></tr></thead>
<tbody>
${held.map((item) => {
  const [stored, proposed] = heldValues(item);
  return html`<tr data-held="${item.id}" data-held-state="${item.state}"><td>${item.kind}</td><td>${text(item.sku ?? item.field ?? "—")}</td><td>${text(stored)}</td><td>${text(proposed)}</td><td>${text(item.reason)}</td><td>${item.state}</td><td>${
    item.decidedAt === null
      ? html`<span class="muted">—</span>`
      : html`${formatTime(item.decidedAt)}${item.decidedBy ? html` by ${text(item.decidedBy)}` : ""}`
  }</td></tr>`;
})}
</tbody>
</table>`
}
${
  heldTotal > held.length
    ? html`<p class="note" id="held-rest">Showing the first ${MAX_HELD_SHOWN} held items; ${heldTotal - held.length} more are listed by <code>supplier-sync held --all --json</code>.</p>`
    : ""
}`;
}
