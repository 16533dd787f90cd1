import { SaxesParser, type SaxesTagPlain } from "saxes";
import { IngestionError } from "../platform/errors.js";
import { encodingReason, REPLACEMENT } from "./decode.js";
import type { XmlFormat } from "./format-schema.js";
import { type Collector, MAX_RECORD_CHARS, type RecordReader } from "./types.js";

/**
 * XML records with saxes, a streaming non-validating parser that never reads
 * a DTD: a DOCTYPE is passed over, so entities it declares (billion laughs,
 * external `SYSTEM` entities) are never defined, let alone expanded. Only the
 * five predefined entities and numeric character references are replaced; any
 * other reference is an error saxes reports and leaves as its literal text.
 *
 * Every occurrence of `format.element`, at any depth, is one record, built as
 * (docs/feeds.md): attributes as `"@name"`, child elements by tag (repeated ones
 * as an array, in order), text as a string, or as `"#text"` when the element
 * also has attributes or children (whitespace-only text between children is
 * layout and dropped). A record is always an object.
 *
 * An undefined entity or an invalid byte (U+FFFD) inside a record makes that
 * record a reject; any other well-formedness error, or a file ending inside an
 * element, is `CONTRACT` for the whole feed: past it the parser's idea of the
 * structure cannot be trusted.
 */

interface OpenElement {
  name: string;
  /** Attributes and children; created on the first one, so a leaf allocates no object. */
  value: Record<string, unknown> | undefined;
  text: string;
}

const ENTITY_ERROR = /undefined entity|disallowed character in entity name/;

/** Sets `key` as an own property even when it is `__proto__`. */
function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__")
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

function addChild(parent: OpenElement, name: string, value: unknown): void {
  parent.value ??= {};
  const v = parent.value;
  if (!Object.hasOwn(v, name)) setOwn(v, name, value);
  else {
    const existing = v[name];
    if (Array.isArray(existing)) existing.push(value);
    else setOwn(v, name, [existing, value]);
  }
}

function finish(el: OpenElement, isRecord: boolean): unknown {
  if (el.value === undefined) return isRecord ? { "#text": el.text } : el.text;
  if (el.text.trim() !== "") setOwn(el.value, "#text", el.text);
  return el.value;
}

function matcher(element: string): (name: string) => boolean {
  if (element.includes(":")) return (name) => name === element;
  const suffix = `:${element}`;
  return (name) => name === element || name.endsWith(suffix);
}

export function xmlRecordReader(format: XmlFormat, encoding: string): RecordReader {
  const isRecord = matcher(format.element);
  return async function* readXml(text: AsyncIterable<string>, out: Collector) {
    const parser = new SaxesParser({ xmlns: false, position: true });
    /** Open elements of the current record; empty between records. */
    const open: OpenElement[] = [];
    let recordLine = 0;
    let recordError: string | undefined;
    let chars = 0;
    /** An oversized record's content is no longer built; `extra` counts elements opened since. */
    let skipping = false;
    let extra = 0;
    let fatal: Error | undefined;

    const where = () => `<${format.element}> at line ${recordLine}`;
    const flag = (reason: string) => {
      recordError ??= reason;
    };
    const count = (n: number) => {
      chars += n;
      if (chars > MAX_RECORD_CHARS && !skipping && open.length > 0) {
        flag(`${where()} is larger than ${MAX_RECORD_CHARS} characters`);
        skipping = true;
      }
    };

    /** An entity error seen between records: it belongs to the next record if it was in that record's start tag. */
    let entityErrorBetween: string | undefined;
    parser.on("error", (err) => {
      if (ENTITY_ERROR.test(err.message)) {
        if (open.length === 0) entityErrorBetween = err.message;
        else {
          flag(
            `${where()}: ${err.message.replace(/\.$/, "")} (only the five predefined XML entities are read; DTD entities are never expanded)`,
          );
        }
        return;
      }
      fatal ??= err;
    });
    parser.on("opentag", (tag: SaxesTagPlain) => {
      if (fatal) return;
      const pendingEntity = entityErrorBetween;
      entityErrorBetween = undefined;
      if (open.length === 0) {
        if (!isRecord(tag.name)) return;
        recordLine = parser.line;
        recordError = undefined;
        // saxes reports an attribute's entity before the open tag; text in between would have cleared it.
        if (pendingEntity !== undefined) {
          flag(
            `${where()}: ${pendingEntity.replace(/\.$/, "")} (only the five predefined XML entities are read; DTD entities are never expanded)`,
          );
        }
        chars = 0;
        skipping = false;
        extra = 0;
      } else if (skipping) {
        extra++;
        return;
      }
      let value: Record<string, unknown> | undefined;

      const attrs = tag.attributes as Record<string, string>;
      for (const name in attrs) {
        const text = attrs[name]!;

        value ??= {};
        setOwn(value, `@${name}`, text);
        count(name.length + text.length);
        if (text.includes(REPLACEMENT)) flag(encodingReason(encoding, where()));
      }
      count(tag.name.length + 16);
      open.push({ name: tag.name, value, text: "" });
    });
    const onText = (t: string) => {
      entityErrorBetween = undefined;
      if (open.length === 0 || skipping) return;
      const top = open[open.length - 1]!;
      top.text += t;
      count(t.length);
      if (t.includes(REPLACEMENT)) flag(encodingReason(encoding, where()));
    };
    parser.on("text", onText);
    parser.on("cdata", onText);
    parser.on("closetag", () => {
      entityErrorBetween = undefined;
      if (fatal || open.length === 0) return;
      if (skipping && extra > 0) {
        extra--;
        return;
      }
      const el = open.pop()!;
      if (open.length > 0) {
        if (!skipping) addChild(open[open.length - 1]!, el.name, finish(el, false));
        return;
      }
      if (skipping) {
        out.rejects.push({ reason: recordError ?? "oversized", raw: { element: el.name, line: recordLine } });
      } else if (recordError !== undefined) {
        const record = finish(el, true);
        out.rejects.push({ reason: recordError, raw: record });
      } else {
        out.records.push(finish(el, true));
      }
    });

    const failed = (err: Error, atEnd: boolean) =>
      new IngestionError(
        "CONTRACT",
        `XML feed is not well-formed: ${err.message}${atEnd ? " (the file ends early: truncated?)" : ""}`,
        { cause: err },
      );

    for await (const chunk of text) {
      parser.write(chunk);
      if (fatal) throw failed(fatal, false);
      yield;
    }
    parser.close();
    if (fatal) throw failed(fatal, true);
  };
}
