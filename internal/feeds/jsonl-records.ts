import { errorMessage } from "../platform/errors.js";
import { parseJsonText } from "../platform/json-body.js";
import { encodingReason, REPLACEMENT } from "./decode.js";
import { type Collector, clip, MAX_RECORD_CHARS, type RecordReader } from "./types.js";

/**
 * JSON lines: one JSON value per line, each parsed number-exact like a JSON
 * page (`parseJsonText`: native `JSON.parse` unless a number literal would lose
 * digits in a double, which then arrives as a `LosslessNumber` with its text).
 * A line that is not JSON, too deep, too long or holding an invalid byte is one
 * reject with its line number; blank lines are skipped.
 */

const LIMITS = { maxDepth: 64, maxRecords: Number.MAX_SAFE_INTEGER, recordsPath: "" };

export function jsonlRecordReader(encoding: string, maxDepth = LIMITS.maxDepth): RecordReader {
  const limits = { ...LIMITS, maxDepth };
  return async function* readJsonLines(text: AsyncIterable<string>, out: Collector) {
    let line = 0;
    let pending = "";
    /** The current line grew past the bound: it is one reject, its rest is dropped. */
    let dropping = false;

    const take = (raw: string, at: number) => {
      const body = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
      if (body.trim() === "") return;
      if (body.includes(REPLACEMENT)) {
        out.rejects.push({ reason: encodingReason(encoding, `line ${at}`), raw: clip(body) });
        return;
      }
      try {
        out.records.push(parseJsonText(body, limits));
      } catch (err) {
        out.rejects.push({ reason: `line ${at} is not valid JSON: ${errorMessage(err)}`, raw: clip(body) });
      }
    };

    for await (const chunk of text) {
      let start = 0;
      for (;;) {
        const nl = chunk.indexOf("\n", start);
        if (nl < 0) {
          if (!dropping) {
            pending += chunk.slice(start);
            if (pending.length > MAX_RECORD_CHARS) {
              out.rejects.push({
                reason: `line ${line + 1} is longer than ${MAX_RECORD_CHARS} characters`,
                raw: clip(pending),
              });
              pending = "";
              dropping = true;
            }
          }
          break;
        }
        line++;
        if (dropping) dropping = false;
        else if (pending.length + (nl - start) > MAX_RECORD_CHARS) {
          out.rejects.push({
            reason: `line ${line} is longer than ${MAX_RECORD_CHARS} characters`,
            raw: clip(pending + chunk.slice(start, Math.min(nl, start + 4096))),
          });
        } else take(pending + chunk.slice(start, nl), line);
        pending = "";
        start = nl + 1;
      }
      yield;
    }
    if (!dropping && pending !== "") take(pending, line + 1);
    yield;
  };
}
