import { type CronSpec, CronSpecError, checkCronSpec, shortestCronSlotMs } from "../ingestion/cron-slots.js";
import { formatDuration, parseDuration } from "../platform/duration.js";
import { ConfigError } from "../platform/errors.js";
import type { SupplierConfig } from "./types.js";

/**
 * `SUPPLIER_SYNC_SUPPLIERS`: `name:interval[:enabled]`, comma separated (docs/operations.md, Environment).
 * The interval may be a cron schedule instead, `cron(<expr>)` or `cron(<expr> @<zone>)`
 * (docs/operations.md, Schedules); commas and colons inside its parentheses belong to it.
 *
 * Invariants of every list this module returns: at least one entry, names match
 * {@link SUPPLIER_NAME}, no duplicate names, intervals are whole seconds between
 * {@link MIN_INTERVAL_MS} and {@link MAX_INTERVAL_MS}, at least one supplier enabled.
 * Anything else is a {@link ConfigError} naming the variable and the offending token.
 */

export const SUPPLIERS_VAR = "SUPPLIER_SYNC_SUPPLIERS";

/** Supplier names double as file names (`<name>.json`), label values and lock keys: keep them plain. */
export const SUPPLIER_NAME = /^[a-z][a-z0-9_-]{0,62}$/;

export const MIN_INTERVAL_MS = 1_000;
/**
 * Upper bound of an interval. Slots are aligned to the epoch and multiplied into
 * timestamps; a year keeps every derived time well inside the safe range.
 */
export const MAX_INTERVAL_MS = 365 * 86_400_000;

/**
 * Quotes a token for an error message: JSON string syntax, so control characters
 * show as escapes (`"e\u001btm"`) instead of acting on a terminal; long tokens cut.
 */
export function quoteToken(token: string, maxLength = 80): string {
  const cut = token.length > maxLength ? `${token.slice(0, maxLength)}…` : token;
  return JSON.stringify(cut).replace(
    /[\u007f-\u009f\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}

function reject(problem: string): never {
  throw new ConfigError(`${SUPPLIERS_VAR}: ${problem}`);
}

/**
 * Parses one interval token into milliseconds. Whole seconds only: the ticker
 * (croner) and the slot arithmetic work in seconds, and `check-config` prints
 * the interval back exactly.
 */
function parseInterval(token: string, entry: string): number {
  const where = `entry ${quoteToken(entry)}: interval ${quoteToken(token)}`;
  if (token.startsWith("-")) reject(`${where} must not be negative`);
  const ms = parseDuration(token);
  if (ms === undefined) {
    reject(`${where} is not a duration (use units s, m, h, d, e.g. 90s, 15m, 6h, 1h30m)`);
  }
  if (ms === 0) reject(`${where} must be greater than zero`);
  if (ms < MIN_INTERVAL_MS) reject(`${where} is below the minimum of 1s`);
  if (ms > MAX_INTERVAL_MS) reject(`${where} is above the maximum of 365d`);
  if (ms % 1_000 !== 0) reject(`${where} must be a whole number of seconds`);
  return ms;
}

const CRON_TOKEN = /^cron\((.*)\)$/s;

/**
 * Parses `cron(<expr>)` / `cron(<expr> @<zone>)`: croner syntax, 5 fields or 6 with
 * seconds first, read in the IANA zone (UTC by default). `nowMs` only anchors the check
 * that the expression fires repeatedly.
 */
function parseCron(token: string, entry: string, nowMs: number): CronSpec {
  const where = `entry ${quoteToken(entry)}: schedule ${quoteToken(token)}`;
  const inner = CRON_TOKEN.exec(token)?.[1]?.trim() ?? "";
  const at = inner.lastIndexOf("@");
  const expression = (at < 0 ? inner : inner.slice(0, at)).trim().replace(/\s+/g, " ");
  const zone = at < 0 ? "UTC" : inner.slice(at + 1).trim();
  if (expression === "") reject(`${where} has no expression (e.g. cron(0 3 * * * @Europe/Moscow))`);
  if (at >= 0 && zone === "") reject(`${where} has an empty time zone after @`);
  const spec = { expression, zone };
  try {
    checkCronSpec(spec, nowMs);
  } catch (err) {
    if (err instanceof CronSpecError) reject(`${where}: ${err.message}`);
    throw err;
  }
  return spec;
}

/** Splits on `separator` outside parentheses, so a cron expression keeps its commas and colons. */
function splitOutsideParens(text: string, separator: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = "";
  for (const c of text) {
    if (c === "(") depth++;
    else if (c === ")") depth = Math.max(0, depth - 1);
    if (c === separator && depth === 0) {
      parts.push(current);
      current = "";
    } else {
      current += c;
    }
  }
  parts.push(current);
  return parts;
}

function parseEnabled(token: string, entry: string): boolean {
  if (token === "true") return true;
  if (token === "false") return false;
  return reject(`entry ${quoteToken(entry)}: enabled flag ${quoteToken(token)} must be true or false`);
}

function parseEntry(entry: string, nowMs: number): SupplierConfig {
  const parts = splitOutsideParens(entry, ":").map((part) => part.trim());
  if (parts.length < 2 || parts.length > 3) {
    reject(
      `malformed entry ${quoteToken(entry)}: expected name:interval[:enabled], got ${parts.length} part(s)`,
    );
  }
  const [name = "", interval = "", enabled] = parts;
  if (!SUPPLIER_NAME.test(name)) {
    reject(
      `entry ${quoteToken(entry)}: supplier name ${quoteToken(name)} must match ${SUPPLIER_NAME.source} ` +
        "(lower-case letter first, then lower-case letters, digits, _ or -, at most 63 characters)",
    );
  }
  const flag = enabled === undefined ? true : parseEnabled(enabled, entry);
  if (interval.startsWith("cron(") || interval.startsWith("cron ")) {
    if (!CRON_TOKEN.test(interval)) {
      reject(
        `entry ${quoteToken(entry)}: schedule ${quoteToken(interval)} must be cron(<expr>) or cron(<expr> @<zone>)`,
      );
    }
    const cron = parseCron(interval, entry, nowMs);
    return { name, intervalMs: shortestCronSlotMs(cron, nowMs), enabled: flag, cron };
  }
  return { name, intervalMs: parseInterval(interval, entry), enabled: flag };
}

/**
 * Parses `SUPPLIER_SYNC_SUPPLIERS`. Whitespace around entries and their parts is
 * ignored; an empty entry (`a:1h,,b:1h`, a trailing comma) is an error because it
 * usually means a supplier was deleted by a bad edit.
 *
 * @throws ConfigError naming `SUPPLIER_SYNC_SUPPLIERS` and the offending token.
 */
export function parseSuppliers(text: string | undefined, nowMs: number = Date.now()): SupplierConfig[] {
  if (text === undefined || text.trim() === "") {
    reject("is required: a comma-separated list of name:interval[:enabled], e.g. etm:6h:true,iek:12h");
  }
  const suppliers: SupplierConfig[] = [];
  const seen = new Set<string>();
  const entries = splitOutsideParens(text, ",");
  for (const [index, raw] of entries.entries()) {
    const entry = raw.trim();
    if (entry === "") reject(`entry ${index + 1} of ${entries.length} is empty (stray comma?)`);
    const supplier = parseEntry(entry, nowMs);
    if (seen.has(supplier.name)) reject(`duplicate supplier name ${quoteToken(supplier.name)}`);
    seen.add(supplier.name);
    suppliers.push(supplier);
  }
  if (!suppliers.some((s) => s.enabled)) {
    reject(`every supplier is disabled (${suppliers.map((s) => s.name).join(", ")}): enable at least one`);
  }
  return suppliers;
}

/** Inverse of {@link parseSuppliers}: `parseSuppliers(formatSuppliers(x))` equals `x` for every valid `x`. */
export function formatSuppliers(suppliers: readonly SupplierConfig[]): string {
  return suppliers.map((s) => `${s.name}:${formatSchedule(s)}:${s.enabled}`).join(",");
}

/** A supplier's schedule as `SUPPLIER_SYNC_SUPPLIERS` writes it: `6h`, `cron(0 3 * * * @Europe/Moscow)`. */
export function formatSchedule(s: SupplierConfig): string {
  if (s.cron) return `cron(${s.cron.expression}${s.cron.zone === "UTC" ? "" : ` @${s.cron.zone}`})`;
  return formatDuration(s.intervalMs);
}
