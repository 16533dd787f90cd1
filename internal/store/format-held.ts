/**
 * What `supplier-sync held`, `approve` and `dismiss` print (`--json` prints the items instead).
 */
import type { Decision, HeldItem } from "./held.js";

interface OfferValues {
  name?: string | null;
  price?: string | null;
  currency?: string | null;
  stock?: number | null;
}

const count = (n: unknown) => (typeof n === "number" ? n.toLocaleString("en-US") : "?");

/** An offer's stored or proposed values, briefly: `12.50 RUB, stock 3`. */
function offerValues(v: unknown): string {
  const o = (v ?? {}) as OfferValues;
  const price = o.price === null || o.price === undefined ? "on request" : o.price;
  const parts = [o.currency ? `${price} ${o.currency}` : price];
  if (o.stock !== null && o.stock !== undefined) parts.push(`stock ${o.stock}`);
  return parts.join(", ");
}

/** The stored and proposed columns of one item. */
export function heldValues(item: HeldItem): [stored: string, proposed: string] {
  const stored = (item.stored ?? {}) as Record<string, unknown>;
  const proposed = (item.proposed ?? {}) as Record<string, unknown>;
  switch (item.kind) {
    case "delist":
      return [`${count(stored.listed)} listed`, `delist ${count(proposed.delist)}`];
    case "field":
      return [`${count(stored.offersWithValue)} offers have it`, `empty (${String(proposed.source ?? "")})`];
    default:
      return [offerValues(item.stored), offerValues(item.proposed)];
  }
}

function table(titles: string[], rows: string[][]): string {
  const widths = titles.map((t, i) => Math.max(t.length, ...rows.map((r) => r[i]?.length ?? 0)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd();
  return [line(titles), ...rows.map(line)].join("\n");
}

/** The held items as a table, grouped by run (oldest first), with what to run next. */
export function formatHeldTable(items: HeldItem[], all: boolean): string {
  if (items.length === 0) return all ? "nothing was ever held\n" : "nothing held\n";
  const titles = ["RUN", "SUPPLIER", "KIND", "SKU/FIELD", "STORED", "PROPOSED", "REASON"];
  if (all) titles.push("STATE");
  const rows = items.map((item) => {
    const [stored, proposed] = heldValues(item);
    const row = [
      String(item.runId),
      item.supplier,
      item.kind,
      item.sku ?? item.field ?? "",
      stored,
      proposed,
      item.reason.length > 80 ? `${item.reason.slice(0, 79)}…` : item.reason,
    ];
    if (all) row.push(item.state === "held" ? "held" : `${item.state} by ${item.decidedBy ?? "?"}`);
    return row;
  });
  const runs = [...new Set(items.filter((i) => i.state === "held").map((i) => i.runId))];
  const hint =
    runs.length === 0
      ? ""
      : `\nDecide with: supplier-sync approve RUN_ID [--sku SKU]... --yes | supplier-sync dismiss RUN_ID [--sku SKU]...\n`;
  return `${table(titles, rows)}\n${hint}`;
}

/** One line per decided item, then a summary. */
export function formatDecision(decision: Decision, verb: "approve" | "dismiss"): string {
  const lines: string[] = [];
  for (const { item, state, applied } of decision.decided) {
    const what = item.sku ?? item.field ?? item.kind;
    if (state === "stale") {
      lines.push(
        `stale      ${item.kind} ${what}: changed by a later run since it was held; nothing applied`,
      );
    } else if (state === "dismissed") {
      lines.push(`dismissed  ${item.kind} ${what}: ${item.reason}`);
    } else {
      const effect =
        item.kind === "delist" ? `${count(applied)} offers delisted` : `${count(applied)} offers written`;
      lines.push(`approved   ${item.kind} ${what}: ${effect}`);
    }
  }
  for (const sku of decision.notHeld)
    lines.push(`not held   ${sku}: no undecided item for it in run ${decision.runId}`);
  const n = decision.decided.length;
  const summary =
    n === 0
      ? `run ${decision.runId} (${decision.supplier}): nothing left to ${verb} (already decided, or nothing held)`
      : `run ${decision.runId} (${decision.supplier}): ${n} item${n === 1 ? "" : "s"} decided`;
  return `${[...lines, summary].join("\n")}\n`;
}
