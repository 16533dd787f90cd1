import type { FieldsDefinition } from "../config/connector-schema.js";
import type { Offer, Reject } from "../ingestion/ports.js";
import { stripControl } from "../platform/redact.js";
import { readDotPath } from "./dot-path.js";

/**
 * One raw supplier record → a validated {@link Offer}, or a {@link Reject}
 * that keeps the raw record and says which field was wrong and why.
 * Prices never pass through a float: strings are checked as decimals and JSON
 * numbers are converted with `String(n)`, refusing what that cannot keep exact.
 */

const PRICE = /^\d{1,15}(\.\d{1,6})?$/;
const CURRENCY = /^[A-Za-z]{3}$/;
const MAX_SKU = 256;
const MAX_NAME = 1_000;

class FieldError extends Error {}

/** A short, printable form of a bad value for reject reasons. */
function show(value: unknown): string {
  let text: string;
  if (value === undefined) return "missing";
  if (typeof value === "string") text = JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value);
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

function toSku(value: unknown, path: string): string {
  let text: string;
  if (typeof value === "string") text = value.trim();
  else if (typeof value === "number" && Number.isSafeInteger(value)) text = String(value);
  else if (value === undefined || value === null) return fail("sku", path, value, "is missing");
  else return fail("sku", path, value, "must be a string or an integer");
  if (text.length === 0) fail("sku", path, value, "is empty");
  if (text.length > MAX_SKU)
    fail("sku", path, value, `is longer than ${MAX_SKU} characters (${text.length})`);
  return text;
}

function toPrice(value: unknown, path: string): string {
  let text: string;
  if (typeof value === "string") text = value.trim();
  else if (typeof value === "number") {
    if (!Number.isFinite(value)) fail("price", path, value, "is not a finite number");
    if (value < 0) fail("price", path, value, "is negative");
    // String(n) is the shortest exact round-trip form; exponent forms and >15 digits are refused below.
    text = String(value);
  } else if (value === undefined || value === null) return fail("price", path, value, "is missing");
  else return fail("price", path, value, "must be a decimal string or a number");
  if (!PRICE.test(text)) {
    fail("price", path, value, "is not a non-negative decimal with at most 15 integer and 6 fraction digits");
  }
  if (typeof value === "number" && text.replace(".", "").replace(/^0+(?=\d)/, "").length > 15)
    fail("price", path, value, "has more than 15 significant digits");
  return text;
}

function toCurrency(value: unknown, path: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "string" || !CURRENCY.test(value.trim())) {
    return fail("currency", path, value, "is not a 3-letter ISO 4217 code");
  }
  return value.trim().toUpperCase();
}

function toStock(value: unknown, path: string): number | null {
  if (value === undefined || value === null) return null;
  let n: number;
  if (typeof value === "number") n = value;
  else if (typeof value === "string" && /^\s*-?\d+\s*$/.test(value)) n = Number(value);
  else return fail("stock", path, value, "is not an integer");
  if (!Number.isSafeInteger(n)) fail("stock", path, value, "is not an integer");
  if (n < 0) fail("stock", path, value, "is negative");
  if (n > 2_147_483_647) fail("stock", path, value, "does not fit a 32-bit integer");
  return n;
}

function toName(value: unknown, path: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "string") return fail("name", path, value, "is not a string");
  const clean = stripControl(value).trim();
  if (clean.length > MAX_NAME)
    fail("name", path, value, `is longer than ${MAX_NAME} characters (${clean.length})`);
  return clean === "" ? null : clean;
}

/** Validates one record against the connector's field mapping. Never throws. */
export function normalizeRecord(
  raw: unknown,
  fields: FieldsDefinition,
): { offer: Offer } | { reject: Reject } {
  try {
    if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
      throw new FieldError(`record is not an object: ${show(raw)}`);
    }
    const offer: Offer = {
      sku: toSku(readDotPath(raw, fields.sku), fields.sku),
      price: toPrice(readDotPath(raw, fields.price), fields.price),
      currency: fields.currency ? toCurrency(readDotPath(raw, fields.currency), fields.currency) : null,
      stock: fields.stock ? toStock(readDotPath(raw, fields.stock), fields.stock) : null,
      name: fields.name ? toName(readDotPath(raw, fields.name), fields.name) : null,
    };
    return { offer };
  } catch (err) {
    if (err instanceof FieldError) return { reject: { reason: err.message, raw } };
    throw err;
  }
}

/** Splits a page's records into offers and rejects, in order. */
export function normalizeRecords(
  records: readonly unknown[],
  fields: FieldsDefinition,
): { offers: Offer[]; rejects: Reject[] } {
  const offers: Offer[] = [];
  const rejects: Reject[] = [];
  for (const raw of records) {
    const result = normalizeRecord(raw, fields);
    if ("offer" in result) offers.push(result.offer);
    else rejects.push(result.reject);
  }
  return { offers, rejects };
}
