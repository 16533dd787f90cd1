/**
 * Human-readable log lines for a terminal (docs/operations.md, Health server: on a TTY outside production).
 * pino still builds, redacts and scrubs each line as JSON; this only turns the
 * finished line into `12:00:01.234 INFO  message key=value …`, so nothing that is
 * hidden in JSON can show here.
 */
import type { DestinationStream } from "pino";

const LEVELS: Record<number, { name: string; color: string }> = {
  10: { name: "TRACE", color: "\u001b[90m" },
  20: { name: "DEBUG", color: "\u001b[36m" },
  30: { name: "INFO ", color: "\u001b[32m" },
  40: { name: "WARN ", color: "\u001b[33m" },
  50: { name: "ERROR", color: "\u001b[31m" },
  60: { name: "FATAL", color: "\u001b[35m" },
};
const RESET = "\u001b[0m";

function value(v: unknown): string {
  if (typeof v === "string") return /^[^\s="]+$/.test(v) ? v : JSON.stringify(v);
  return JSON.stringify(v);
}

/** One JSON log line (as pino writes it) in human form, with a newline; other text is passed as is. */
export function formatLogLine(line: string, options: { color: boolean }): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.endsWith("\n") ? line : `${line}\n`;
  }
  const { level, time, msg, ...rest } = entry;
  const when = typeof time === "number" ? new Date(time).toISOString().slice(11, 23) : "";
  const lvl = LEVELS[typeof level === "number" ? level : 30] ?? { name: String(level), color: "" };
  const label = options.color ? `${lvl.color}${lvl.name}${RESET}` : lvl.name;
  const fields = Object.entries(rest)
    .map(([k, v]) => `${k}=${value(v)}`)
    .join(" ");
  return `${[when, label, typeof msg === "string" ? msg : "", fields].filter((p) => p !== "").join(" ")}\n`;
}

/** A pino destination that writes each line through {@link formatLogLine} to `out`. */
export function prettyDestination(out: { write(text: string): unknown }, color: boolean): DestinationStream {
  return { write: (line: string) => void out.write(formatLogLine(line, { color })) };
}
