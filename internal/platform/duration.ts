/**
 * Go-style durations with the units `s`, `m`, `h`, `d`: `90s`, `15m`, `6h`, `1h30m`, `1d`.
 * Returns milliseconds, or `undefined` when the text is not a duration.
 */
const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION = /^(?:\d+(?:\.\d+)?[smhd])+$/;
const PART = /(\d+(?:\.\d+)?)([smhd])/g;

export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (!DURATION.test(trimmed)) return undefined;
  let total = 0;
  for (const match of trimmed.matchAll(PART)) {
    total += Number(match[1]) * (UNIT_MS[match[2] ?? ""] ?? Number.NaN);
  }
  return Number.isFinite(total) ? Math.round(total) : undefined;
}

/** Human form of a duration in ms, e.g. `1h30m`, `90s` → `1m30s`. */
export function formatDuration(ms: number): string {
  if (ms <= 0) return "0s";
  let rest = Math.round(ms / 1000);
  const parts: string[] = [];
  for (const [unit, size] of [
    ["d", 86_400],
    ["h", 3_600],
    ["m", 60],
    ["s", 1],
  ] as const) {
    const n = Math.floor(rest / size);
    if (n > 0) parts.push(`${n}${unit}`);
    rest -= n * size;
  }
  return parts.length ? parts.join("") : `${ms}ms`;
}

/**
 * Human form of an elapsed time that keeps sub-second precision where it matters:
 * `340ms`, `4.2s`, `1m05s`, `2h03m10s`, `12h`, `3d04h`. Negative values count as 0.
 */
export function formatElapsed(ms: number): string {
  const t = Math.max(0, ms);
  if (t < 1_000) return `${Math.round(t)}ms`;
  if (t < 10_000) return `${(Math.floor(t / 100) / 10).toFixed(1)}s`;
  const totalSeconds = Math.floor(t / 1000);
  const d = Math.floor(totalSeconds / 86_400);
  const h = Math.floor((totalSeconds % 86_400) / 3600);
  const m = Math.floor((totalSeconds % 3600) / 60);
  const s = totalSeconds % 60;
  const two = (n: number) => String(n).padStart(2, "0");
  if (d > 0) return `${d}d${two(h)}h`;
  if (h > 0) return `${h}h${m || s ? `${two(m)}m` : ""}${s ? `${two(s)}s` : ""}`;
  if (m > 0) return `${m}m${two(s)}s`;
  return `${s}s`;
}
