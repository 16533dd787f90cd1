/**
 * Placeholders in request templates (docs/connectors.md, Requests): `{partition}`, `{skus}`,
 * `{sku}`, `{sku_list}`, `{job}`. A value is percent-encoded in a path or a query value and
 * inserted as is into `body` and `form` strings; `{sku_list}` is only ever a whole string of a
 * JSON `body`, replaced by the batch as a JSON array of strings. Which placeholders a walk
 * defines depends on the definition (partitions, SKU lists, export jobs); a
 * placeholder it does not define is a configuration error, found when the file
 * is loaded rather than at the first request.
 */

/** `{name}`: a lower-case word in braces. Anything else in braces is literal text. */
const PLACEHOLDER = /\{([a-z][a-z0-9_]*)\}/g;

/** Every placeholder name a request template knows (docs/connectors.md, Requests). */
export const KNOWN_PLACEHOLDERS = ["partition", "skus", "sku", "sku_list", "job"] as const;

/**
 * A JSON `body` string that is exactly this becomes the batch of SKUs as a JSON array of
 * strings (`{"items": "{sku_list}"}` → `{"items": ["A1", "B2"]}`); its value is that array's
 * JSON text.
 */
export const SKU_LIST = "{sku_list}";

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

/** Replaces placeholders in every string of a JSON value (a `body`); {@link SKU_LIST} by an array. */
export function substituteJson(value: unknown, values: Readonly<Record<string, string>>): unknown {
  if (value === SKU_LIST && values.sku_list !== undefined) return JSON.parse(values.sku_list) as unknown;
  if (typeof value === "string") return substitute(value, values, "body");
  if (Array.isArray(value)) return value.map((v) => substituteJson(v, values));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substituteJson(v, values)]));
  }
  return value;
}

/**
 * `{date:<pattern>}` (docs/feeds.md, Dated files): today's date in the supplier's time zone,
 * the pattern's `YYYY`, `MM` and `DD` replaced, anything else kept (`{date:YYYY-MM-DD}`,
 * `{date:DD.MM.YYYY}`). Filled before the other placeholders, in `path` and `query` only.
 */
const DATE_PLACEHOLDER = /\{date:([^{}]*)\}/g;
/** A valid date pattern: `YYYY`, `MM`, `DD` and separators (no other letters). */
const DATE_PATTERN = /^(?:YYYY|MM|DD|[^A-Za-z{}])+$/;

/** A calendar date (no time, no zone). */
export interface CalendarDate {
  year: number;
  month: number;
  day: number;
}

/** The date patterns of `text`'s `{date:…}` placeholders. */
export function datePatternsIn(text: string): string[] {
  return [...text.matchAll(DATE_PLACEHOLDER)].map((m) => m[1] as string);
}

/** Why a date pattern is refused, or undefined when it is valid. */
export function datePatternProblem(pattern: string): string | undefined {
  if (!DATE_PATTERN.test(pattern) || !/YYYY|MM|DD/.test(pattern)) {
    return `date pattern ${JSON.stringify(pattern)} must be made of YYYY, MM, DD and separators, e.g. {date:YYYY-MM-DD}`;
  }
  return undefined;
}

const pad = (n: number, width: number) => String(n).padStart(width, "0");

/** `text` with each `{date:…}` replaced by `date` written in its pattern. */
export function fillDates(text: string, date: CalendarDate): string {
  return text.replace(DATE_PLACEHOLDER, (_, pattern: string) =>
    pattern.replace(/YYYY|MM|DD/g, (token) =>
      token === "YYYY" ? pad(date.year, 4) : token === "MM" ? pad(date.month, 2) : pad(date.day, 2),
    ),
  );
}

/** The calendar date at `instant` in `timeZone` (an IANA name; `UTC` by default). */
export function dateIn(instant: number, timeZone = "UTC"): CalendarDate {
  const parts = new Intl.DateTimeFormat("en-CA", {
    timeZone,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
  })
    .formatToParts(new Date(instant))
    .reduce<Record<string, string>>((acc, p) => {
      acc[p.type] = p.value;
      return acc;
    }, {});
  return { year: Number(parts.year), month: Number(parts.month), day: Number(parts.day) };
}

/** `date` moved by `days` (negative: earlier). */
export function addDays(date: CalendarDate, days: number): CalendarDate {
  const d = new Date(Date.UTC(date.year, date.month - 1, date.day + days));
  return { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate() };
}

/** `YYYY-MM-DD`. */
export function isoDate(date: CalendarDate): string {
  return `${pad(date.year, 4)}-${pad(date.month, 2)}-${pad(date.day, 2)}`;
}
