/**
 * The page statement's columns (offers.ts, `WRITE_PAGE` `$3`, `$4`, `$6`, `$7`, `$12`) in
 * PostgreSQL's binary array format (`array_recv`), written into one scratch buffer that a
 * run session reuses for every page, instead of text literals built as JavaScript strings.
 *
 * Why: a page's literals were the largest thing a walk promoted to V8's old generation
 * (sampled over a 200k walk, 11 of 45 MB: every page's ~280 kB of literals lived across
 * the page statement's round trip, while the next page was parsed). Bytes in a reused
 * buffer are outside the V8 heap: nothing to scavenge, promote or collect, and the buffer
 * stops growing at the largest page (bench/README.md, Memory without heap flags).
 *
 * pg sends a `Buffer` parameter in binary format, and the statement's casts
 * (`$3::text[]`, `$7::int[]`, `$12::jsonb[]`) type the parameters, so the SQL text is the
 * same for either form. `array_recv` checks the element type's OID and each element goes
 * through the type's own receive function: `textrecv` (UTF-8 checked, as for text),
 * `int4recv`, `jsonb_recv` (version byte 1, then the JSON text, parsed as `jsonb_in`
 * would). Strings are encoded by `Buffer.write`, as pg encodes a text parameter, so a
 * lone surrogate becomes U+FFFD either way. A price column is binary (`numeric_recv`)
 * when every price is a plain decimal (`12`, `0.50`): its digits go as base-10000 groups
 * with the scale of its fraction, which is what `numeric_in` makes of the same text
 * (`1.50` keeps its scale 2); a page with any other form (an exponent) sends its prices
 * as a text literal, read by `numeric_in` itself.
 */

const TEXT_OID = 25;
const INT4_OID = 23;
const JSONB_OID = 3802;
const NUMERIC_OID = 1700;
/** A plain decimal (what most prices are, offers' `price` after validation): digits, optionally a point and digits. */
const PLAIN_DECIMAL = /^\d+(?:\.\d+)?$/;
const JSONB_VERSION = 1;
/** ndim, flags, element type, then one dimension's length and lower bound. */
const HEADER_BYTES = 20;
const MIN_CAPACITY = 64 * 1024;

/**
 * A run's scratch buffer for its pages' binary arrays. The views a page gets stay valid
 * until the next page begins: a page's statement has completed (pg has sent its Bind
 * message) before the run commits the next one. Not for use by two pages at once.
 */
export class BinaryArrays {
  private buffer: Buffer = Buffer.alloc(0);
  private offset = 0;

  /** Starts a page: the views of the previous page are overwritten from here on. */
  begin(): void {
    this.offset = 0;
  }

  /** A `text[]` of `pick(values[i])` (null elements allowed). */
  text<T>(values: readonly T[], pick: (value: T) => string | null): Buffer {
    return this.strings(TEXT_OID, values, pick, 0);
  }

  /** A `jsonb[]`: each element the JSON text of a value (null elements allowed). */
  jsonb<T>(values: readonly T[], pick: (value: T) => string | null): Buffer {
    return this.strings(JSONB_OID, values, pick, 1);
  }

  /**
   * An `int4[]`, or null when a value is not a 32-bit integer: the caller then sends that
   * column as text, and PostgreSQL refuses it with its own message, as before.
   */
  int4<T>(values: readonly T[], pick: (value: T) => number | null): Buffer | null {
    for (let i = 0; i < values.length; i++) {
      const n = pick(values[i] as T);
      if (n !== null && !(Number.isInteger(n) && n >= -2_147_483_648 && n <= 2_147_483_647)) return null;
    }
    const start = this.header(INT4_OID, values.length);
    this.ensure(values.length * 8);
    let nulls = false;
    for (let i = 0; i < values.length; i++) {
      const n = pick(values[i] as T);
      if (n === null) {
        this.int32(-1);
        nulls = true;
      } else {
        this.int32(4);
        this.int32(n);
      }
    }
    return this.finish(start, nulls);
  }

  /** A `numeric[]` of plain decimals, or null when a value is not one (then the caller sends text). */
  numeric<T>(values: readonly T[], pick: (value: T) => string | null): Buffer | null {
    for (let i = 0; i < values.length; i++) {
      const s = pick(values[i] as T);
      if (s !== null && !PLAIN_DECIMAL.test(s)) return null;
    }
    const start = this.header(NUMERIC_OID, values.length);
    let nulls = false;
    for (let i = 0; i < values.length; i++) {
      const s = pick(values[i] as T);
      if (s === null) {
        this.ensure(4);
        this.int32(-1);
        nulls = true;
      } else this.decimal(s);
    }
    return this.finish(start, nulls);
  }

  /** A `text[]` or `jsonb[]` (a version byte before each element's text). */
  private strings<T>(
    oid: number,
    values: readonly T[],
    pick: (value: T) => string | null,
    version: 0 | 1,
  ): Buffer {
    const start = this.header(oid, values.length);
    let nulls = false;
    for (let i = 0; i < values.length; i++) {
      const s = pick(values[i] as T);
      if (s === null) {
        this.ensure(4);
        this.int32(-1);
        nulls = true;
      } else this.element(s, version);
    }
    return this.finish(start, nulls);
  }

  /** ndim, flags (patched by {@link finish}), element type and the one dimension: where the array starts. */
  private header(oid: number, length: number): number {
    this.ensure(HEADER_BYTES);
    const start = this.offset;
    this.int32(length === 0 ? 0 : 1);
    this.int32(0);
    this.int32(oid);
    if (length > 0) {
      this.int32(length);
      this.int32(1);
    }
    return start;
  }

  /** The array from `start` to here, its has-nulls flag set. */
  private finish(start: number, nulls: boolean): Buffer {
    // `ensure` may have moved the bytes to a larger buffer, at the same offsets.
    if (nulls) this.buffer.writeInt32BE(1, start + 4);
    return this.buffer.subarray(start, this.offset);
  }

  /**
   * One plain decimal as `numeric_send` would send it: ndigits, weight, sign, dscale, then
   * base-10000 digits. Leading and trailing zero groups may stay: `numeric_recv` strips
   * them (make_result), as `numeric_in` does.
   */
  private decimal(s: string): void {
    const point = s.indexOf(".");
    const integerEnd = point < 0 ? s.length : point;
    const fractionLength = point < 0 ? 0 : s.length - point - 1;
    const integerGroups = Math.ceil(integerEnd / 4);
    const fractionGroups = Math.ceil(fractionLength / 4);
    const ndigits = integerGroups + fractionGroups;
    this.ensure(12 + ndigits * 2);
    this.int32(8 + ndigits * 2);
    this.int16(ndigits);
    this.int16(integerGroups - 1);
    this.int16(0); // NUMERIC_POS: prices are never negative here
    this.int16(fractionLength);
    // Integer groups end at the point: the first may be short. Fraction groups start after it: the last is padded.
    let end = integerEnd - (integerGroups - 1) * 4;
    for (let g = 0, from = 0; g < integerGroups; g++, from = end, end += 4) {
      this.int16(groupOf(s, from, end));
    }
    for (let from = point + 1; from > 0 && from < s.length; from += 4) {
      const to = Math.min(from + 4, s.length);
      let group = groupOf(s, from, to);
      for (let pad = to - from; pad < 4; pad++) group *= 10;
      this.int16(group);
    }
  }

  /** A string element: its UTF-8 length, an optional version byte (jsonb), its bytes. */
  private element(s: string, version: 0 | 1): void {
    const length = s.length;
    // At most 3 bytes per UTF-16 unit; the length is patched in once the bytes are written.
    this.ensure(5 + length * 3);
    const buffer = this.buffer;
    const lengthAt = this.offset;
    let at = lengthAt + 4;
    if (version) buffer[at++] = JSONB_VERSION;
    // ASCII (most SKUs, currencies, many names) byte by byte: a native write per element cost more than the copy.
    let i = 0;
    for (; i < length; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) break;
      buffer[at + i] = c;
    }
    const bytes = i === length ? length : buffer.write(s, at, "utf8");
    this.offset = lengthAt;
    this.int32(bytes + version);
    this.offset = at + bytes;
  }

  private int32(n: number): void {
    const buffer = this.buffer;
    let at = this.offset;
    buffer[at++] = n >>> 24;
    buffer[at++] = n >>> 16;
    buffer[at++] = n >>> 8;
    buffer[at++] = n;
    this.offset = at;
  }

  private int16(n: number): void {
    this.buffer[this.offset++] = n >>> 8;
    this.buffer[this.offset++] = n;
  }

  /** Room for `bytes` more; the bytes written so far are copied into a larger buffer. */
  private ensure(bytes: number): void {
    if (this.offset + bytes <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(MIN_CAPACITY, this.buffer.length * 2, this.offset + bytes));
    this.buffer.copy(grown, 0, 0, this.offset);
    this.buffer = grown;
  }
}

/** The decimal digits `s[start, end)` as a number (at most 4 digits: one base-10000 group). */
function groupOf(s: string, start: number, end: number): number {
  let n = 0;
  for (let i = start; i < end; i++) n = n * 10 + (s.charCodeAt(i) - 0x30);
  return n;
}
