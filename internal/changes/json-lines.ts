/**
 * `supplier-sync changes --json` in Node: the feed's rows arrive as PostgreSQL COPY
 * text (the same fast COPY as the text form) and each line becomes one JSON object
 * here, on the client's core, while PostgreSQL keeps producing rows on its own.
 * Building the JSON text in SQL (one `concat` per row) held the server's single core
 * for 3× as long as the COPY itself (bench/README.md, Change feed).
 *
 * Invariants:
 * - The output is byte for byte what the SQL builder printed (kept in
 *   json-lines.pg.test.ts as the reference): strings through `to_json` there are
 *   `JSON.stringify` here (PostgreSQL's `escape_json` escapes the same characters:
 *   `"`, `\`, `\b \f \n \r \t` by name, other controls as lowercase `\u00xx`);
 *   numbers, the price, the kind and the supplier are printed as PostgreSQL printed
 *   them; `attributes` is jsonb's own text.
 * - A line ends at the first raw `\n` byte: COPY text escapes newlines inside values,
 *   and no byte of a UTF-8 multibyte sequence is `\n`. Chunks end anywhere, also
 *   inside a line or a UTF-8 sequence; the rest waits for the next chunk.
 */

import { Transform, type TransformCallback } from "node:stream";

/**
 * The columns, in this order, that {@link CopyTextToJsonLines} reads. `observed_at`
 * is a `timestamp` in UTC (printed as `YYYY-MM-DD HH:MI:SS[.ffffff]` under DateStyle
 * ISO); `txid`, `id`, `supplier`, `sku`, `run_id`, `observed_at` and `content_hash`
 * are never null (NOT NULL columns, or the feed's predicate).
 */
export const JSON_COLUMNS =
  "o.txid, o.id, o.supplier, o.sku, o.kind, o.run_id, o.observed_at at time zone 'UTC', o.price, o.currency, o.stock, o.attributes, o.content_hash";

const FIELDS = 12;
const NULL = "\\N";
const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;

function jsonString(s: string): string {
  return NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`;
}

const NAMED: Record<string, string> = { b: "\b", f: "\f", n: "\n", r: "\r", t: "\t", v: "\v" };

/**
 * One field of COPY text as its value (PostgreSQL docs, COPY, Text Format): `\b \f
 * \n \r \t \v`, `\` and one to three octal digits or `x` and one or two hex digits
 * (a byte: consecutive ones are decoded together as UTF-8), `\` before any other
 * character is that character. The caller checks for `\N` (null) first.
 */
export function decodeCopyText(field: string): string {
  let i = field.indexOf("\\");
  if (i < 0) return field;
  let out = field.slice(0, i);
  let bytes: number[] = [];
  const flush = () => {
    if (bytes.length > 0) out += Buffer.from(bytes).toString("utf8");
    bytes = [];
  };
  while (i >= 0) {
    const c = field[i + 1] ?? "";
    let next = i + 2;
    const octal = /^[0-7]{1,3}/.exec(field.slice(i + 1, i + 4));
    const hex = c === "x" ? /^[0-9a-fA-F]{1,2}/.exec(field.slice(i + 2, i + 4)) : null;
    if (octal) {
      bytes.push(Number.parseInt(octal[0], 8) & 0xff);
      next = i + 1 + octal[0].length;
    } else if (hex) {
      bytes.push(Number.parseInt(hex[0], 16));
      next = i + 2 + hex[0].length;
    } else {
      flush();
      out += NAMED[c] ?? c;
    }
    const after = field.indexOf("\\", next);
    if (after !== next) flush();
    out += field.slice(next, after < 0 ? field.length : after);
    i = after;
  }
  flush();
  return out;
}

function value(field: string): string | null {
  return field === NULL ? null : decodeCopyText(field);
}

type Row = [
  txid: string,
  id: string,
  supplier: string,
  sku: string,
  kind: string | null,
  runId: string,
  observedAt: string,
  price: string | null,
  currency: string | null,
  stock: string | null,
  attributes: string | null,
  hash: string,
];

/** One row of {@link JSON_COLUMNS} as the JSON object `changes --json` prints, with its newline. */
function jsonLine(fields: readonly (string | null)[]): string {
  const [txid, id, supplier, sku, kind, runId, observedAt, price, currency, stock, attributes, hash] =
    fields as Row;
  return `{"cursor":"${txid}:${id}","supplier":"${supplier}","sku":${jsonString(sku)},"kind":${
    kind === null ? "null" : `"${kind}"`
  },"run_id":${runId},"observed_at":"${observedAt.replaceAll(" ", "T")}Z","price":${
    price === null ? "null" : `"${price}"`
  },"currency":${currency === null ? "null" : jsonString(currency)},"stock":${stock},"attributes":${attributes},"content_hash":${jsonString(hash)}}\n`;
}

const TAB = 9;
const NEWLINE = 10;
const SPACE = 32;
const QUOTE = 34;
const BACKSLASH = 92;
const T = 84;
const N = 78;

// The object's fixed parts, between the fields.
const OPEN = Buffer.from('{"cursor":"');
const SUPPLIER = Buffer.from('","supplier":"');
const SKU = Buffer.from('","sku":"');
const KIND = Buffer.from('","kind":');
const RUN_ID = Buffer.from(',"run_id":');
const OBSERVED_AT = Buffer.from(',"observed_at":"');
const PRICE = Buffer.from('Z","price":');
const CURRENCY = Buffer.from(',"currency":');
const STOCK = Buffer.from(',"stock":');
const ATTRIBUTES = Buffer.from(',"attributes":');
const CONTENT_HASH = Buffer.from(',"content_hash":"');
const CLOSE = Buffer.from('"}\n');
const JSON_NULL = Buffer.from("null");
/** The fixed parts' length, plus room for a `null` or two quotes in place of each nullable field. */
const FIXED_BYTES = 160;
const OUT_BYTES = 256 * 1024;

/**
 * Copies `src[from, to)` to `dst` at `at`; returns the end. A plain loop for the few
 * bytes most fields hold, the native copy past {@link NATIVE_COPY_BYTES}.
 */
function put(dst: Buffer, at: number, src: Uint8Array, from = 0, to = src.length): number {
  if (to - from > NATIVE_COPY_BYTES) return at + (src as Buffer).copy(dst, at, from, to);
  for (let i = from; i < to; i++) dst[at++] = src[i] as number;
  return at;
}

/**
 * Longer than this (an attributes object), a field is copied by `Buffer.copy`: for a
 * 32-byte hash the call cost more than the loop (1M bench lines: 0.82-0.87 s without the
 * call, 1.02-1.06 s with it past 24 bytes).
 */
const NATIVE_COPY_BYTES = 64;

/** Whether `data[from, to)` holds a byte that JSON escapes: a quote, a backslash or a control character. */
function needsEscape(data: Buffer, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const b = data[i] as number;
    if (b < SPACE || b === QUOTE || b === BACKSLASH) return true;
  }
  return false;
}

/**
 * COPY text lines of {@link JSON_COLUMNS} in, one JSON object per line out (utf8).
 * Counts the lines and keeps the last one's position (`txid:id`).
 *
 * Works on bytes: a line without escapes (nulls aside) and without a character JSON
 * escapes in `sku`, `currency` or `content_hash` is copied field by field between the
 * fixed parts, UTF-8 sequences untouched; any other line is decoded and built as a
 * string ({@link jsonLine}). Splitting at the byte `\n` never cuts a UTF-8 sequence.
 */
export class CopyTextToJsonLines extends Transform {
  private pending: Buffer | null = null;
  private out = Buffer.allocUnsafe(OUT_BYTES);
  private at = 0;
  private pushed = 0;
  /** Field `k` of the line being converted is `data[starts[k], ends[k])`. */
  private readonly starts = new Int32Array(FIELDS);
  private readonly ends = new Int32Array(FIELDS);
  lines = 0;
  /** `txid:id` of the last line, `null` before the first. */
  lastPosition: string | null = null;

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const data = this.pending ? Buffer.concat([this.pending, chunk]) : chunk;
    const end = data.lastIndexOf(NEWLINE);
    if (end < 0) {
      this.pending = data;
      done();
      return;
    }
    this.pending = end + 1 < data.length ? data.subarray(end + 1) : null;
    try {
      let start = 0;
      while (start <= end) {
        const stop = data.indexOf(NEWLINE, start);
        this.convertLine(data, start, stop);
        this.lines++;
        if (stop === end) {
          const { starts, ends } = this;
          this.lastPosition = `${data.toString("latin1", starts[0], ends[0])}:${data.toString("latin1", starts[1], ends[1])}`;
        }
        start = stop + 1;
      }
    } catch (err) {
      done(err as Error);
      return;
    }
    this.pushOutput();
    done();
  }

  override _flush(done: TransformCallback): void {
    const rest = this.pending?.length ?? 0;
    done(rest === 0 ? null : new Error(`COPY output ended inside a line (${rest} bytes)`));
  }

  /** Pushes what was built since the last push; later lines go after it, never over it. */
  private pushOutput(): void {
    if (this.at === this.pushed) return;
    this.push(this.out.subarray(this.pushed, this.at));
    this.pushed = this.at;
  }

  /** Makes room for `bytes` more in the output buffer, starting a new one when it is full. */
  private room(bytes: number): void {
    if (this.at + bytes <= this.out.length) return;
    this.pushOutput();
    this.out = Buffer.allocUnsafe(Math.max(OUT_BYTES, bytes));
    this.at = 0;
    this.pushed = 0;
  }

  private convertLine(data: Buffer, start: number, stop: number): void {
    const { starts, ends } = this;
    // One pass over the line: its tabs (a valid line has exactly FIELDS - 1) and backslashes
    // (each must be a null's `\N`, else the line takes the string path).
    let fields = 1;
    let backslashes = 0;
    starts[0] = start;
    for (let i = start; i < stop; i++) {
      const b = data[i] as number;
      if (b === TAB) {
        if (fields < FIELDS) {
          ends[fields - 1] = i;
          starts[fields] = i + 1;
        }
        fields++;
      } else if (b === BACKSLASH) backslashes++;
    }
    if (fields !== FIELDS) throw new Error(`COPY line ${this.lines + 1} has ${fields} fields, not ${FIELDS}`);
    ends[FIELDS - 1] = stop;
    let nulls = 0;
    if (backslashes > 0) for (let k = 0; k < FIELDS; k++) if (this.isNull(data, k)) nulls++;
    if (
      backslashes !== nulls ||
      needsEscape(data, starts[3] as number, ends[3] as number) ||
      needsEscape(data, starts[8] as number, ends[8] as number) ||
      needsEscape(data, starts[11] as number, ends[11] as number)
    ) {
      const line = jsonLine(data.toString("utf8", start, stop).split("\t").map(value));
      const bytes = Buffer.byteLength(line);
      this.room(bytes);
      this.at += this.out.write(line, this.at);
      return;
    }
    this.room(stop - start + FIXED_BYTES);
    const out = this.out;
    let at = this.at;
    at = put(out, at, OPEN);
    at = this.field(at, data, 0);
    out[at++] = 58; // ":"
    at = this.field(at, data, 1);
    at = put(out, at, SUPPLIER);
    at = this.field(at, data, 2);
    at = put(out, at, SKU);
    at = this.field(at, data, 3);
    at = put(out, at, KIND);
    at = nulls > 0 && this.isNull(data, 4) ? put(out, at, JSON_NULL) : this.quoted(at, data, 4);
    at = put(out, at, RUN_ID);
    at = this.field(at, data, 5);
    at = put(out, at, OBSERVED_AT);
    for (let i = starts[6] as number, e = ends[6] as number; i < e; i++) {
      const b = data[i] as number;
      out[at++] = b === SPACE ? T : b;
    }
    at = put(out, at, PRICE);
    at = nulls > 0 && this.isNull(data, 7) ? put(out, at, JSON_NULL) : this.quoted(at, data, 7);
    at = put(out, at, CURRENCY);
    at = nulls > 0 && this.isNull(data, 8) ? put(out, at, JSON_NULL) : this.quoted(at, data, 8);
    at = put(out, at, STOCK);
    at = nulls > 0 && this.isNull(data, 9) ? put(out, at, JSON_NULL) : this.field(at, data, 9);
    at = put(out, at, ATTRIBUTES);
    at = nulls > 0 && this.isNull(data, 10) ? put(out, at, JSON_NULL) : this.field(at, data, 10);
    at = put(out, at, CONTENT_HASH);
    at = this.field(at, data, 11);
    this.at = put(out, at, CLOSE);
  }

  /** Whether field `k` of the line is `\N` (null). */
  private isNull(data: Buffer, k: number): boolean {
    const s = this.starts[k] as number;
    return (this.ends[k] as number) - s === 2 && data[s] === BACKSLASH && data[s + 1] === N;
  }

  /** Field `k`'s bytes, as they are. */
  private field(at: number, data: Buffer, k: number): number {
    return put(this.out, at, data, this.starts[k], this.ends[k]);
  }

  /** Field `k`'s bytes between quotes. */
  private quoted(at: number, data: Buffer, k: number): number {
    const out = this.out;
    out[at++] = QUOTE;
    at = put(out, at, data, this.starts[k], this.ends[k]);
    out[at++] = QUOTE;
    return at;
  }
}
