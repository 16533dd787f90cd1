/**
 * The human table printed by `supplier-sync runs` (`--json` prints the rows instead).
 */
import { formatElapsed } from "../platform/duration.js";
import type { RunRow } from "./runs.js";

interface Column {
  title: string;
  /** Numbers align right, text left. */
  align: "left" | "right";
  value(row: RunRow): string;
}

const COLUMNS: Column[] = [
  { title: "ID", align: "right", value: (r) => String(r.id) },
  { title: "SUPPLIER", align: "left", value: (r) => r.supplier },
  { title: "TRIGGER", align: "left", value: (r) => r.trigger },
  { title: "STATE", align: "left", value: (r) => r.state },
  { title: "STARTED", align: "left", value: (r) => formatTimestamp(r.startedAt) },
  { title: "DURATION", align: "right", value: (r) => formatDuration(r) },
  { title: "PAGES", align: "right", value: (r) => String(r.counts.pages) },
  { title: "SEEN", align: "right", value: (r) => String(r.counts.recordsSeen) },
  { title: "NEW", align: "right", value: (r) => String(r.counts.recordsInserted) },
  { title: "CHANGED", align: "right", value: (r) => String(r.counts.recordsUpdated) },
  { title: "SAME", align: "right", value: (r) => String(r.counts.recordsUnchanged) },
  { title: "REJECTED", align: "right", value: (r) => String(r.counts.recordsRejected) },
  { title: "DELISTED", align: "right", value: (r) => String(r.counts.recordsDelisted) },
  { title: "HELD", align: "right", value: (r) => String(r.counts.recordsHeld) },
  { title: "ERROR", align: "left", value: (r) => formatError(r) },
];

/** Longest error message shown in the table; `--json` has the full text. */
const ERROR_DISPLAY_CHARS = 60;

/** A readable fixed-width table of runs, one line each, newest first as given. */
export function formatRunsTable(rows: RunRow[]): string {
  if (rows.length === 0) return "no runs recorded\n";
  const cells = rows.map((row) => COLUMNS.map((c) => c.value(row)));
  const widths = COLUMNS.map((c, i) =>
    Math.max(c.title.length, ...cells.map((line) => line[i]?.length ?? 0)),
  );
  const render = (values: string[]) =>
    values
      .map((v, i) => {
        const width = widths[i] ?? 0;
        return COLUMNS[i]?.align === "right" ? v.padStart(width) : v.padEnd(width);
      })
      .join("  ")
      .trimEnd();
  const lines = [render(COLUMNS.map((c) => c.title)), ...cells.map(render)];
  return `${lines.join("\n")}\n`;
}

function formatTimestamp(date: Date): string {
  return date
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d{3}Z$/, "Z");
}

/** A run still `running` has no duration yet; under 10 s it keeps tenths, under 1 s milliseconds. */
function formatDuration(row: RunRow): string {
  if (row.finishedAt === null) return "running";
  return formatElapsed(row.finishedAt.getTime() - row.startedAt.getTime());
}

/** A row of `runs --json`: the run and its `durationMs` (null while running). */
export function withDuration(row: RunRow): RunRow & { durationMs: number | null } {
  return {
    ...row,
    durationMs:
      row.finishedAt === null ? null : Math.max(0, row.finishedAt.getTime() - row.startedAt.getTime()),
  };
}

function formatError(row: RunRow): string {
  if (row.errorCode === null && row.errorMessage === null) return "";
  const message = (row.errorMessage ?? "").replace(/\s+/g, " ").trim();
  const short =
    message.length > ERROR_DISPLAY_CHARS ? `${message.slice(0, ERROR_DISPLAY_CHARS - 1)}…` : message;
  return [row.errorCode, short].filter((s) => s !== null && s !== "").join(": ");
}
