import { IngestionError } from "../platform/errors.js";
import type { WorkbookFormat } from "./format-schema.js";
import { type Collector, clip } from "./types.js";

/**
 * What both workbook readers share (docs/feeds.md, Workbooks): cell values as
 * text, the header row (given, or found among the first 50 rows), rows made
 * flat records keyed by whitespace-normalised header text, empty rows skipped.
 * The xlsx reader (xlsx-rows.ts) streams rows from the spooled file; the xls
 * reader (xls-rows.ts) reads the whole workbook with SheetJS.
 */

/** A row of a sheet: its 1-based number and its cells' text by 0-based column. */
export interface SheetRow {
  n: number;
  values: (string | undefined)[];
  /** Cells holding an Excel error (`#N/A`, `#DIV/0!`): column and the error's text. */
  errors?: { col: number; text: string }[];
}

/** What a workbook reader learnt; shown by `preview` and in the run's log. */
export interface WorkbookInfo {
  sheet: string | undefined;
  headerRow: number | undefined;
  /** The header's normalised texts, in column order (empty cells left out). */
  header: string[] | undefined;
}

/** Rows searched for the header with `headerRow: "auto"`. */
export const HEADER_SEARCH_ROWS = 50;

/** Trims and collapses inner whitespace (NBSP and line breaks included): how headers and field paths are matched. */
export function normalizeHeader(text: string): string {
  return text.replace(/[\s\u00a0\u2007\u202f]+/g, " ").trim();
}

/** 0-based column index → letters (`0` → `A`, `27` → `AB`). */
export function columnLetters(index: number): string {
  let n = index + 1;
  let out = "";
  while (n > 0) {
    const rem = (n - 1) % 26;
    out = String.fromCharCode(65 + rem) + out;
    n = Math.floor((n - 1) / 26);
  }
  return out;
}

/** Letters of a cell reference (`AB12`) → 0-based column index; -1 when there are none. */
export function columnIndex(ref: string): number {
  let n = 0;
  let i = 0;
  for (; i < ref.length; i++) {
    const c = ref.charCodeAt(i);
    const upper = c >= 97 && c <= 122 ? c - 32 : c;
    if (upper < 65 || upper > 90) break;
    n = n * 26 + (upper - 64);
  }
  return i === 0 ? -1 : n - 1;
}

/** The digits of a cell reference (`AB12` → 12); undefined without any. */
export function rowOfRef(ref: string): number | undefined {
  const m = /(\d+)$/.exec(ref);
  return m ? Number(m[1]) : undefined;
}

const STRIP_TRAILING = /(?:\.0*|(\.\d*[1-9])0+)$/;

/**
 * A number as Excel shows it in the General format, to at most 15 significant
 * digits (Excel keeps 15): no float artefacts (`1234.4999999999998` → `1234.5`,
 * `0.1 + 0.2` → `0.3`), no trailing zeros, plain decimals from 1E-9 up to
 * below 1E15, scientific (`1.5E+20`, `1E-10`) outside that.
 */
export function formatGeneral(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  if (value === 0) return "0";
  const abs = Math.abs(value);
  const rounded = Number(value.toPrecision(15));
  if (abs >= 1e-9 && Math.abs(rounded) < 1e15) {
    // Fixed notation of the 15-digit value: the shortest round-trip string is already free of artefacts.
    const text = String(rounded);
    if (!/e/i.test(text)) return text;
    const exponent = Math.floor(Math.log10(Math.abs(rounded)));
    const digits = Math.max(0, Math.min(100, 14 - exponent));
    return rounded.toFixed(digits).replace(STRIP_TRAILING, "$1");
  }
  const [mantissa, exponent] = rounded.toExponential(14).split("e") as [string, string];
  const m = mantissa.replace(STRIP_TRAILING, "$1");
  const e = Number(exponent);
  return `${m}E${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
}

const MS_PER_DAY = 86_400_000;
/** 1899-12-30: serial 0 of the 1900 system once Excel's phantom 1900-02-29 is accounted for. */
const EPOCH_1900 = Date.UTC(1899, 11, 30);
const EPOCH_1904 = Date.UTC(1904, 0, 1);

/**
 * A date serial as ISO 8601: `2024-03-01` for a whole day, `2024-03-01T12:30:00` with a
 * time (to the second, rounded as Excel shows it). Serials 1-59 of the 1900 system are
 * one day later than the day count says (Excel counts 1900-02-29, which did not exist).
 */
export function serialToIso(serial: number, date1904 = false): string {
  let days = serial;
  if (!date1904 && serial < 60) days += 1;
  const ms = Math.round(days * 86_400) * 1000;
  const d = new Date((date1904 ? EPOCH_1904 : EPOCH_1900) + ms);
  const iso = d.toISOString();
  return ms % MS_PER_DAY === 0 ? iso.slice(0, 10) : iso.slice(0, 19);
}

/** Built-in number formats that are dates or times (ECMA-376 §18.8.30, and the CJK locale ids). */
const DATE_FORMAT_IDS = new Set([
  14, 15, 16, 17, 18, 19, 20, 21, 22, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 45, 46, 47, 50, 51, 52, 53, 54,
  55, 56, 57, 58,
]);

/** True when a number format shows a date or time: a date token outside quotes, escapes and colours. */
export function isDateFormat(id: number, code: string | undefined): boolean {
  if (code === undefined) return DATE_FORMAT_IDS.has(id);
  const bare = code
    .replace(/"[^"]*"/g, "")
    .replace(/\\./g, "")
    .replace(/_.|\*./g, "")
    .replace(/\[(?![hms]+\])[^\]]*\]/gi, "");
  // Only the first section (positive numbers) decides.
  const first = bare.split(";")[0] ?? "";
  if (/general/i.test(first)) return false;
  return /[dmyhs]|\[[hms]+\]/i.test(first);
}

/** Why the reader cannot go on with the workbook: `CONTRACT` naming it (never retried, nothing delisted). */
export function workbookError(message: string, cause?: unknown): IngestionError {
  return new IngestionError("CONTRACT", message, cause === undefined ? undefined : { cause });
}

/** Sets `key` as an own property even when it is `__proto__`. */
function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__")
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

function quoteList(names: readonly string[]): string {
  return names.map((n) => JSON.stringify(n)).join(", ");
}

/**
 * Turns a sheet's rows into records in `out`, yielding whenever `out` is full
 * and after each group of rows. `columns` are the mapped column names (the
 * field paths), normalised; with `headerRow: "auto"` the header is the first
 * row among the first 50 that holds every one of them.
 * @throws IngestionError `CONTRACT` when the header row is not found.
 */
export async function* rowsToRecords(
  rows: AsyncIterable<SheetRow[]>,
  format: WorkbookFormat,
  columns: readonly string[],
  sheetName: string,
  out: Collector,
  info: WorkbookInfo,
): AsyncGenerator<void, void, undefined> {
  const wanted = [...new Set(columns.map(normalizeHeader))].filter((c) => c !== "");
  /** Column index → record key; set once the header is known (or at once without a header). */
  let keys: (string | undefined)[] | undefined;
  /** Columns whose error cells reject the record: the mapped ones (all, when none are known). */
  let mapped: Set<number> | undefined;
  let best: { n: number; missing: string[] } | undefined;
  let lastSearched = 0;

  const headerMissing = (values: (string | undefined)[]): string[] => {
    const present = new Set(values.map((v) => (v === undefined ? "" : normalizeHeader(v))));
    return wanted.filter((c) => !present.has(c));
  };
  const takeHeader = (row: SheetRow) => {
    keys = row.values.map((v) => {
      const k = v === undefined ? "" : normalizeHeader(v);
      return k === "" ? undefined : k;
    });
    // The first of two equal header texts wins.
    const seen = new Set<string>();
    keys = keys.map((k) => {
      if (k === undefined || seen.has(k)) return undefined;
      seen.add(k);
      return k;
    });
    info.headerRow = row.n;
    info.header = keys.filter((k): k is string => k !== undefined);
    mapped = wanted.length === 0 ? undefined : new Set(wanted.map((c) => keys?.indexOf(c) ?? -1));
  };
  const notFound = (): IngestionError => {
    if (format.headerRow !== "auto") {
      return workbookError(
        `header row ${format.headerRow} of sheet ${JSON.stringify(sheetName)} is empty or beyond the last row`,
      );
    }
    const searched = `rows 1-${Math.max(1, Math.min(lastSearched, HEADER_SEARCH_ROWS))}`;
    if (best === undefined) {
      return workbookError(
        `header row not found in sheet ${JSON.stringify(sheetName)}: ${searched} are empty (looked for columns ${quoteList(wanted)})`,
      );
    }
    return workbookError(
      `header row not found in sheet ${JSON.stringify(sheetName)}: no row among ${searched} holds every mapped column; the closest, row ${best.n}, lacks ${quoteList(best.missing)}`,
    );
  };

  if (!format.header) {
    keys = [];
    info.headerRow = undefined;
  }

  for await (const group of rows) {
    for (const row of group) {
      if (keys === undefined) {
        if (format.headerRow === "auto") {
          if (row.n > HEADER_SEARCH_ROWS) throw notFound();
          lastSearched = row.n;
          if (row.values.every((v) => v === undefined || v.trim() === "")) continue;
          const missing = headerMissing(row.values);
          if (missing.length === 0) {
            takeHeader(row);
            continue;
          }
          if (best === undefined || missing.length < best.missing.length) best = { n: row.n, missing };
          continue;
        }
        if (row.n < format.headerRow) continue;
        if (row.n > format.headerRow) throw notFound();
        const missing = headerMissing(row.values);
        if (missing.length > 0) {
          throw workbookError(
            `header row ${row.n} of sheet ${JSON.stringify(sheetName)} lacks the mapped columns ${quoteList(missing)}; it holds ${quoteList(row.values.filter((v): v is string => v !== undefined && v.trim() !== "").map(normalizeHeader)).slice(0, 2_000)}`,
          );
        }
        takeHeader(row);
        continue;
      }
      const record = Object.create(null) as Record<string, unknown>;
      let filled = 0;
      for (let c = 0; c < row.values.length; c++) {
        const v = row.values[c];
        if (v === undefined || v === "") continue;
        const key = format.header ? keys[c] : columnLetters(c);
        if (key === undefined) continue;
        setOwn(record, key, v);
        filled++;
      }
      if (filled === 0) continue;
      const bad = row.errors?.find((e) => mapped === undefined || mapped.has(e.col));
      if (bad !== undefined) {
        out.rejects.push({
          reason: `cell ${columnLetters(bad.col)}${row.n} of sheet ${JSON.stringify(sheetName)} holds the error ${bad.text}`,
          raw: clipRecord(record),
        });
      } else {
        out.records.push(record);
      }
      if (out.full) yield;
    }
    yield;
  }
  if (keys === undefined) throw notFound();
}

function clipRecord(record: Record<string, unknown>): Record<string, unknown> {
  const copy: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(record)) setOwn(copy, k, typeof v === "string" ? clip(v) : v);
  return copy;
}

/** The sheet `wanted` (a name, matched after whitespace normalisation, or a 1-based index) among `names`. */
export function pickSheet(names: readonly string[], wanted: string | number): number {
  if (typeof wanted === "number") {
    if (wanted <= names.length) return wanted - 1;
    throw workbookError(
      `sheet ${wanted} not found: the workbook has ${names.length} sheet${names.length === 1 ? "" : "s"} (${quoteList(names)})`,
    );
  }
  const exact = names.indexOf(wanted);
  if (exact >= 0) return exact;
  const norm = normalizeHeader(wanted).toLowerCase();
  const loose = names.findIndex((n) => normalizeHeader(n).toLowerCase() === norm);
  if (loose >= 0) return loose;
  throw workbookError(`sheet ${JSON.stringify(wanted)} not found: the workbook has ${quoteList(names)}`);
}
