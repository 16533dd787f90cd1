/**
 * `supplier-sync changes --json` in Node: the feed's rows arrive as PostgreSQL COPY
 * text (the same fast COPY as the text form) and each line becomes one JSON object
 * here, on the client's core, while PostgreSQL keeps producing rows on its own.
 * Building the JSON text in SQL (one `concat` per row) held the server's single core
 * for 3× as long as the COPY itself (bench/README.md, Change feed).
 *
 * Invariants:
 * - The output is byte for byte what the SQL builder printed (kept in
 *   feed.pg.test.ts as the reference): strings through `to_json` there are
 *   `JSON.stringify` here (PostgreSQL's `escape_json` escapes the same characters:
 *   `"`, `\`, `\b \f \n \r \t` by name, other controls as lowercase `\u00xx`);
 *   numbers, the price, the kind and the supplier are printed as PostgreSQL printed
 *   them; `attributes` is jsonb's own text.
 * - A line ends at the first raw `\n`: COPY text escapes newlines inside values.
 *   Chunks end anywhere, also inside a line or a UTF-8 sequence; the rest waits
 *   for the next chunk.
 */

import { Transform, type TransformCallback } from "node:stream";
import { StringDecoder } from "node:string_decoder";

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

/**
 * COPY text lines of {@link JSON_COLUMNS} in, one JSON object per line out (utf8).
 * Counts the lines and keeps the last one's position (`txid:id`).
 */
export class CopyTextToJsonLines extends Transform {
  private readonly decoder = new StringDecoder("utf8");
  private pending = "";
  lines = 0;
  /** `txid:id` of the last line, `null` before the first. */
  lastPosition: string | null = null;

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const text = this.pending + this.decoder.write(chunk);
    const end = text.lastIndexOf("\n");
    if (end < 0) {
      this.pending = text;
      done();
      return;
    }
    this.pending = text.slice(end + 1);
    let out = "";
    let f: string[] = [];
    try {
      for (let start = 0; start <= end; ) {
        const stop = text.indexOf("\n", start);
        const line = text.slice(start, stop);
        f = line.split("\t");
        if (f.length !== FIELDS)
          throw new Error(`COPY line ${this.lines + 1} has ${f.length} fields, not ${FIELDS}`);
        // Without a backslash a line has no escape and no null.
        out += jsonLine(line.includes("\\") ? f.map(value) : f);
        this.lines++;
        start = stop + 1;
      }
    } catch (err) {
      done(err as Error);
      return;
    }
    this.lastPosition = `${f[0]}:${f[1]}`;
    done(null, out);
  }

  override _flush(done: TransformCallback): void {
    const rest = this.pending + this.decoder.end();
    done(rest === "" ? null : new Error(`COPY output ended inside a line (${rest.length} characters)`));
  }
}
