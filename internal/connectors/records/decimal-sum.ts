import { isLosslessNumber, LosslessNumber } from "../../platform/exact-json.js";

/**
 * `"sum": true` of a field spec (docs/connectors.md, Records and fields): the values a
 * path or expression found — a list, or an object's values (`{store: qty}`) — added
 * as exact decimals. Numbers and numeric strings alike (`"12"`, `"1 234,5"` with the
 * field's `decimalSeparator`); null and empty-string items are skipped.
 *
 * Invariant: nothing found is no value, never 0. No list, an empty list, or a list of
 * nulls and empty strings gives `undefined`, so a field the supplier stopped sending stays visibly
 * absent (coverage, docs/connectors.md, Field coverage) instead of becoming stock 0.
 * An item that is not a number throws {@link SumError}: the record is a reject that
 * names it, nothing is guessed.
 */

/** An item of a sum is not a number (or the found value is not a list): the record is a reject. */
export class SumError extends Error {}

/** Exponents beyond this are refused: a stock or price sum never needs them, and 10^huge would not fit. */
const MAX_EXPONENT = 1_000;
const DECIMAL = /^([+-]?)(\d+)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/;
const GROUP_SPACE = /(?<=\d)[ \u00a0\u202f]+(?=\d)/g;
/** A whole number a double adds exactly, even many of them: at most 15 digits. */
const PLAIN_INTEGER = /^\d{1,15}$/;
/** Doubles stay exact while the running sum is below this; beyond, it moves into the decimal. */
const SMALL = 2 ** 52;
const ZERO: Decimal = { units: 0n, scale: 0 };

interface Decimal {
  /** The value times 10^scale. */
  units: bigint;
  scale: number;
}

function shown(value: unknown): string {
  if (isLosslessNumber(value)) return value.value;
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}

/** The decimal a number or numeric string holds; undefined when it holds none. */
function decimalOf(item: unknown, separator: "," | "." | undefined): Decimal | undefined {
  let text: string;
  if (typeof item === "number") {
    if (!Number.isFinite(item)) return undefined;
    // Exact: JSON numbers reach records as doubles only when the double holds the literal's value.
    text = String(item);
  } else if (isLosslessNumber(item)) text = item.value;
  else if (typeof item === "string") {
    text = item.trim();
    if (separator !== undefined) {
      text = text.replace(GROUP_SPACE, "");
      if (separator === ",") {
        if (text.includes(".")) return undefined;
        text = text.replace(",", ".");
      }
    }
  } else return undefined;
  const match = DECIMAL.exec(text);
  if (!match) return undefined;
  const [, sign, integer = "", fraction = "", exponentText] = match;
  const exponent = exponentText === undefined ? 0 : Number(exponentText);
  if (Math.abs(exponent) > MAX_EXPONENT) return undefined;
  let units = BigInt(integer + fraction);
  let scale = fraction.length - exponent;
  if (scale < 0) {
    units *= 10n ** BigInt(-scale);
    scale = 0;
  }
  return { units: sign === "-" ? -units : units, scale };
}

function add(a: Decimal, b: Decimal): Decimal {
  if (a.scale === b.scale) return { units: a.units + b.units, scale: a.scale };
  const [low, high] = a.scale < b.scale ? [a, b] : [b, a];
  return { units: low.units * 10n ** BigInt(high.scale - low.scale) + high.units, scale: high.scale };
}

/** The sum as a JSON value: a number when it is a safe integer, else the exact decimal text. */
function jsonValueOf(sum: Decimal): number | LosslessNumber {
  let { units, scale } = sum;
  // An integral sum loses its zero fraction ("4.000" + "8" is stock 12, not "12.000"); any
  // other keeps the scale of its most precise item ("1.10" + 2 is "3.10").
  if (scale > 0 && units % 10n ** BigInt(scale) === 0n) {
    units /= 10n ** BigInt(scale);
    scale = 0;
  }
  if (scale === 0 && units >= BigInt(Number.MIN_SAFE_INTEGER) && units <= BigInt(Number.MAX_SAFE_INTEGER))
    return Number(units);
  const negative = units < 0n;
  const digits = (negative ? -units : units).toString().padStart(scale + 1, "0");
  const text = scale === 0 ? digits : `${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
  return new LosslessNumber(negative ? `-${text}` : text);
}

/**
 * The exact sum of `found`'s items, or undefined when it has none.
 * @throws SumError naming the item that is not a number, or a `found` that is neither
 * a list nor an object.
 */
export function sumValues(value: unknown, separator: "," | "." | undefined): unknown {
  if (value === undefined || value === null) return undefined;
  let items: readonly unknown[];
  if (Array.isArray(value)) items = value;
  else if (typeof value === "object" && !isLosslessNumber(value)) items = Object.values(value);
  else throw new SumError(`is not a list or an object to sum: ${shown(value)}`);
  // Whole numbers (most stock) add up as doubles, exact below 2^53; anything else as a decimal.
  let small = 0;
  let any = false;
  let total: Decimal | undefined;
  for (const item of items) {
    if (item === undefined || item === null) continue;
    if (typeof item === "number" && Number.isSafeInteger(item) && Math.abs(item) < SMALL) small += item;
    else if (typeof item === "string" && PLAIN_INTEGER.test(item)) small += Number(item);
    else {
      if (typeof item === "string" && item.trim() === "") continue;
      const decimal = decimalOf(item, separator);
      if (decimal === undefined) throw new SumError(`sums a value that is not a number: ${shown(item)}`);
      total = total === undefined ? decimal : add(total, decimal);
    }
    any = true;
    if (Math.abs(small) >= SMALL) {
      total = add(total ?? ZERO, { units: BigInt(small), scale: 0 });
      small = 0;
    }
  }
  if (!any) return undefined;
  if (total === undefined) return small;
  return jsonValueOf(small === 0 ? total : add(total, { units: BigInt(small), scale: 0 }));
}
