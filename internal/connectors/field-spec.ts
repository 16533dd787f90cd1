import { compile, type JSONValue, TreeInterpreter } from "@jmespath-community/jmespath";
import type { AttributesDefinition, FieldSpec, FieldsDefinition } from "../config/connector-schema.js";
import { isLosslessNumber } from "../platform/exact-json.js";
import { readDotPath, splitDotPath } from "./dot-path.js";

/**
 * Field specs (docs/connectors.md, Records and fields) compiled once per connector: a dot path, `{path}`,
 * `{jmespath}` (parsed here, once, by @jmespath-community/jmespath) or `{const}`, with
 * optional `nullIf` and `decimalSeparator`. Reading a field never throws except
 * with {@link FieldReadError} (a JMESPath expression that fails on this record).
 */

export interface CompiledField {
  /** How reject reasons name the source: the dot path, the expression, or `const`. */
  readonly source: string;
  read(record: object): unknown;
  /** Values that become null (strings compared trimmed). */
  readonly nullIf: readonly unknown[] | undefined;
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

/** A JMESPath expression failed on one record (a type error, say): that record is a reject. */
export class FieldReadError extends Error {}

/** Parses a JMESPath expression; the message of a syntax error names what is wrong. */
export function parseJmesPath(expression: string): ReturnType<typeof compile> {
  return compile(expression);
}

export function compileFieldSpec(spec: FieldSpec): CompiledField {
  if (typeof spec === "string") return dotPathField(spec, undefined, undefined);
  const nullIf = spec.nullIf;
  const separator = "decimalSeparator" in spec ? (spec.decimalSeparator as "," | "." | undefined) : undefined;
  if ("path" in spec) return dotPathField(spec.path, nullIf, separator);
  if ("jmespath" in spec) {
    const ast = parseJmesPath(spec.jmespath);
    return {
      source: spec.jmespath,
      nullIf,
      decimalSeparator: separator,
      read(record) {
        try {
          return TreeInterpreter.search(ast, record as JSONValue);
        } catch (err) {
          throw new FieldReadError(`could not be evaluated (${(err as Error).message})`);
        }
      },
    };
  }
  const value = spec.const;
  return { source: "const", nullIf, decimalSeparator: separator, read: () => value };
}

function dotPathField(
  path: string,
  nullIf: readonly unknown[] | undefined,
  decimalSeparator: "," | "." | undefined,
): CompiledField {
  const segments = splitDotPath(path);
  return { source: path, nullIf, decimalSeparator, read: (record) => readDotPath(record, segments) };
}

const compiled = new WeakMap<FieldsDefinition, CompiledFields>();

/** The compiled form of a connector's `fields` and `attributes`, built once per definition object. */
export function compileFields(fields: FieldsDefinition, attributes?: AttributesDefinition): CompiledFields {
  const cached = attributes === undefined ? compiled.get(fields) : undefined;
  if (cached) return cached;
  const optional = (spec: FieldSpec | undefined) => (spec === undefined ? undefined : compileFieldSpec(spec));
  const result: CompiledFields = {
    sku: compileFieldSpec(fields.sku),
    price: optional(fields.price),
    name: optional(fields.name),
    currency: optional(fields.currency),
    stock: optional(fields.stock),
    attributes: Object.entries(attributes ?? {}).map(([name, spec]) => [name, compileFieldSpec(spec)]),
  };
  if (attributes === undefined) compiled.set(fields, result);
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
