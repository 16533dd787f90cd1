import type { FieldCoverage, Offer, Reject } from "../../ingestion/ports.js";
import { readDotPath } from "../../platform/dot-path.js";
import { jsonbText } from "../../platform/exact-json.js";
import type { FieldsDefinition } from "../schema/connector-schema.js";
import { type CoveragePlan, coverageOf, coveragePlan, FIXED_SLOTS, newCounts, SLOT } from "./coverage.js";
import {
  type CompiledField,
  type CompiledFields,
  compileFields,
  FieldReadError,
  isNulledOn,
} from "./field-spec.js";
import {
  FieldError,
  MAX_ATTRIBUTES_BYTES,
  show,
  toCurrency,
  toName,
  toPrice,
  toSku,
  toStock,
} from "./field-validation.js";

export { MAX_ATTRIBUTES_BYTES };

/**
 * One raw supplier record → a validated {@link Offer}, or a {@link Reject}
 * that keeps the raw record and says which field was wrong and why
 * (field-validation.ts), counting on the way how many records gave each mapped
 * field a value (coverage.ts).
 */

/**
 * A read that failed (an expression or a sum that failed on this record). Every field of
 * a record is read before any is validated, so each is counted for coverage whatever
 * the record's fate; the failure is thrown when validation reaches that field.
 */
class Failed {
  constructor(readonly error: FieldError) {}
}

function readOrFail(field: CompiledField, record: object, name: string, attribute = false): unknown {
  const segments = field.segments;
  if (segments !== undefined) return readDotPath(record, segments);
  try {
    return field.read(record);
  } catch (err) {
    if (!(err instanceof FieldReadError)) throw err;
    const label = attribute ? `attributes.${name}` : name;
    return new Failed(new FieldError(`${label} (${field.source}) ${err.message}`));
  }
}

/** A value for coverage: found, not null, not a failed read. */
function found(value: unknown): boolean {
  return value !== undefined && value !== null && !(value instanceof Failed);
}

/** The value validation sees: a failed read thrown, `nullIf` / `nullWhen` applied on `record`. */
function settled(field: CompiledField, value: unknown, record: object | undefined): unknown {
  if (value instanceof Failed) throw value.error;
  return record !== undefined && isNulledOn(field, value, record) ? null : value;
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

/** One fixed field of one record: the spec that applies, the record it reads, the value found. */
interface Read {
  field: CompiledField | undefined;
  record: object | undefined;
  value: unknown;
}

/** The field that applies: the enrichment's when it maps one, else the main record's. */
function pick(
  name: "price" | "name" | "currency" | "stock",
  main: CompiledField | undefined,
  raw: object,
  enriched: EnrichedValues,
): Read {
  const e = enriched.fields[name];
  const field = e === undefined ? main : e.field;
  const record = e === undefined ? raw : e.record;
  const value = field === undefined || record === undefined ? undefined : readOrFail(field, record, name);
  return { field, record, value };
}

interface AttributesRead {
  readonly attributes: Record<string, unknown> | null;
  readonly failed: Failed | undefined;
}

const NO_ATTRIBUTES: AttributesRead = Object.freeze({ attributes: null, failed: undefined });

/** The attributes of one record, read and counted; the first failed read kept for validation. */
function readAttributes(
  fields: CompiledFields,
  raw: object,
  enriched: EnrichedValues | undefined,
  counts: number[] | undefined,
  plan: CoveragePlan | undefined,
): AttributesRead {
  if (fields.attributes.length === 0 && enriched === undefined) return NO_ATTRIBUTES;
  let attributes: Record<string, unknown> | null = null;
  let failed: Failed | undefined;
  const own = fields.attributes;
  for (let i = 0; i < own.length; i++) {
    const [name, field] = own[i] as [string, CompiledField];
    if (enriched?.attributes[name] !== undefined) continue;
    const value = readOrFail(field, raw, name, true);
    if (counts !== undefined && found(value)) (counts[FIXED_SLOTS + i] as number)++;
    if (value instanceof Failed) {
      failed ??= value;
      continue;
    }
    if (value === undefined || value === null || isNulledOn(field, value, raw)) continue;
    attributes ??= {};
    attributes[name] = value;
  }
  if (enriched !== undefined) {
    for (const name in enriched.attributes) {
      const e = enriched.attributes[name] as EnrichedValue;
      const value = e.record === undefined ? undefined : readOrFail(e.field, e.record, name, true);
      if (counts !== undefined && found(value)) {
        const slot = plan?.attributeSlots.get(name);
        if (slot !== undefined) (counts[slot] as number)++;
      }
      if (value instanceof Failed) {
        failed ??= value;
        continue;
      }
      if (value === undefined || value === null || isNulledOn(e.field, value, e.record as object)) continue;
      attributes ??= {};
      attributes[name] = value;
    }
  }
  return { attributes, failed };
}

function checkedAttributes(read: AttributesRead): Record<string, unknown> | null {
  if (read.failed !== undefined) throw read.failed.error;
  const attributes = read.attributes;
  if (attributes !== null) {
    const bytes = Buffer.byteLength(jsonbText(attributes));
    if (bytes > MAX_ATTRIBUTES_BYTES) {
      throw new FieldError(`attributes are larger than ${MAX_ATTRIBUTES_BYTES} bytes of JSON (${bytes})`);
    }
  }
  return attributes;
}

function count(counts: number[], slot: number, value: unknown): void {
  if (found(value)) (counts[slot] as number)++;
}

/**
 * Validates one record against the connector's field mapping (plain dot paths, or
 * field specs compiled by {@link compileFields}). Never throws. With `counts`, adds
 * the record's values to the step's coverage (slots of `plan`, {@link coveragePlan}).
 */
export function normalizeRecord(
  raw: unknown,
  fields: FieldsDefinition | CompiledFields,
  enriched?: EnrichedValues,
  counts?: number[],
  plan?: CoveragePlan,
): { offer: Offer } | { reject: Reject } {
  const mapping = compiledFor(fields);
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    return { reject: { reason: `record is not an object: ${show(raw)}`, raw } };
  }
  const { sku } = mapping;
  const skuValue = readOrFail(sku, raw, "sku");
  // Locals, not objects: the path without enrichments is the hot path of every page.
  let priceField = mapping.price;
  let currencyField = mapping.currency;
  let stockField = mapping.stock;
  let nameField = mapping.name;
  let priceRecord: object | undefined = raw;
  let currencyRecord: object | undefined = raw;
  let stockRecord: object | undefined = raw;
  let nameRecord: object | undefined = raw;
  let priceValue: unknown;
  let currencyValue: unknown;
  let stockValue: unknown;
  let nameValue: unknown;
  if (enriched === undefined) {
    if (priceField) priceValue = readOrFail(priceField, raw, "price");
    if (currencyField) currencyValue = readOrFail(currencyField, raw, "currency");
    if (stockField) stockValue = readOrFail(stockField, raw, "stock");
    if (nameField) nameValue = readOrFail(nameField, raw, "name");
  } else {
    ({
      field: priceField,
      record: priceRecord,
      value: priceValue,
    } = pick("price", priceField, raw, enriched));
    ({
      field: currencyField,
      record: currencyRecord,
      value: currencyValue,
    } = pick("currency", currencyField, raw, enriched));
    ({
      field: stockField,
      record: stockRecord,
      value: stockValue,
    } = pick("stock", stockField, raw, enriched));
    ({ field: nameField, record: nameRecord, value: nameValue } = pick("name", nameField, raw, enriched));
  }
  const attributes = readAttributes(mapping, raw, enriched, counts, plan);
  if (counts !== undefined) {
    count(counts, SLOT.price, priceValue);
    count(counts, SLOT.currency, currencyValue);
    count(counts, SLOT.stock, stockValue);
    count(counts, SLOT.name, nameValue);
  }
  try {
    const offer: Offer = {
      sku: toSku(settled(sku, skuValue, raw), sku.source),
      // Null only through nullIf / nullWhen (a price on request); a missing price is a reject.
      price: priceField
        ? priceOf(priceField, priceValue, priceRecord)
        : toPrice(undefined, "enrich", undefined),
      currency: currencyField
        ? toCurrency(settled(currencyField, currencyValue, currencyRecord), currencyField.source)
        : null,
      stock: stockField
        ? toStock(settled(stockField, stockValue, stockRecord), stockField.source, stockField)
        : null,
      name: nameField ? toName(settled(nameField, nameValue, nameRecord), nameField.source) : null,
    };
    const checked = checkedAttributes(attributes);
    if (checked !== null) offer.attributes = checked;
    return { offer };
  } catch (err) {
    if (err instanceof FieldError) return { reject: { reason: err.message, raw } };
    throw err;
  }
}

/** The price: null when `nullIf` lists the value found or `nullWhen` holds (sent or not), else validated. */
function priceOf(field: CompiledField, value: unknown, record: object | undefined): string | null {
  if (value instanceof Failed) throw value.error;
  if (record !== undefined && isNulledOn(field, value, record)) return null;
  return toPrice(value, field.source, field);
}

/** The SKU of a raw record as validation would read it, or undefined when it has none valid. */
export function skuOfRecord(raw: unknown, mapping: CompiledFields): string | undefined {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) return undefined;
  return skuOfValue(raw, mapping.sku);
}

/** The SKU a field gives on `record` (an enrichment's `key`), or undefined. */
export function skuOfValue(record: object, field: CompiledField): string | undefined {
  try {
    const value = field.read(record);
    return toSku(isNulledOn(field, value, record) ? null : value, field.source);
  } catch (err) {
    if (err instanceof FieldError || err instanceof FieldReadError) return undefined;
    throw err;
  }
}

/**
 * Splits a page's records into offers and rejects, in order, and counts the step's
 * field coverage. `plan` names the fields an enrichment maps (the connector's,
 * {@link coveragePlan}); without it, the mapping's own fields are counted.
 */
export function normalizeRecords(
  records: readonly unknown[],
  fields: FieldsDefinition | CompiledFields,
  enriched?: readonly (EnrichedValues | undefined)[],
  plan?: CoveragePlan,
): { offers: Offer[]; rejects: Reject[]; coverage: FieldCoverage[] } {
  const mapping = compiledFor(fields);
  const coverage = plan ?? coveragePlan(mapping);
  const counts = newCounts(coverage);
  const offers: Offer[] = [];
  const rejects: Reject[] = [];
  for (let i = 0; i < records.length; i++) {
    const raw = records[i];
    const result = normalizeRecord(raw, mapping, enriched?.[i], counts, coverage);
    if ("offer" in result) offers.push(result.offer);
    else rejects.push(result.reject);
  }
  return { offers, rejects, coverage: coverageOf(coverage, counts, records.length) };
}
