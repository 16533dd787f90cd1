import type { FieldsDefinition } from "../config/connector-schema.js";
import type { Offer, Reject } from "../ingestion/ports.js";
import { fitsNumeric, isLosslessNumber, jsonbText } from "../platform/exact-json.js";
import { stripControl } from "../platform/redact.js";
import {
  type CompiledField,
  type CompiledFields,
  compileFields,
  FieldReadError,
  isNulled,
  withDecimalPoint,
} from "./field-spec.js";

/**
 * One raw supplier record → a validated {@link Offer}, or a {@link Reject}
 * that keeps the raw record and says which field was wrong and why.
 *
 * Prices never pass through a float (docs/architecture.md, The invariants (4); docs/connectors.md, Validation): a string is
 * checked as a decimal and kept as sent; a JSON number arrives either as a double
 * that holds the literal's exact value (the page scan made sure, so `String(n)` is
 * that value) or as a `LosslessNumber` carrying the literal's own text.
 * PostgreSQL's `numeric` stores the text digit for digit.
 */

/** The common case, checked first without capturing: `12`, `0.000345`, `12345678901234567890.5`. */
const PLAIN_DECIMAL = /^\d+(?:\.\d+)?$/;
/** A non-negative decimal, optionally with an exponent: `12`, `0.000345`, `1.5e3`, `2E-7`. */
const DECIMAL = /^(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;
const MAX_PRICE_CHARS = 100;
const CURRENCY = /^[A-Za-z]{3}$/;
const MAX_SKU = 256;
const MAX_NAME = 1_000;
/** At most this many bytes of JSON of attributes per offer (docs/connectors.md, Records and fields). */
export const MAX_ATTRIBUTES_BYTES = 16_384;

class FieldError extends Error {}

/** A short, printable form of a bad value for reject reasons. */
function show(value: unknown): string {
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

function toSku(value: unknown, path: string): string {
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

function toPrice(value: unknown, path: string, field: CompiledField | undefined): string {
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
  if (PLAIN_DECIMAL.test(text)) return text;
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

function toCurrency(value: unknown, path: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "string" || !CURRENCY.test(value.trim())) {
    return fail("currency", path, value, "is not a 3-letter ISO 4217 code");
  }
  return value.trim().toUpperCase();
}

function toStock(value: unknown, path: string, field: CompiledField): number | null {
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

function toName(value: unknown, path: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "string") return fail("name", path, value, "is not a string");
  const clean = stripControl(value).trim();
  if (clean.length > MAX_NAME)
    fail("name", path, value, `is longer than ${MAX_NAME} characters (${clean.length})`);
  return clean === "" ? null : clean;
}

/** A field's value as read; `FieldReadError` (a failing expression) becomes a FieldError naming it. */
function readRaw(name: string, field: CompiledField, raw: object): unknown {
  try {
    return field.read(raw);
  } catch (err) {
    if (err instanceof FieldReadError) throw new FieldError(`${name} (${field.source}) ${err.message}`);
    throw err;
  }
}

/** A field's value after `nullIf`. */
function read(name: string, field: CompiledField, raw: object): unknown {
  const value = readRaw(name, field, raw);
  return isNulled(field, value) ? null : value;
}

function compiledFor(fields: FieldsDefinition | CompiledFields): CompiledFields {
  return Array.isArray((fields as CompiledFields).attributes)
    ? (fields as CompiledFields)
    : compileFields(fields as FieldsDefinition);
}

/**
 * Values an enrichment (docs/connectors.md, Enrichment) gives one record: per field, the
 * enrichment's compiled spec and the enrichment record it reads from
 * (undefined: no record for this SKU, so the field is unset). They replace the
 * main record's fields of the same name before validation.
 */
export interface EnrichedValues {
  fields: Partial<Record<"price" | "name" | "currency" | "stock", EnrichedValue>>;
  attributes: Record<string, EnrichedValue>;
}

export interface EnrichedValue {
  field: CompiledField;
  record: object | undefined;
}

/** The field that applies and its value after `nullIf`: the enrichment's when it gives one. */
function pick(
  name: "name" | "currency" | "stock",
  main: CompiledField | undefined,
  raw: object,
  enriched: EnrichedValues | undefined,
): [CompiledField | undefined, unknown] {
  const e = enriched?.fields[name];
  if (e === undefined) return [main, main ? read(name, main, raw) : undefined];
  return [e.field, e.record === undefined ? undefined : read(name, e.field, e.record)];
}

function toAttributes(
  fields: CompiledFields,
  raw: object,
  enriched: EnrichedValues | undefined,
): Record<string, unknown> | null {
  if (fields.attributes.length === 0 && enriched === undefined) return null;
  let attributes: Record<string, unknown> | null = null;
  for (const [name, field] of fields.attributes) {
    if (enriched?.attributes[name] !== undefined) continue;
    const value = read(`attributes.${name}`, field, raw);
    if (value === undefined || value === null) continue;
    attributes ??= {};
    attributes[name] = value;
  }
  for (const [name, e] of Object.entries(enriched?.attributes ?? {})) {
    const value = e.record === undefined ? undefined : read(`attributes.${name}`, e.field, e.record);
    if (value === undefined || value === null) continue;
    attributes ??= {};
    attributes[name] = value;
  }
  if (attributes !== null) {
    const bytes = Buffer.byteLength(jsonbText(attributes));
    if (bytes > MAX_ATTRIBUTES_BYTES) {
      throw new FieldError(`attributes are larger than ${MAX_ATTRIBUTES_BYTES} bytes of JSON (${bytes})`);
    }
  }
  return attributes;
}

/**
 * Validates one record against the connector's field mapping (plain dot paths, or
 * field specs compiled by {@link compileFields}). Never throws.
 */
export function normalizeRecord(
  raw: unknown,
  fields: FieldsDefinition | CompiledFields,
  enriched?: EnrichedValues,
): { offer: Offer } | { reject: Reject } {
  const mapping = compiledFor(fields);
  try {
    if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
      throw new FieldError(`record is not an object: ${show(raw)}`);
    }
    const { sku } = mapping;
    let offer: Offer;
    if (enriched === undefined) {
      // The hot path of connectors without enrich: the main record's fields only.
      const { price, currency, stock, name } = mapping;
      // No price field: an enrichment maps it, and this record had no SKU to enrich.
      const priceValue = price ? readRaw("price", price, raw) : undefined;
      offer = {
        sku: toSku(read("sku", sku, raw), sku.source),
        // Null only through nullIf (a price on request); a missing price is a reject.
        price:
          price && isNulled(price, priceValue) ? null : toPrice(priceValue, price?.source ?? "enrich", price),
        currency: currency ? toCurrency(read("currency", currency, raw), currency.source) : null,
        stock: stock ? toStock(read("stock", stock, raw), stock.source, stock) : null,
        name: name ? toName(read("name", name, raw), name.source) : null,
      };
    } else {
      const e = enriched.fields.price;
      const price = e?.field ?? mapping.price;
      const source = e?.record ?? (e === undefined ? raw : undefined);
      const priceValue =
        source === undefined || price === undefined ? undefined : readRaw("price", price, source);
      const [currency, currencyValue] = pick("currency", mapping.currency, raw, enriched);
      const [stock, stockValue] = pick("stock", mapping.stock, raw, enriched);
      const [name, nameValue] = pick("name", mapping.name, raw, enriched);
      offer = {
        sku: toSku(read("sku", sku, raw), sku.source),
        price:
          price && isNulled(price, priceValue) ? null : toPrice(priceValue, price?.source ?? "enrich", price),
        currency: currency ? toCurrency(currencyValue, currency.source) : null,
        stock: stock ? toStock(stockValue, stock.source, stock) : null,
        name: name ? toName(nameValue, name.source) : null,
      };
    }
    const attributes = toAttributes(mapping, raw, enriched);
    if (attributes !== null) offer.attributes = attributes;
    return { offer };
  } catch (err) {
    if (err instanceof FieldError) return { reject: { reason: err.message, raw } };
    throw err;
  }
}

/** The SKU of a raw record as validation would read it, or undefined when it has none valid. */
export function skuOfRecord(raw: unknown, mapping: CompiledFields): string | undefined {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) return undefined;
  return skuOfValue(raw, mapping.sku);
}

/** The SKU a field gives on `record` (an enrichment's `key`), or undefined. */
export function skuOfValue(record: object, field: CompiledField): string | undefined {
  try {
    return toSku(read("sku", field, record), field.source);
  } catch (err) {
    if (err instanceof FieldError) return undefined;
    throw err;
  }
}

/** Splits a page's records into offers and rejects, in order. */
export function normalizeRecords(
  records: readonly unknown[],
  fields: FieldsDefinition | CompiledFields,
  enriched?: readonly (EnrichedValues | undefined)[],
): { offers: Offer[]; rejects: Reject[] } {
  const mapping = compiledFor(fields);
  const offers: Offer[] = [];
  const rejects: Reject[] = [];
  for (let i = 0; i < records.length; i++) {
    const raw = records[i];
    const result = normalizeRecord(raw, mapping, enriched?.[i]);
    if ("offer" in result) offers.push(result.offer);
    else rejects.push(result.reject);
  }
  return { offers, rejects };
}
