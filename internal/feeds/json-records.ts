import { getManyValues, isMany, none } from "stream-chain/defs.js";
import Assembler from "stream-json/core/assembler.js";
import pick from "stream-json/core/filters/pick.js";
import { jsonParser, type Token } from "stream-json/core/parser.js";
import { readDotPath } from "../platform/dot-path.js";
import { errorMessage, IngestionError } from "../platform/errors.js";
import { isExactAsDouble, LosslessNumber } from "../platform/exact-json.js";
import { parseJsonText } from "../platform/json-body.js";
import { encodingReason, REPLACEMENT } from "./decode.js";
import type { Collector, RecordReader } from "./types.js";

/**
 * JSON bodies. `"stream": true`: stream-json's tokenizer and path filter find
 * the array at `records.path` and each element is assembled on its own, so only
 * one element is in memory at a time. Number literals are kept as exactly as a
 * page's are: a plain number when a double holds the literal's value, else a
 * `LosslessNumber` carrying its text. Without `stream` the whole body (bounded
 * by `maxResponseBytes`) is parsed as one page, then cut into steps.
 */

function describePath(path: string): string {
  return path === "" ? "the body root" : `records.path ${JSON.stringify(path)}`;
}

function exactNumber(text: string): number | LosslessNumber {
  return isExactAsDouble(text) ? Number(text) : new LosslessNumber(text);
}

/** True when some string in `value` holds U+FFFD; iterative, so a deep record cannot overflow the stack. */
function holdsReplacement(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === "string") {
      if (v.includes(REPLACEMENT)) return true;
    } else if (v !== null && typeof v === "object" && !(v instanceof LosslessNumber)) {
      for (const [k, item] of Object.entries(v)) {
        if (k.includes(REPLACEMENT)) return true;
        stack.push(item);
      }
    }
  }
  return false;
}

function tokensOf(result: unknown): Token[] {
  // `none`, and the `stop` a `once` filter returns after its match.
  if (result === undefined || typeof result === "symbol") return [];
  if (isMany(result)) return getManyValues(result) as Token[];
  return [result as Token];
}

const OPEN = new Set(["startObject", "startArray"]);
const CLOSE = new Set(["endObject", "endArray"]);

export function jsonStreamRecordReader(
  recordsPath: string,
  encoding: string,
  maxDepth: number,
): RecordReader {
  return async function* readJsonStream(text: AsyncIterable<string>, out: Collector) {
    const tokenize = jsonParser({ packValues: true, streamValues: false });
    const filter = recordsPath === "" ? undefined : pick({ filter: recordsPath, once: true });
    const asm = new Assembler();
    // The assembler saves strings and numbers alike; numbers are made exact first.
    (asm as unknown as { numberValue: (text: string) => void }).numberValue = (literal: string) =>
      (asm as unknown as { stringValue: (v: unknown) => void }).stringValue(exactNumber(literal));

    /** 0: before the array, 1: inside it between elements, >1: inside an element; -1: after it. */
    let depth = 0;
    let found = false;
    let suspect = false;
    let index = 0;

    const onToken = (token: Token) => {
      if (depth === -1) return;
      if (depth === 0) {
        if (token.name === "startArray") {
          depth = 1;
          found = true;
          return;
        }
        if (token.name === "whitespace") return;
        const kind = token.name.replace(/^start|Value$/g, "").toLowerCase();
        throw new IngestionError(
          "CONTRACT",
          `${describePath(recordsPath)} is ${kind === "" ? "not an array" : `${kind}, not an array`}`,
        );
      }
      if (depth === 1 && token.name === "endArray") {
        depth = -1;
        return;
      }
      if (OPEN.has(token.name)) {
        depth++;
        if (depth > maxDepth) {
          throw new IngestionError("CONTRACT", `JSON body nests deeper than maxJsonDepth (${maxDepth})`);
        }
      } else if (CLOSE.has(token.name)) depth--;
      asm.consume(token);
      if (depth === 1 && asm.done) {
        const record = asm.current;
        if (suspect && holdsReplacement(record)) {
          out.rejects.push({ reason: encodingReason(encoding, `record ${index}`), raw: record });
        } else out.records.push(record);
        index++;
        asm.current = null;
      }
    };
    const feed = (tokens: Token[]) => {
      for (const t of tokens) {
        if (filter) for (const picked of tokensOf(filter(t))) onToken(picked);
        else onToken(t);
      }
    };

    try {
      for await (const chunk of text) {
        // Records completed while reading a chunk with U+FFFD are checked deeply; others never are.
        suspect = chunk.includes(REPLACEMENT);
        feed(tokensOf(tokenize(chunk)));
        yield;
      }
      feed(tokensOf(tokenize(none as unknown as string)));
    } catch (err) {
      if (err instanceof IngestionError) throw err;
      throw new IngestionError("CONTRACT", `JSON feed is not valid JSON: ${errorMessage(err)}`, {
        cause: err,
      });
    }
    if (!found) throw new IngestionError("CONTRACT", `${describePath(recordsPath)} is missing from the feed`);
    if (depth !== -1)
      throw new IngestionError("CONTRACT", "JSON feed ends inside the records array (truncated?)");
    yield;
  };
}

/** The whole body as one JSON page (bounded by `maxResponseBytes` upstream), cut into steps. */
export function jsonWholeRecordReader(recordsPath: string, maxDepth: number): RecordReader {
  return async function* readJsonWhole(text: AsyncIterable<string>, out: Collector) {
    const parts: string[] = [];
    for await (const chunk of text) parts.push(chunk);
    let parsed: unknown;
    try {
      parsed = parseJsonText(parts.join(""), { maxDepth, maxRecords: Number.MAX_SAFE_INTEGER, recordsPath });
    } catch (err) {
      if (err instanceof IngestionError) throw err;
      throw new IngestionError("CONTRACT", `JSON feed is not valid JSON: ${errorMessage(err)}`, {
        cause: err,
      });
    }
    parts.length = 0;
    const records = readDotPath(parsed, recordsPath);
    if (records === undefined)
      throw new IngestionError("CONTRACT", `${describePath(recordsPath)} is missing from the feed`);
    if (!Array.isArray(records)) {
      throw new IngestionError(
        "CONTRACT",
        `${describePath(recordsPath)} is ${records === null ? "null" : typeof records}, not an array`,
      );
    }
    for (const record of records) {
      out.records.push(record);
      if (out.full) yield;
    }
    yield;
  };
}
