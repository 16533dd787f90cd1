import type { Transform } from "node:stream";
import iconv from "iconv-lite";
import { IngestionError } from "../platform/errors.js";
import { through } from "./bytes.js";
import type { FeedEncoding } from "./format-schema.js";

/**
 * Bytes → text with iconv-lite. `auto` resolves, in order: a byte-order mark,
 * the XML declaration's `encoding` (XML feeds only), the `charset` parameter of
 * the Content-Type, else UTF-8. A byte that is not valid in the chosen encoding
 * becomes U+FFFD; the record readers reject a record holding one with a reason
 * that names the encoding ({@link encodingReason}), so a mis-declared file gives
 * readable rejects instead of garbage offers.
 */

/** How many leading bytes are looked at for a BOM and an XML declaration. */
export const SNIFF_BYTES = 1024;

function fromBom(head: Buffer): string | undefined {
  if (head.length >= 3 && head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf) return "utf-8";
  if (head.length >= 2 && head[0] === 0xff && head[1] === 0xfe) return "utf-16le";
  if (head.length >= 2 && head[0] === 0xfe && head[1] === 0xff) return "utf-16be";
  return undefined;
}

function fromXmlDeclaration(head: Buffer): string | undefined {
  // The declaration is ASCII in every encoding this reads without a BOM.
  const text = head.toString("latin1");
  const m = /^\s*<\?xml\s[^>]*?encoding\s*=\s*["']([A-Za-z0-9._:-]+)["']/.exec(text);
  return m?.[1]?.toLowerCase();
}

function fromCharset(contentType: string | undefined): string | undefined {
  if (!contentType) return undefined;
  const m = /;\s*charset\s*=\s*"?([A-Za-z0-9._:-]+)"?/i.exec(contentType);
  return m?.[1]?.toLowerCase();
}

/**
 * The encoding a feed is read in.
 * @throws IngestionError `CONTRACT` when `auto` finds an encoding iconv-lite does not know.
 */
export function chooseEncoding(
  declared: FeedEncoding,
  head: Buffer,
  options: { xml: boolean; contentType: string | undefined },
): string {
  if (declared !== "auto") return declared;
  const found =
    fromBom(head) ??
    (options.xml ? fromXmlDeclaration(head) : undefined) ??
    fromCharset(options.contentType) ??
    "utf-8";
  if (!iconv.encodingExists(found)) {
    throw new IngestionError(
      "CONTRACT",
      `feed declares the encoding ${JSON.stringify(found)}, which is not supported; set format.encoding`,
    );
  }
  return found;
}

/** Text of `source` in `encoding`; a leading BOM is dropped. */
export function decodeText(source: AsyncIterable<Buffer>, encoding: string): AsyncIterable<string> {
  return through<string>(source, iconv.decodeStream(encoding, { stripBOM: true }) as unknown as Transform);
}

/** U+FFFD, what a byte invalid in the encoding decodes to. */
export const REPLACEMENT = "\uFFFD";

/** The reject reason for a record holding U+FFFD. */
export function encodingReason(encoding: string, where: string): string {
  return `${where} holds bytes that are not valid ${encoding} (decoded as U+FFFD): is format.encoding right?`;
}
