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

  /** A `text[]` of `values[i][key]` (null elements allowed). */
  text<T>(values: readonly T[], pick: (value: T) => string | null): Buffer {
    return this.array(TEXT_OID, values, (value) => {
      const s = pick(value);
      if (s === null) return this.nullElement();
      this.element(s, 0);
      return false;
    });
  }

  /** A `jsonb[]`: each element the JSON text of a value (null elements allowed). */
  jsonb<T>(values: readonly T[], pick: (value: T) => string | null): Buffer {
    return this.array(JSONB_OID, values, (value) => {
      const s = pick(value);
      if (s === null) return this.nullElement();
      this.element(s, 1);
      return false;
    });
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
    return this.array(INT4_OID, values, (value) => {
      const n = pick(value);
      if (n === null) return this.nullElement();
      this.ensure(8);
      this.offset = this.buffer.writeInt32BE(4, this.offset);
      this.offset = this.buffer.writeInt32BE(n, this.offset);
      return false;
    });
  }

  /** A `numeric[]` of plain decimals, or null when a value is not one (then the caller sends text). */
  numeric<T>(values: readonly T[], pick: (value: T) => string | null): Buffer | null {
    for (let i = 0; i < values.length; i++) {
      const s = pick(values[i] as T);
      if (s !== null && !PLAIN_DECIMAL.test(s)) return null;
    }
    return this.array(NUMERIC_OID, values, (value) => {
      const s = pick(value);
      if (s === null) return this.nullElement();
      this.decimal(s);
      return false;
    });
  }

  /**
   * One plain decimal as `numeric_send` would send it: ndigits, weight, sign, dscale, then
   * base-10000 digits. Leading and trailing zero groups may stay: `numeric_recv` strips
   * them (make_result), as `numeric_in` does.
   */
  private decimal(s: string): void {
    const point = s.indexOf(".");
    const integer = point < 0 ? s : s.slice(0, point);
    const fraction = point < 0 ? "" : s.slice(point + 1);
    const integerGroups = Math.ceil(integer.length / 4);
    const fractionGroups = Math.ceil(fraction.length / 4);
    const ndigits = integerGroups + fractionGroups;
    this.ensure(12 + ndigits * 2);
    let at = this.buffer.writeInt32BE(8 + ndigits * 2, this.offset);
    at = this.buffer.writeInt16BE(ndigits, at);
    at = this.buffer.writeInt16BE(integerGroups - 1, at);
    at = this.buffer.writeUInt16BE(0, at); // NUMERIC_POS: prices are never negative here
    at = this.buffer.writeInt16BE(fraction.length, at);
    // Integer groups end at the point: the first may be short. Fraction groups start at it: the last is padded.
    let end = integer.length - (integerGroups - 1) * 4;
    for (let g = 0, start = 0; g < integerGroups; g++, start = end, end += 4) {
      at = this.buffer.writeUInt16BE(groupOf(integer, start, end), at);
    }
    for (let start = 0; start < fraction.length; start += 4) {
      let group = groupOf(fraction, start, Math.min(start + 4, fraction.length));
      for (let pad = fraction.length - start; pad < 4; pad++) group *= 10;
      at = this.buffer.writeUInt16BE(group, at);
    }
    this.offset = at;
  }

  /** One array: header, then `write` per value (true when it wrote a NULL). */
  private array<T>(oid: number, values: readonly T[], write: (value: T) => boolean): Buffer {
    this.ensure(HEADER_BYTES);
    const start = this.offset;
    const empty = values.length === 0;
    let at = this.buffer.writeInt32BE(empty ? 0 : 1, start);
    const flagsAt = at;
    at = this.buffer.writeInt32BE(0, at);
    at = this.buffer.writeInt32BE(oid, at);
    if (!empty) {
      at = this.buffer.writeInt32BE(values.length, at);
      at = this.buffer.writeInt32BE(1, at);
    }
    this.offset = at;
    let nulls = false;
    for (let i = 0; i < values.length; i++) {
      if (write(values[i] as T)) nulls = true;
    }
    // `ensure` may have moved the bytes to a larger buffer: the header is where `start` is now.
    if (nulls) this.buffer.writeInt32BE(1, flagsAt);
    return this.buffer.subarray(start, this.offset);
  }

  private nullElement(): true {
    this.ensure(4);
    this.offset = this.buffer.writeInt32BE(-1, this.offset);
    return true;
  }

  /** A string element: its UTF-8 length, an optional version byte (jsonb), its bytes. */
  private element(s: string, version: 0 | 1): void {
    // At most 3 bytes per UTF-16 unit; the length is patched in once the bytes are written.
    this.ensure(5 + s.length * 3);
    const lengthAt = this.offset;
    let at = lengthAt + 4;
    if (version) this.buffer[at++] = JSONB_VERSION;
    const bytes = s.length === 0 ? 0 : this.buffer.write(s, at, "utf8");
    this.buffer.writeInt32BE(bytes + version, lengthAt);
    this.offset = at + bytes;
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
