import { fitsNumeric, isLosslessNumber } from "../../platform/exact-json.js";
import { stripControl } from "../../platform/redact.js";
import { type CompiledField, withDecimalPoint } from "./field-spec.js";

/**
 * Validation of one field's value (docs/connectors.md, Validation): SKU, price, currency,
 * stock and name, each accepted as the store keeps it or refused with a {@link FieldError}
 * that names the field, its source and the value.
 *
 * Prices never pass through a float (docs/architecture.md, The invariants (4)): a string is
 * checked as a decimal and kept as sent; a JSON number arrives either as a double
 * that holds the literal's exact value (the page scan made sure, so `String(n)` is
 * that value) or as a `LosslessNumber` carrying the literal's own text.
 * PostgreSQL's `numeric` stores the text digit for digit.
 */

/** A non-negative decimal, optionally with an exponent: `12`, `0.000345`, `1.5e3`, `2E-7`. */
const DECIMAL = /^(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;
const MAX_PRICE_CHARS = 100;
const CURRENCY = /^[A-Za-z]{3}$/;
const MAX_SKU = 256;
const MAX_NAME = 1_000;
/** At most this many bytes of JSON of attributes per offer (docs/connectors.md, Records and fields). */
export const MAX_ATTRIBUTES_BYTES = 16_384;

/** A field's value is invalid: the record is a reject with this message. */
export class FieldError extends Error {}

/** A short, printable form of a bad value for reject reasons. */
export function show(value: unknown): string {
  let text: string;
  if (value === undefined) return "missing";
  if (isLosslessNumber(value)) text = value.value.length > 80 ? `${value.value.slice(0, 80)}…` : value.value;
  else if (typeof value === "string")
    text = JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value);
  else {
    try {
      text = JSON.stringify(value) ?? String(value);
    } catch {
      text = String(value);
    }
    if (text.length > 80) text = `${text.slice(0, 80)}…`;
  }
  return stripControl(text);
}

function fail(field: string, path: string, value: unknown, why: string): never {
  throw new FieldError(`${field} (${path}) ${why}: ${show(value)}`);
}

export function toSku(value: unknown, path: string): string {
  let text: string;
  if (typeof value === "string") text = value.trim();
  else if (typeof value === "number" && Number.isSafeInteger(value)) text = String(value);
  else if (isLosslessNumber(value) && /^-?\d+$/.test(value.value)) text = value.value;
  else if (value === undefined || value === null) return fail("sku", path, value, "is missing");
  else return fail("sku", path, value, "must be a string or an integer");
  if (text.length === 0) fail("sku", path, value, "is empty");
  if (text.length > MAX_SKU)
    fail("sku", path, value, `is longer than ${MAX_SKU} characters (${text.length})`);
  return text;
}

export function toPrice(value: unknown, path: string, field: CompiledField | undefined): string {
  let text: string;
  if (typeof value === "string") {
    const decimal = field ? withDecimalPoint(field, value.trim()) : value.trim();
    if (decimal === undefined)
      return fail("price", path, value, "is not a decimal number with ',' as its separator");
    text = decimal;
  } else if (typeof value === "number") {
    if (!Number.isFinite(value)) fail("price", path, value, "is not a finite number");
    // The page scan parsed this literal as a double only because the double holds its exact value.
    text = Object.is(value, -0) ? "0" : String(value);
  } else if (isLosslessNumber(value)) text = value.value;
  else if (value === undefined || value === null) return fail("price", path, value, "is missing");
  else return fail("price", path, value, "must be a decimal string or a number");
  if (text.length === 0) fail("price", path, value, "is empty");
  if (text.length > MAX_PRICE_CHARS) {
    fail("price", path, value, `is longer than ${MAX_PRICE_CHARS} characters (${text.length})`);
  }
  if (isPlainDecimal(text)) return text;
  const sign = text.charCodeAt(0);
  const negative = sign === 0x2d; /* - */
  const match = DECIMAL.exec(negative || sign === 0x2b /* + */ ? text.slice(1) : text);
  if (!match) return fail("price", path, value, "is not a decimal number");
  const [, integer = "", fraction = "", exponentText] = match;
  if (negative) {
    if (/[1-9]/.test(integer + fraction)) fail("price", path, value, "is negative");
    return "0";
  }
  if (exponentText !== undefined) {
    // numeric accepts any exponent whose value fits its range; beyond it the page would fail.
    if (!fitsNumeric(integer, fraction, Number(exponentText))) {
      fail("price", path, value, "is out of the range of PostgreSQL numeric");
    }
  }
  return text;
}

/**
 * The common case, checked first without a regular expression: digits, optionally one
 * `.` between digits (`12`, `0.000345`, `12345678901234567890.5`; what
 * `/^\d+(?:\.\d+)?$/` matches).
 */
function isPlainDecimal(text: string): boolean {
  const length = text.length;
  let point = -1;
  for (let i = 0; i < length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x30 && c <= 0x39) continue;
    if (c !== 0x2e /* . */ || point >= 0) return false;
    point = i;
  }
  return length > 0 && point !== 0 && point !== length - 1;
}

export function toCurrency(value: unknown, path: string): string | null {
  if (value === undefined || value === null) return null;
  // Most suppliers already send "RUB": that string itself, not two copies of it, and
  // no regular expression run for it (two per offer were a tenth of normalisation's profile).
  if (typeof value === "string" && isUpperCode(value)) return value;
  if (typeof value !== "string" || !CURRENCY.test(value.trim())) {
    return fail("currency", path, value, "is not a 3-letter ISO 4217 code");
  }
  return value.trim().toUpperCase();
}

/** Exactly three characters A–Z: already the stored form. */
function isUpperCode(value: string): boolean {
  if (value.length !== 3) return false;
  const a = value.charCodeAt(0);
  const b = value.charCodeAt(1);
  const c = value.charCodeAt(2);
  return a >= 0x41 && a <= 0x5a && b >= 0x41 && b <= 0x5a && c >= 0x41 && c <= 0x5a;
}

export function toStock(value: unknown, path: string, field: CompiledField): number | null {
  if (value === undefined || value === null) return null;
  let n: number;
  if (typeof value === "number") n = value;
  else if (typeof value === "string") {
    // An integral decimal (`12`, `12.0`, `1 234,00` with `decimalSeparator: ","`) is a stock.
    const text = withDecimalPoint(field, value.trim());
    n = text !== undefined && /^-?\d+(\.0+)?$/.test(text) ? Number(text) : Number.NaN;
  }
  // Only literals a double cannot hold arrive as LosslessNumber: too large, or not integral.
  else if (isLosslessNumber(value)) n = /^-?\d+$/.test(value.value) ? Number(value.value) : Number.NaN;
  else return fail("stock", path, value, "is not an integer");
  if (!Number.isInteger(n)) fail("stock", path, value, "is not an integer");
  if (n < 0) fail("stock", path, value, "is negative");
  if (n > 2_147_483_647) fail("stock", path, value, "does not fit a 32-bit integer");
  return n;
}

export function toName(value: unknown, path: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "string") return fail("name", path, value, "is not a string");
  const clean = stripControl(value).trim();
  if (clean.length > MAX_NAME)
    fail("name", path, value, `is longer than ${MAX_NAME} characters (${clean.length})`);
  return clean === "" ? null : clean;
}
