/**
 * Cron slots (docs/operations.md, Schedules): a `cron(<expr> @<zone>)` supplier's slot
 * runs from one fire time to the next, `[fire_n, fire_n+1)`. The expression (croner
 * syntax, 5 fields or 6 with seconds first) is evaluated in its IANA time zone, so
 * `0 3 * * * @Europe/Moscow` is 03:00 Moscow time whatever the host's zone, and a
 * daylight-saving change moves the slot's bounds in UTC, never skips or doubles a day
 * (croner runs a fixed-time job that falls into a gap at the first valid time after
 * it, and a repeated time once).
 *
 * Every instance computes the same slots for the same instant: they depend only on
 * the expression, the zone and the (database's) clock.
 */
import { Cron } from "croner";

/** A parsed `cron(…)` schedule. */
export interface CronSpec {
  /** The expression as written (5 or 6 fields). */
  expression: string;
  /** IANA time zone the expression is read in; `UTC` by default. */
  zone: string;
}

/** One slot, `[startMs, endMs)`. */
export interface Slot {
  startMs: number;
  endMs: number;
}

/** Why a `cron(…)` token was refused, for the config module to name the entry with. */
export class CronSpecError extends Error {
  override readonly name = "CronSpecError";
}

const patterns = new Map<string, Cron>();

function patternOf(spec: CronSpec): Cron {
  const key = `${spec.expression}@${spec.zone}`;
  let cron = patterns.get(key);
  if (cron === undefined) {
    cron = new Cron(spec.expression, { timezone: spec.zone, paused: true, mode: "5-or-6-parts" });
    patterns.set(key, cron);
  }
  return cron;
}

/**
 * Validates a schedule: a well-formed expression, a known zone, and fire times that
 * recur (an expression that never fires, such as `0 0 30 2 *`, has no slots).
 *
 * @throws CronSpecError saying which part is wrong.
 */
export function checkCronSpec(spec: CronSpec, nowMs: number): void {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: spec.zone });
  } catch {
    throw new CronSpecError(
      `unknown time zone ${JSON.stringify(spec.zone)} (use an IANA name such as Europe/Moscow)`,
    );
  }
  let cron: Cron;
  try {
    cron = new Cron(spec.expression, { timezone: spec.zone, paused: true, mode: "5-or-6-parts" });
  } catch (err) {
    const why = err instanceof Error ? err.message.replace(/^CronPattern: /, "") : String(err);
    throw new CronSpecError(`malformed expression ${JSON.stringify(spec.expression)}: ${why}`);
  }
  if (cron.nextRuns(2, new Date(nowMs)).length < 2 || cron.previousRuns(1, new Date(nowMs)).length < 1) {
    throw new CronSpecError(`expression ${JSON.stringify(spec.expression)} does not fire repeatedly`);
  }
}

/** The next `n` fire times strictly after `afterMs`. */
export function cronFireTimes(spec: CronSpec, afterMs: number, n: number): number[] {
  return patternOf(spec)
    .nextRuns(n, new Date(afterMs))
    .map((d) => d.getTime());
}

/** The slot containing `nowMs`: from the latest fire time at or before it to the next one. */
export function cronSlotAt(spec: CronSpec, nowMs: number): Slot {
  const cron = patternOf(spec);
  // croner's previousRuns excludes a run exactly at the reference but includes one earlier in
  // the same second: asking from a millisecond later makes a fire time start its own slot.
  const start = cron.previousRuns(1, new Date(nowMs + 1))[0];
  const end = cron.nextRun(new Date(nowMs));
  if (!start || !end)
    throw new Error(`cron ${spec.expression} @${spec.zone} has no slot at ${new Date(nowMs).toISOString()}`);
  return { startMs: start.getTime(), endMs: end.getTime() };
}

/** The shortest slot among the next `n`: a cron supplier's nominal interval, for display and cache sizing. */
export function shortestCronSlotMs(spec: CronSpec, nowMs: number, n = 16): number {
  const fires = cronFireTimes(spec, nowMs, n + 1);
  let shortest = Number.POSITIVE_INFINITY;
  for (let i = 1; i < fires.length; i++) shortest = Math.min(shortest, (fires[i] ?? 0) - (fires[i - 1] ?? 0));
  return shortest;
}

const zoneFormats = new Map<string, Intl.DateTimeFormat>();

/** `ms` as ISO 8601 in `zone` with its UTC offset, e.g. `2026-12-02T03:00:00+03:00` (`Z` for UTC). */
export function formatInZone(ms: number, zone: string): string {
  if (zone === "UTC") return `${new Date(ms).toISOString().slice(0, 19)}Z`;
  let format = zoneFormats.get(zone);
  if (format === undefined) {
    format = new Intl.DateTimeFormat("en-US", {
      timeZone: zone,
      hourCycle: "h23",
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      second: "2-digit",
    });
    zoneFormats.set(zone, format);
  }
  const part = (type: string) => format.formatToParts(ms).find((p) => p.type === type)?.value ?? "00";
  const wall = `${part("year")}-${part("month")}-${part("day")}T${part("hour")}:${part("minute")}:${part("second")}`;
  const offsetMin = Math.round((Date.parse(`${wall}Z`) - Math.floor(ms / 1000) * 1000) / 60_000);
  const sign = offsetMin < 0 ? "-" : "+";
  const abs = Math.abs(offsetMin);
  return `${wall}${sign}${String(Math.floor(abs / 60)).padStart(2, "0")}:${String(abs % 60).padStart(2, "0")}`;
}
