import { compile, type JSONValue, TreeInterpreter } from "@jmespath-community/jmespath";
import { readDotPath, splitDotPath } from "../../platform/dot-path.js";
import { isLosslessNumber } from "../../platform/exact-json.js";
import type {
  AttributesDefinition,
  FieldSpec,
  FieldsDefinition,
  NullWhenDefinition,
} from "../schema/connector-schema.js";
import { SumError, sumValues } from "./decimal-sum.js";

/**
 * Field specs (docs/connectors.md, Records and fields) compiled once per connector: a dot path, `{path}`,
 * `{jmespath}` (parsed here, once, by @jmespath-community/jmespath) or `{const}`, with
 * optional `sum`, `else`, `nullIf`, `nullWhen` and `decimalSeparator`. Reading a field
 * never throws except with {@link FieldReadError} (an expression or a sum that fails on
 * this record).
 */

export interface CompiledField {
  /** How reject reasons and coverage name the source: the dot path, the expression, or `const`. */
  readonly source: string;
  /** The value found (`sum` and `else` applied, before `nullIf` / `nullWhen`); undefined or null: none. */
  read(record: object): unknown;
  /**
   * Set when the field is a plain dot path (no `sum`, `else`, expression or constant):
   * `read(record)` is `readDotPath(record, segments)`, which never throws, so the
   * per-record hot path may call it without a `try` and without the closure.
   */
  readonly segments?: readonly string[] | undefined;
  /** Values that become null (strings compared trimmed). */
  readonly nullIf: readonly unknown[] | undefined;
  /** `nullWhen`: true when the record the field is read from says the field is null. */
  readonly nullWhen: ((record: object) => boolean) | undefined;
  /** Price and stock: the decimal separator of string values; group spaces are dropped. */
  readonly decimalSeparator: "," | "." | undefined;
}

export interface CompiledFields {
  sku: CompiledField;
  /** Undefined when an enrichment maps the price instead (docs/connectors.md, Records and fields). */
  price: CompiledField | undefined;
  name: CompiledField | undefined;
  currency: CompiledField | undefined;
  stock: CompiledField | undefined;
  /** Attribute name → field, in definition order. */
  attributes: readonly [string, CompiledField][];
}

/** A JMESPath expression or a sum failed on one record (a type error, say): that record is a reject. */
export class FieldReadError extends Error {}

/** Parses a JMESPath expression; the message of a syntax error names what is wrong. */
export function parseJmesPath(expression: string): ReturnType<typeof compile> {
  return compile(expression);
}

interface Reader {
  source: string;
  read(record: object): unknown;
  segments?: readonly string[];
}

/** The forms `else` takes: a spec without modifiers of its own. */
type BaseSpec = NonNullable<Extract<FieldSpec, { path: string }>["else"]>;

/**
 * Whether paths name a flat record's column as a whole (`xlsx`/`xls` rows, docs/feeds.md):
 * never split at dots, matched after whitespace normalisation.
 */
export interface PathMode {
  flat?: boolean | undefined;
}

/** A flat path as a record key: trimmed, inner whitespace collapsed (as workbook headers are). */
export function flatKey(path: string): string {
  return path.replace(/[\s\u00a0\u2007\u202f]+/g, " ").trim();
}

function pathSegments(path: string, mode: PathMode | undefined): readonly string[] {
  return mode?.flat ? [flatKey(path)] : splitDotPath(path);
}

function dotPathReader(path: string, mode?: PathMode): Reader {
  const segments = pathSegments(path, mode);
  return { source: path, read: (record) => readDotPath(record, segments), segments };
}

function readerOf(spec: BaseSpec, separator: "," | "." | undefined, mode?: PathMode): Reader {
  if (typeof spec === "string") return dotPathReader(spec, mode);
  let reader: Reader;
  if ("path" in spec) reader = dotPathReader(spec.path, mode);
  else if ("jmespath" in spec) {
    const ast = parseJmesPath(spec.jmespath);
    reader = {
      source: spec.jmespath,
      read(record) {
        try {
          return TreeInterpreter.search(ast, record as JSONValue);
        } catch (err) {
          throw new FieldReadError(`could not be evaluated (${(err as Error).message})`);
        }
      },
    };
  } else {
    const value = spec.const;
    return { source: "const", read: () => value };
  }
  if (!("sum" in spec) || spec.sum !== true) return reader;
  const found = reader.read;
  return {
    source: `sum of ${reader.source}`,
    read(record) {
      try {
        return sumValues(found(record), separator);
      } catch (err) {
        if (err instanceof SumError) throw new FieldReadError(err.message);
        throw err;
      }
    },
  };
}

export function compileFieldSpec(spec: FieldSpec, mode?: PathMode): CompiledField {
  if (typeof spec === "string") {
    return {
      ...dotPathReader(spec, mode),
      nullIf: undefined,
      nullWhen: undefined,
      decimalSeparator: undefined,
    };
  }
  const separator = "decimalSeparator" in spec ? (spec.decimalSeparator as "," | "." | undefined) : undefined;
  let reader = readerOf(spec as BaseSpec, separator, mode);
  const fallback = "else" in spec ? spec.else : undefined;
  if (fallback !== undefined) {
    const first = reader;
    const second = readerOf(fallback, separator, mode);
    reader = {
      source: `${first.source} else ${second.source}`,
      read(record) {
        const value = first.read(record);
        return value === undefined || value === null ? second.read(record) : value;
      },
    };
  }
  return {
    source: reader.source,
    read: reader.read,
    segments: reader.segments,
    nullIf: spec.nullIf,
    nullWhen: spec.nullWhen === undefined ? undefined : compileNullWhen(spec.nullWhen, mode),
    decimalSeparator: separator,
  };
}

/** A number, a `LosslessNumber` or a numeric string as a number; undefined for anything else. */
function numberOf(value: unknown): number | undefined {
  if (typeof value === "number") return value;
  const text = typeof value === "string" ? value.trim() : isLosslessNumber(value) ? value.value : undefined;
  if (text === undefined || text === "") return undefined;
  const n = Number(text);
  return Number.isNaN(n) ? undefined : n;
}

/** `nullWhen` comparisons: strings trimmed, a number equal to the numeric string of it (`1`, `"1"`). */
function same(value: unknown, expected: unknown): boolean {
  if (Object.is(value, expected)) return true;
  if (typeof value === "string" && typeof expected === "string") return value.trim() === expected.trim();
  const a = numberOf(value);
  return a !== undefined && a === numberOf(expected);
}

/** `nullWhen` as a test of a record. A value absent from it never matches `equals`, `in`, `notIn` or `contains`. */
function compileNullWhen(c: NullWhenDefinition, mode?: PathMode): (record: object) => boolean {
  const segments = pathSegments(c.path, mode);
  const at = (record: object) => readDotPath(record, segments);
  if (c.exists !== undefined) {
    const exists = c.exists;
    return (record) => (at(record) !== undefined) === exists;
  }
  if (c.contains !== undefined) {
    const text = c.contains;
    return (record) => {
      const value = at(record);
      return typeof value === "string" && value.includes(text);
    };
  }
  const { equals, in: oneOf, notIn } = c;
  return (record) => {
    const value = at(record);
    if (value === undefined) return false;
    if (oneOf !== undefined) return oneOf.some((v) => same(value, v));
    if (notIn !== undefined) return !notIn.some((v) => same(value, v));
    return same(value, equals);
  };
}

const compiled = new WeakMap<FieldsDefinition, CompiledFields>();

/** The compiled form of a connector's `fields` and `attributes`, built once per definition object. */
export function compileFields(
  fields: FieldsDefinition,
  attributes?: AttributesDefinition,
  mode?: PathMode,
): CompiledFields {
  const cacheable = attributes === undefined && !mode?.flat;
  const cached = cacheable ? compiled.get(fields) : undefined;
  if (cached) return cached;
  const optional = (spec: FieldSpec | undefined) =>
    spec === undefined ? undefined : compileFieldSpec(spec, mode);
  const result: CompiledFields = {
    sku: compileFieldSpec(fields.sku, mode),
    price: optional(fields.price),
    name: optional(fields.name),
    currency: optional(fields.currency),
    stock: optional(fields.stock),
    attributes: Object.entries(attributes ?? {}).map(([name, spec]) => [name, compileFieldSpec(spec, mode)]),
  };
  if (cacheable) compiled.set(fields, result);
  return result;
}

/** True when `value` is one of the field's `nullIf` values (strings compared trimmed). */
export function isNulled(field: CompiledField, value: unknown): boolean {
  const list = field.nullIf;
  if (list === undefined) return false;
  const text = typeof value === "string" ? value.trim() : isLosslessNumber(value) ? value.value : undefined;
  for (const candidate of list) {
    if (typeof candidate === "string" ? text === candidate.trim() : Object.is(candidate, value)) return true;
  }
  return false;
}

/** True when the field is null for this value found on `record`: `nullIf` lists it, or `nullWhen` holds. */
export function isNulledOn(field: CompiledField, value: unknown, record: object): boolean {
  return isNulled(field, value) || field.nullWhen?.(record) === true;
}

/** Spaces, no-break and narrow no-break spaces between digit groups: `1 234,50`. */
const GROUP_SPACE = /(?<=\d)[ \u00a0\u202f]+(?=\d)/g;

/**
 * A price or stock string in the field's decimal notation, as a `.` decimal
 * (`"1 234,50"` → `"1234.50"`); undefined when it holds a `.` although the separator
 * is `,` (`"1.234"` could be a thousand: never guessed).
 */
export function withDecimalPoint(field: CompiledField, text: string): string | undefined {
  const separator = field.decimalSeparator;
  if (separator === undefined) return text;
  const grouped = text.replace(GROUP_SPACE, "");
  if (separator === ".") return grouped;
  return grouped.includes(".") ? undefined : grouped.replace(",", ".");
}

/**
 * The columns a flat record must have for these fields: every field's and attribute's
 * path (the first of an `else`), normalised; expressions and constants name none.
 */
export function mappedColumns(fields: FieldsDefinition, attributes?: AttributesDefinition): string[] {
  const out: string[] = [];
  const add = (spec: FieldSpec | undefined) => {
    if (spec === undefined) return;
    if (typeof spec === "string") out.push(flatKey(spec));
    else if ("path" in spec && typeof spec.path === "string") out.push(flatKey(spec.path));
  };
  for (const spec of [fields.sku, fields.price, fields.name, fields.currency, fields.stock]) add(spec);
  for (const spec of Object.values(attributes ?? {})) add(spec);
  return [...new Set(out)].filter((c) => c !== "");
}
