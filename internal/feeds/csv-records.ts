import { pipeline, Readable } from "node:stream";
import { type CsvError, parse } from "csv-parse";
import { IngestionError } from "../platform/errors.js";
import { encodingReason, REPLACEMENT } from "./decode.js";
import type { CsvFormat } from "./format-schema.js";
import { type Collector, clip, MAX_RECORD_CHARS, type RecordReader } from "./types.js";
import { normalizeHeader } from "./workbook.js";

/**
 * CSV records with csv-parse. A row csv-parse cannot read (a stray quote, a
 * column count that differs from the header's, an oversized row) is one reject
 * carrying csv-parse's reason, its line and the raw row; the rows after it are
 * read as usual. Values stay strings, so prices keep every digit.
 */

function describe(err: CsvError | Error): string {
  const lines = (err as { lines?: unknown }).lines;
  return typeof lines === "number" ? `line ${lines}: ${err.message}` : err.message;
}

function byIndex(row: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < row.length; i++) out[String(i)] = row[i]!;
  return out;
}

export function csvRecordReader(format: CsvFormat, encoding: string): RecordReader {
  return async function* readCsv(text: AsyncIterable<string>, out: Collector) {
    // csv-parse may report several errors for one row (a stray quote, then its length): one reject per row.
    let lastSkipped = -1;
    const parser = parse({
      delimiter: format.delimiter,
      quote: format.quote,
      // Header texts as record keys, whitespace-normalised as field paths are (docs/feeds.md, flat records).
      columns: format.header ? (header: string[]) => header.map(normalizeHeader) : false,
      from_line: format.skipLines + 1,
      raw: true,
      info: true,
      skip_empty_lines: true,
      skip_records_with_error: true,
      max_record_size: MAX_RECORD_CHARS,
      on_skip: (err: CsvError | undefined, raw: string | undefined) => {
        if (!err) return;
        const row = (err as { records?: unknown }).records;
        const last = out.rejects[out.rejects.length - 1];
        if (typeof row === "number" && row === lastSkipped && last) {
          last.raw = clip(raw ?? "");
          return;
        }
        lastSkipped = typeof row === "number" ? row : -1;
        out.rejects.push({ reason: describe(err), raw: clip(raw ?? "") });
      },
    });
    const rows = pipeline(Readable.from(text, { objectMode: false }), parser, () => {});
    try {
      for await (const item of rows as AsyncIterable<{
        record: Record<string, string> | string[];
        raw: string;
        info: { lines: number };
      }>) {
        if (item.raw.includes(REPLACEMENT)) {
          out.rejects.push({
            reason: encodingReason(encoding, `line ${item.info.lines}`),
            raw: clip(item.raw.replace(/\r?\n$/, "")),
          });
        } else {
          out.records.push(Array.isArray(item.record) ? byIndex(item.record) : item.record);
        }
        if (out.full) yield;
      }
    } catch (err) {
      if (err instanceof IngestionError) throw err;
      if ((err as { code?: unknown }).code?.toString().startsWith("CSV_")) {
        throw new IngestionError("CONTRACT", `CSV feed cannot be read: ${describe(err as Error)}`, {
          cause: err,
        });
      }
      throw err;
    }
    yield;
  };
}
