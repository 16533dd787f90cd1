import { readDotPath, splitDotPath } from "./dot-path.js";
import { IngestionError } from "./errors.js";
import { EXACT_PLAIN_CHARS, isExactAsDouble, parseExactJson } from "./exact-json.js";

/**
 * Decoding of a supplier's JSON page. The body is untrusted: before
 * `JSON.parse` builds anything, one linear scan (no recursion) checks the
 * nesting depth and counts the records array, so a 10,000-deep body or a page
 * of ten million tiny records is refused as `CONTRACT` without a stack
 * overflow or a huge allocation. The same scan notes whether any number literal
 * would lose digits in a double; only such a page is parsed number-exact
 * ({@link parseExactJson}), every other page by the native `JSON.parse`.
 */

export interface JsonBodyLimits {
  /** Deepest nesting accepted (`maxJsonDepth`). */
  maxDepth: number;
  /** Most records accepted (`maxRecordsPerPage`). */
  maxRecords: number;
  /** `records.path`; `""` when the body itself is the array. */
  recordsPath: string;
  /** An object at `recordsPath` is one record (enrichments, partition lists: docs/connectors.md, Records and fields). */
  objectIsRecord?: boolean;
}

/** `application/json`, `text/json` and `application/<x>+json`, with any parameters. */
export function isJsonContentType(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const type = contentType.split(";")[0]?.trim().toLowerCase() ?? "";
  return (
    type === "application/json" || type === "text/json" || /^application\/[a-z0-9.+-]+\+json$/.test(type)
  );
}

interface Frame {
  array: boolean;
  /** Segments of the records path matched so far, or -1 when off that path. */
  matched: number;
  /** Last key read in an object frame (only tracked on the records path). */
  key: string | undefined;
  expectKey: boolean;
  /** Array frame: a value may start next. */
  awaiting: boolean;
  /** Array frame: elements started so far. */
  count: number;
}

function decodeKey(raw: string): string {
  if (!raw.includes("\\")) return raw;
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return raw;
  }
}

/** What {@link scanJsonLimits} learnt of a body it accepted. */
export interface JsonScan {
  /** Some number literal has more digits, or a wider exponent, than a double keeps exactly. */
  inexactNumbers: boolean;
}

/**
 * Linear scan of JSON text: throws `CONTRACT` when nesting exceeds
 * `maxDepth` or the array at `recordsPath` has more than `maxRecords`
 * elements. Malformed text is left for `JSON.parse` to report.
 */
export function scanJsonLimits(text: string, limits: JsonBodyLimits): JsonScan {
  const segments = splitDotPath(limits.recordsPath);
  // Frames are reused by depth: a page opens an object per record (and per nested value),
  // and a new frame for each was most of what the scan allocated (bench/README.md, Heap growth).
  const frames: Frame[] = [];
  let depth = 0;
  const length = text.length;
  /** Whether a number literal anywhere is not exact as a double: one object for the page's scan and every {@link skipContainer}. */
  const numbers: SkippedNumbers = { inexact: false };
  for (let i = 0; i < length; i++) {
    const c = text.charCodeAt(i);
    // whitespace
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) continue;
    const top = depth > 0 ? frames[depth - 1] : undefined;
    if (c === 0x22 /* " */) {
      const j = closingQuote(text, i + 1);
      if (top && !top.array && top.expectKey) {
        if (top.matched >= 0) top.key = decodeKey(text.slice(i + 1, j));
      } else {
        startValue(top, segments, limits);
      }
      i = j;
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      startValue(top, segments, limits);
      if (depth + 1 > limits.maxDepth) {
        throw new IngestionError("CONTRACT", `JSON body nests deeper than maxJsonDepth (${limits.maxDepth})`);
      }
      const matched = childMatch(top, segments);
      if (matched < 0) {
        // Off the records path (a record, or a value beside the records): nothing in it is
        // counted and no key in it matters, so only depth and number literals are followed,
        // without frames. Same outcome as framing it (the frames off the path only ever
        // counted values nobody reads): the bench's page of 5,000 records (569 kB) scans in
        // 0.95 ms instead of 1.6 (bench/README.md, Where the time goes).
        // The container closes at `end - 1`, back at this depth; or the text ends inside it.
        const end = skipContainer(text, i + 1, depth + 1, limits.maxDepth, numbers);
        i = end - 1;
        continue;
      }
      let frame = frames[depth];
      if (frame === undefined) {
        frame = { array: false, matched: 0, key: undefined, expectKey: false, awaiting: false, count: 0 };
        frames.push(frame);
      }
      frame.array = c === 0x5b;
      frame.matched = matched;
      frame.key = undefined;
      frame.expectKey = c === 0x7b;
      frame.awaiting = c === 0x5b;
      frame.count = 0;
      depth++;
      continue;
    }
    if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      if (depth > 0) depth--;
      continue;
    }
    if (c === 0x2c /* , */) {
      if (top?.array) top.awaiting = true;
      else if (top) top.expectKey = true;
      continue;
    }
    if (c === 0x3a /* : */) {
      if (top) top.expectKey = false;
      continue;
    }
    // A number, true, false or null: count it once, at its first character.
    startValue(top, segments, limits);
    if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39) /* 0-9 */) i = numberEnd(text, i, numbers) - 1;
  }
  return { inexactNumbers: numbers.inexact };
}

interface SkippedNumbers {
  /** Some number literal stepped over is not exact as a double. */
  inexact: boolean;
}

/**
 * Steps over the number literal starting at `i` (digits, '.', '+', '-', 'e', 'E'); returns
 * the index after it. A literal with an exponent or more characters than a double holds
 * exactly is checked, and `numbers.inexact` set when it is not exact (once set, no more checks).
 */
function numberEnd(text: string, i: number, numbers: SkippedNumbers): number {
  const length = text.length;
  let j = i + 1;
  let exponent = false;
  for (; j < length; j++) {
    const d = text.charCodeAt(j);
    if ((d >= 0x30 && d <= 0x39) || d === 0x2e || d === 0x2b || d === 0x2d) continue;
    if (d === 0x65 || d === 0x45) exponent = true;
    else break;
  }
  if (!numbers.inexact && (exponent || j - i > EXACT_PLAIN_CHARS)) {
    numbers.inexact = !isExactAsDouble(text.slice(i, j));
  }
  return j;
}

/**
 * Steps over the container opened just before `from` (`depth` counts it), as
 * {@link scanJsonLimits} would: every bracket opens or closes a level whatever its kind
 * (malformed text is JSON.parse's to report), a level beyond `maxDepth` throws the same
 * `CONTRACT`, and number literals are checked for exactness (noted in `numbers`).
 * Returns the index after its closing bracket, or the text's length.
 */
function skipContainer(
  text: string,
  from: number,
  depth: number,
  maxDepth: number,
  numbers: SkippedNumbers,
): number {
  const length = text.length;
  const base = depth - 1;
  let i = from;
  for (; i < length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      i = closingQuote(text, i + 1);
      continue;
    }
    if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (depth + 1 > maxDepth) {
        throw new IngestionError("CONTRACT", `JSON body nests deeper than maxJsonDepth (${maxDepth})`);
      }
      depth++;
      continue;
    }
    if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
      if (depth === base) return i + 1;
      continue;
    }
    if (c === 0x2d /* - */ || (c >= 0x30 && c <= 0x39) /* 0-9 */) i = numberEnd(text, i, numbers) - 1;
  }
  return length;
}

/**
 * Index of the quote closing the string that starts at `from` (or the text's length):
 * native `indexOf` jumps over the string's body, and a quote preceded by an odd run
 * of backslashes is escaped. Strings are most of a page's bytes; stepping through
 * them one character at a time was measurably slow (bench/README.md, Figures behind code choices).
 */
function closingQuote(text: string, from: number): number {
  let j = from;
  for (;;) {
    j = text.indexOf('"', j);
    if (j < 0) return text.length;
    let backslashes = 0;
    for (let k = j - 1; k >= from && text.charCodeAt(k) === 0x5c; k--) backslashes++;
    if (backslashes % 2 === 0) return j;
    j++;
  }
}

function startValue(top: Frame | undefined, segments: readonly string[], limits: JsonBodyLimits): void {
  if (!top?.array || !top.awaiting) return;
  top.awaiting = false;
  top.count++;
  if (top.matched === segments.length && top.count > limits.maxRecords) {
    throw new IngestionError(
      "CONTRACT",
      `page has more than maxRecordsPerPage (${limits.maxRecords}) records at ${describePath(limits.recordsPath)}`,
    );
  }
}

/** How far down the records path a container opening inside `parent` is. */
function childMatch(parent: Frame | undefined, segments: readonly string[]): number {
  if (!parent) return 0;
  if (parent.matched < 0 || parent.matched >= segments.length) return -1;
  const want = segments[parent.matched];
  // `count` was already incremented for this element, so its index is count - 1.
  const have = parent.array ? String(parent.count - 1) : parent.key;
  return have === want ? parent.matched + 1 : -1;
}

function describePath(path: string): string {
  return path === "" ? "the body root" : `records.path ${JSON.stringify(path)}`;
}

/**
 * Scans (limits, number exactness) and parses one JSON text: by `JSON.parse` when
 * every number literal survives a double, else number-exact.
 * @throws IngestionError `CONTRACT` for a limit, SyntaxError for malformed text.
 */
export function parseJsonText(text: string, limits: JsonBodyLimits): unknown {
  const scan = scanJsonLimits(text, limits);
  return scan.inexactNumbers ? parseExactJson(text) : JSON.parse(text);
}

/**
 * Checks, parses and extracts the records of one JSON page.
 * @throws IngestionError `CONTRACT` (never retryable) for a non-JSON content
 * type, invalid JSON, excessive depth or record count, or a records path that
 * is missing or not an array.
 */
export function decodeJsonPage(
  body: Buffer,
  contentType: string | undefined,
  limits: JsonBodyLimits,
): { body: unknown; records: unknown[] } {
  if (!isJsonContentType(contentType)) {
    throw new IngestionError(
      "CONTRACT",
      `response content type is ${contentType ? JSON.stringify(contentType.slice(0, 100)) : "missing"}, expected application/json`,
    );
  }
  let text = body.toString("utf8");
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  let parsed: unknown;
  try {
    parsed = parseJsonText(text, limits);
  } catch (err) {
    if (err instanceof IngestionError) throw err;
    throw new IngestionError("CONTRACT", `response body is not valid JSON: ${(err as Error).message}`, {
      cause: err,
    });
  }
  let records = readDotPath(parsed, limits.recordsPath);
  if (limits.objectIsRecord && records !== null && typeof records === "object" && !Array.isArray(records)) {
    records = [records];
  }
  if (records === undefined) {
    throw new IngestionError("CONTRACT", `${describePath(limits.recordsPath)} is missing from the response`);
  }
  if (!Array.isArray(records)) {
    throw new IngestionError(
      "CONTRACT",
      `${describePath(limits.recordsPath)} is ${records === null ? "null" : typeof records}, not an array`,
    );
  }
  if (records.length > limits.maxRecords) {
    throw new IngestionError(
      "CONTRACT",
      `page has ${records.length} records, more than maxRecordsPerPage (${limits.maxRecords})`,
    );
  }
  return { body: parsed, records };
}
