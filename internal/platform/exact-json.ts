import { compareNumber, isLosslessNumber, LosslessNumber, parse, stringify } from "lossless-json";

/**
 * JSON numbers kept digit for digit (docs/architecture.md, The invariants (4); docs/connectors.md, Validation).
 *
 * `JSON.parse` turns every number literal into a double, which keeps only about
 * 15–17 significant digits: `4821.1234567890123457` would come back as
 * `4821.123456789012`. Most pages hold no such literal, so the page scan
 * ((`internal/platform/json-body.ts`)) asks {@link isExactAsDouble} of each literal it steps
 * over, and only a page that holds at least one inexact literal is parsed by
 * {@link parseExactJson} (lossless-json, a JavaScript parser several times slower than
 * the native one). There, literals a double keeps exactly are plain numbers as
 * usual, and the others are `LosslessNumber`s carrying their source text.
 */

export { isLosslessNumber, LosslessNumber };

/** Longest literal, in characters, a double always keeps exactly when it has no exponent. */
export const EXACT_PLAIN_CHARS = 15;

/**
 * True when the double nearest to this JSON number literal has the same decimal
 * value as the literal (`1.50`, `1.5e3`, `0.1`, `-7`), so `Number(literal)` loses
 * nothing but insignificant zeros; false for `12345678901234567890`,
 * `4821.1234567890123457`, `1e400`, `1e-400`. Fast path: a literal of at most 15
 * characters without an exponent has at most 15 significant digits, which every
 * double keeps (DBL_DIG).
 */
export function isExactAsDouble(literal: string): boolean {
  if (literal.length <= EXACT_PLAIN_CHARS) {
    let plain = true;
    for (let i = 0; i < literal.length; i++) {
      const c = literal.charCodeAt(i);
      if (c === 0x65 /* e */ || c === 0x45 /* E */) {
        plain = false;
        break;
      }
    }
    if (plain) return true;
  }
  const double = Number(literal);
  // NaN: not a number literal at all, which JSON.parse will report.
  if (Number.isNaN(double)) return true;
  if (!Number.isFinite(double)) return false;
  try {
    return compareNumber(literal, String(double)) === 0;
  } catch {
    return true;
  }
}

function parseNumber(literal: string): unknown {
  return isExactAsDouble(literal) ? Number(literal) : new LosslessNumber(literal);
}

/** `JSON.parse` keeps the last of repeated keys; so does this. */
function lastWins({ newValue }: { newValue: unknown }): unknown {
  return newValue;
}

/**
 * Parses JSON like `JSON.parse`, except that number literals a double would not keep
 * exactly become `LosslessNumber`s holding their text.
 * @throws SyntaxError for malformed text.
 */
export function parseExactJson(text: string): unknown {
  return parse(text, null, { parseNumber, onDuplicateKey: lastWins });
}

/** PostgreSQL `numeric` (and so jsonb): at most 131,072 digits before the point and a scale of at most 16,383. */
const NUMERIC_MAX_INTEGER_DIGITS = 131_072;
const NUMERIC_MAX_SCALE = 16_383;

/**
 * True when PostgreSQL's `numeric` can hold the decimal `integer.fraction × 10^exponent`
 * (digit strings, no sign). Beyond its range numeric input fails, and with it the
 * whole page's transaction.
 */
export function fitsNumeric(integer: string, fraction: string, exponent: number): boolean {
  const lead = (integer + fraction).search(/[1-9]/);
  const integerDigits = lead < 0 ? 0 : integer.length - lead + exponent;
  return integerDigits <= NUMERIC_MAX_INTEGER_DIGITS && fraction.length - exponent <= NUMERIC_MAX_SCALE;
}

const NUMBER_LITERAL = /^-?(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/**
 * A `LosslessNumber` for jsonb: itself when numeric can hold it, else its text as a
 * JSON string (every digit kept, and the page's transaction does not fail on it).
 */
function forJsonb(value: LosslessNumber): LosslessNumber | string {
  const m = NUMBER_LITERAL.exec(value.value);
  return m && fitsNumeric(m[1] ?? "", m[2] ?? "", Number(m[3] ?? 0)) ? value : value.value;
}

/** jsonb refuses `\u0000` in strings: it becomes U+FFFD. */
export function stripNul(text: string): string {
  return text.includes("\u0000") ? text.replaceAll("\u0000", "\uFFFD") : text;
}

/**
 * JSON text for a jsonb column of a value that may hold `LosslessNumber`s (written as
 * their own digits) and BigInts, with `\u0000` in strings replaced (see {@link stripNul}).
 * @throws for a value JSON cannot express (a cycle).
 */
export function stringifyForJsonb(value: unknown): string | undefined {
  const replacer = (_key: string, item: unknown): unknown => {
    if (typeof item === "string") return stripNul(item);
    if (isLosslessNumber(item)) return forJsonb(item);
    return item;
  };
  return stringify(value, replacer as Parameters<typeof stringify>[1]);
}

/**
 * {@link stringifyForJsonb} of an object, by the native `JSON.stringify` when nothing
 * in it needs more (no `LosslessNumber`, whose native form is an object with an
 * `isLosslessNumber` key, no BigInt, no NUL). Not remembered per object: a WeakMap
 * entry per offer cost more in garbage collection than stringifying the attributes
 * again when they are stored (bench/README.md, Figures behind code choices).
 */
export function jsonbText(value: object): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    text = undefined; // a BigInt
  }
  if (text === undefined || text.includes('"isLosslessNumber":true') || text.includes("\\u0000")) {
    text = stringifyForJsonb(value) ?? "null";
  }
  return text;
}
