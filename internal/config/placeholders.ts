/**
 * Placeholders in request templates (docs/connectors.md, Requests): `{partition}`, `{skus}`,
 * `{sku}`, `{job}`. A value is percent-encoded in a path or a query value and
 * inserted as is into `body` and `form` strings. Which placeholders a walk
 * defines depends on the definition (partitions, SKU lists, export jobs); a
 * placeholder it does not define is a configuration error, found when the file
 * is loaded rather than at the first request.
 */

/** `{name}`: a lower-case word in braces. Anything else in braces is literal text. */
const PLACEHOLDER = /\{([a-z][a-z0-9_]*)\}/g;

/** Every placeholder name a request template knows (docs/connectors.md, Requests). */
export const KNOWN_PLACEHOLDERS = ["partition", "skus", "sku", "job"] as const;

/** Placeholder names used in `text`, in order of appearance. */
export function placeholdersIn(text: string): string[] {
  return [...text.matchAll(PLACEHOLDER)].map((m) => m[1] as string);
}

/** Every string inside a JSON value (object values and array items, not keys), with its key path. */
export function stringsIn(value: unknown, path: (string | number)[] = []): [string, (string | number)[]][] {
  if (typeof value === "string") return [[value, path]];
  if (Array.isArray(value)) return value.flatMap((v, i) => stringsIn(v, [...path, i]));
  if (value !== null && typeof value === "object") {
    return Object.entries(value).flatMap(([k, v]) => stringsIn(v, [...path, k]));
  }
  return [];
}

export type PlaceholderContext = "path" | "query" | "body" | "form";

/**
 * Substitutes `{name}` in `text` with `values[name]`; percent-encoded in a
 * `path` or `query` context, as is in `body` and `form`. A name without a value
 * is left as written (the schema refuses undefined placeholders up front).
 * `literal` characters stay unencoded (the `{skus}` separator, docs/connectors.md, SKU lists).
 */
export function substitute(
  text: string,
  values: Readonly<Record<string, string>>,
  context: PlaceholderContext,
  literal = "",
): string {
  return text.replace(PLACEHOLDER, (whole, name: string) => {
    const value = values[name];
    if (value === undefined) return whole;
    if (context === "body" || context === "form") return value;
    if (context === "query") return value; // URLSearchParams encodes query values itself.
    if (literal === "") return encodeURIComponent(value);
    return value
      .split(literal)
      .map((part) => encodeURIComponent(part))
      .join(literal);
  });
}

/** Replaces placeholders in every string of a JSON value (a `body`). */
export function substituteJson(value: unknown, values: Readonly<Record<string, string>>): unknown {
  if (typeof value === "string") return substitute(value, values, "body");
  if (Array.isArray(value)) return value.map((v) => substituteJson(v, values));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substituteJson(v, values)]));
  }
  return value;
}
