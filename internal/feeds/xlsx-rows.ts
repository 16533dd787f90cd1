import { open } from "node:fs/promises";
import { posix } from "node:path";
import { SaxesParser, type SaxesTagPlain } from "saxes";
import type { Entry, ZipFile } from "yauzl";
import { exceedsDecompressionRatio, MAX_DECOMPRESSION_RATIO } from "../platform/content-encoding.js";
import { errorMessage, IngestionError } from "../platform/errors.js";
import {
  columnIndex,
  formatGeneral,
  isDateFormat,
  rowOfRef,
  type SheetRow,
  serialToIso,
  workbookError,
} from "./workbook.js";
import { checkEntry, openZip } from "./zip.js";

/**
 * An Office Open XML workbook (`.xlsx`) read from its spooled file with yauzl
 * (the zip's central directory, entry sizes checked while inflating) and saxes
 * (never reads a DTD, so no entity expansion): `_rels/.rels` → the workbook
 * part → its sheets and relationships; the shared-strings table read whole
 * first (bounded by `maxBytes`: it is the one part a row may point anywhere
 * into); `styles.xml`'s cell formats to tell dates from numbers; then the
 * sheet's XML streamed row by row, a group of rows per inflated chunk.
 *
 * Cells: shared, inline and rich strings as their text (phonetic runs left
 * out); numbers in the General format (workbook.ts `formatGeneral`), or ISO
 * 8601 when their format is a date; booleans `true`/`false`; formulas by their
 * cached value; error cells reported so a mapped one rejects its record.
 */

export interface XlsxSheet {
  name: string;
  rows: AsyncIterable<SheetRow[]>;
}

const OLE_MAGIC = Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]);
/** "EncryptionInfo" in UTF-16LE: the stream an encrypted OOXML package (a CFB file) holds. */
const ENCRYPTION_INFO = Buffer.from("EncryptionInfo", "utf16le");
const MAX_ENTRIES = 10_000;

/** Local name of a possibly prefixed tag (`x:row` → `row`). */
function local(name: string): string {
  const i = name.indexOf(":");
  return i < 0 ? name : name.slice(i + 1);
}

function attr(tag: SaxesTagPlain, name: string): string | undefined {
  const direct = tag.attributes[name];
  if (direct !== undefined) return direct;
  for (const [k, v] of Object.entries(tag.attributes)) if (local(k) === name) return v;
  return undefined;
}

/** A CFB (OLE2) file: an `.xls`, or an encrypted OOXML package. */
async function refuseOle(path: string): Promise<void> {
  const fh = await open(path, "r");
  try {
    const head = Buffer.alloc(256 * 1024);
    const { bytesRead } = await fh.read(head, 0, head.length, 0);
    if (bytesRead < 8 || !head.subarray(0, 8).equals(OLE_MAGIC)) return;
    if (head.subarray(0, bytesRead).includes(ENCRYPTION_INFO)) {
      throw workbookError("workbook is encrypted (password-protected): it cannot be read");
    }
    throw workbookError('file is a legacy binary workbook (.xls), not an xlsx: set format.type to "xls"');
  } finally {
    await fh.close();
  }
}

function listEntries(zip: ZipFile): Promise<Map<string, Entry>> {
  return new Promise((resolve, reject) => {
    const entries = new Map<string, Entry>();
    zip.on("entry", (entry: Entry) => {
      if (entries.size >= MAX_ENTRIES) {
        reject(workbookError(`workbook holds more than ${MAX_ENTRIES} parts: not a price list`));
        return;
      }
      entries.set(entry.fileName.replace(/^\/+/, ""), entry);
      zip.readEntry();
    });
    zip.once("end", () => resolve(entries));
    zip.once("error", reject);
    zip.readEntry();
  });
}

/** An entry's inflated bytes, counted against `budget` (bytes left of `maxBytes`) and 100:1 past 1 MiB. */
async function* inflate(
  zip: ZipFile,
  entry: Entry,
  budget: { left: number; maxBytes: number },
): AsyncGenerator<Buffer> {
  checkEntry(entry, budget.maxBytes);
  const stream = await new Promise<NodeJS.ReadableStream>((resolve, reject) =>
    zip.openReadStream(entry, (err, s) => (err ? reject(err) : resolve(s))),
  ).catch((err: unknown) => {
    throw workbookError(`workbook part ${entry.fileName} cannot be read: ${errorMessage(err)}`, err);
  });
  let total = 0;
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      total += chunk.length;
      budget.left -= chunk.length;
      if (budget.left < 0) {
        throw workbookError(
          `workbook is larger than maxResponseBytes (${budget.maxBytes} bytes) once decompressed`,
        );
      }
      if (exceedsDecompressionRatio(total, entry.compressedSize)) {
        throw workbookError(
          `workbook part ${entry.fileName} decompresses more than ${MAX_DECOMPRESSION_RATIO}:1: refused as a decompression bomb`,
        );
      }
      yield chunk;
    }
  } catch (err) {
    if (err instanceof IngestionError) throw err;
    throw workbookError(`workbook part ${entry.fileName} is corrupt: ${errorMessage(err)}`, err);
  } finally {
    (stream as unknown as { destroy?: () => void }).destroy?.();
  }
}

/** Parses an XML part with saxes, chunk by chunk; `onChunk` runs after each chunk. */
async function* parsePart(
  zip: ZipFile,
  entry: Entry,
  budget: { left: number; maxBytes: number },
  setup: (parser: SaxesParser) => void,
): AsyncGenerator<void> {
  const parser = new SaxesParser({ xmlns: false });
  let failure: Error | undefined;
  parser.on("error", (err) => {
    failure ??= err;
  });
  setup(parser);
  const decoder = new TextDecoder("utf-8");
  for await (const chunk of inflate(zip, entry, budget)) {
    parser.write(decoder.decode(chunk, { stream: true }));
    if (failure)
      throw workbookError(`workbook part ${entry.fileName} is not well-formed XML: ${failure.message}`);
    yield;
  }
  parser.write(decoder.decode());
  parser.close();
  if (failure)
    throw workbookError(`workbook part ${entry.fileName} is not well-formed XML: ${failure.message}`);
  yield;
}

async function drain(parts: AsyncGenerator<void>): Promise<void> {
  for await (const _ of parts);
}

interface Relationship {
  type: string;
  target: string;
}

async function readRels(
  zip: ZipFile,
  entries: Map<string, Entry>,
  partPath: string,
  budget: { left: number; maxBytes: number },
): Promise<Map<string, Relationship>> {
  const dir = posix.dirname(partPath);
  const relsPath = posix.join(dir === "." ? "" : dir, "_rels", `${posix.basename(partPath)}.rels`);
  const rels = new Map<string, Relationship>();
  const entry = entries.get(relsPath);
  if (entry === undefined) return rels;
  await drain(
    parsePart(zip, entry, budget, (p) =>
      p.on("opentag", (tag) => {
        if (local(tag.name) !== "Relationship") return;
        const id = attr(tag, "Id");
        const target = attr(tag, "Target");
        if (id === undefined || target === undefined || attr(tag, "TargetMode") === "External") return;
        const resolved = target.startsWith("/")
          ? target.slice(1)
          : posix.normalize(posix.join(dir === "." ? "" : dir, target));
        rels.set(id, { type: attr(tag, "Type") ?? "", target: resolved });
      }),
    ),
  );
  return rels;
}

function byType(rels: Map<string, Relationship>, suffix: string): string | undefined {
  for (const r of rels.values()) if (r.type.endsWith(suffix)) return r.target;
  return undefined;
}

/** Shared strings (`<si>`: the text of its `<t>`s, `<rPh>` phonetic runs left out). */
async function readSharedStrings(
  zip: ZipFile,
  entry: Entry,
  budget: { left: number; maxBytes: number },
): Promise<string[]> {
  const strings: string[] = [];
  let inSi = false;
  let inT = false;
  let phonetic = 0;
  let text = "";
  await drain(
    parsePart(zip, entry, budget, (p) => {
      p.on("opentag", (tag) => {
        const n = local(tag.name);
        if (n === "si") {
          inSi = true;
          text = "";
        } else if (n === "rPh") phonetic++;
        else if (n === "t" && inSi && phonetic === 0) inT = true;
      });
      p.on("text", (t) => {
        if (inT) text += t;
      });
      p.on("closetag", (tag) => {
        const n = local(tag.name);
        if (n === "si") {
          strings.push(text);
          inSi = false;
        } else if (n === "rPh") phonetic--;
        else if (n === "t") inT = false;
      });
    }),
  );
  return strings;
}

/** For each cell format (`s` attribute) whether it shows a date. */
async function readDateStyles(
  zip: ZipFile,
  entry: Entry | undefined,
  budget: { left: number; maxBytes: number },
): Promise<boolean[]> {
  if (entry === undefined) return [];
  const codes = new Map<number, string>();
  const xfs: number[] = [];
  let inCellXfs = false;
  await drain(
    parsePart(zip, entry, budget, (p) => {
      p.on("opentag", (tag) => {
        const n = local(tag.name);
        if (n === "numFmt") {
          const id = Number(attr(tag, "numFmtId"));
          const code = attr(tag, "formatCode");
          if (Number.isInteger(id) && code !== undefined) codes.set(id, code);
        } else if (n === "cellXfs") inCellXfs = true;
        else if (n === "xf" && inCellXfs) xfs.push(Number(attr(tag, "numFmtId") ?? 0));
      });
      p.on("closetag", (tag) => {
        if (local(tag.name) === "cellXfs") inCellXfs = false;
      });
    }),
  );
  return xfs.map((id) => isDateFormat(id, codes.get(id)));
}

/**
 * Opens the spooled workbook at `path` and returns the sheet `wanted`'s rows.
 * `pick` chooses among the sheet names (workbook.ts `pickSheet`). The zip is
 * closed when the rows end, fail or are abandoned.
 * @throws IngestionError `CONTRACT`: not a workbook, encrypted, no such sheet, a corrupt part.
 */
export async function openXlsxSheet(
  path: string,
  maxBytes: number,
  pick: (names: readonly string[]) => number,
): Promise<XlsxSheet> {
  await refuseOle(path);
  let zip: ZipFile;
  try {
    zip = await openZip(path);
  } catch (err) {
    throw workbookError(
      `file is not an xlsx workbook (not a readable zip archive): ${errorMessage(err)}`,
      err,
    );
  }
  try {
    const entries = await listEntries(zip).catch((err: unknown) => {
      if (err instanceof IngestionError) throw err;
      throw workbookError(`workbook's zip directory is corrupt: ${errorMessage(err)}`, err);
    });
    const budget = { left: maxBytes, maxBytes };
    const root = await readRels(zip, entries, "", budget);
    const workbookPath = byType(root, "/officeDocument") ?? "xl/workbook.xml";
    const workbookEntry = entries.get(workbookPath);
    if (workbookEntry === undefined) {
      throw workbookError(
        `file is a zip archive but not an xlsx workbook (it has no ${workbookPath}); a zipped workbook needs format.zipEntry`,
      );
    }
    const sheets: { name: string; rid: string }[] = [];
    let date1904 = false;
    await drain(
      parsePart(zip, workbookEntry, budget, (p) =>
        p.on("opentag", (tag) => {
          const n = local(tag.name);
          if (n === "sheet") sheets.push({ name: attr(tag, "name") ?? "", rid: attr(tag, "id") ?? "" });
          else if (n === "workbookPr") {
            const v = attr(tag, "date1904");
            date1904 = v === "1" || v === "true";
          }
        }),
      ),
    );
    const rels = await readRels(zip, entries, workbookPath, budget);
    const index = pick(sheets.map((s) => s.name));
    const sheet = sheets[index]!;
    const sheetPath = rels.get(sheet.rid)?.target;
    const sheetEntry = sheetPath === undefined ? undefined : entries.get(sheetPath);
    if (sheetEntry === undefined) {
      throw workbookError(
        `sheet ${JSON.stringify(sheet.name)} has no worksheet part in the workbook (a chart sheet?)`,
      );
    }
    const sstPath = byType(rels, "/sharedStrings");
    const sstEntry = sstPath === undefined ? undefined : entries.get(sstPath);
    const strings = sstEntry === undefined ? [] : await readSharedStrings(zip, sstEntry, budget);
    const stylesPath = byType(rels, "/styles");
    const dates = await readDateStyles(
      zip,
      stylesPath === undefined ? undefined : entries.get(stylesPath),
      budget,
    );
    const opened = zip;
    return {
      name: sheet.name,
      rows: sheetRows(opened, sheetEntry, budget, strings, dates, date1904),
    };
  } catch (err) {
    zip.close();
    throw err;
  }
}

async function* sheetRows(
  zip: ZipFile,
  entry: Entry,
  budget: { left: number; maxBytes: number },
  strings: readonly string[],
  dates: readonly boolean[],
  date1904: boolean,
): AsyncGenerator<SheetRow[]> {
  let ready: SheetRow[] = [];
  let row: SheetRow | undefined;
  let lastRow = 0;
  let col = -1;
  let cellType = "n";
  let cellStyle = 0;
  let cellRef = "";
  /** Which text is being collected: `v`, inline `t`, or none. */
  let into: "v" | "t" | undefined;
  let v = "";
  let inline = "";
  let phonetic = 0;

  const finishCell = () => {
    if (row === undefined || col < 0) return;
    let value: string | undefined;
    switch (cellType) {
      case "s": {
        const i = Number(v);
        value = v === "" ? undefined : strings[i];
        if (v !== "" && value === undefined) {
          throw workbookError(
            `cell ${cellRef} points at shared string ${v}, beyond the table's ${strings.length}`,
          );
        }
        break;
      }
      case "inlineStr":
        value = inline;
        break;
      case "str":
        value = v;
        break;
      case "b":
        value = v === "" ? undefined : v === "1" || v === "true" ? "true" : "false";
        break;
      case "e":
        if (v !== "") row.errors = [...(row.errors ?? []), { col, text: v }];
        value = v === "" ? undefined : v;
        break;
      case "d":
        value = v === "" ? undefined : v.replace(/Z$/, "").replace(/T00:00:00(\.0+)?$/, "");
        break;
      default: {
        if (v === "") break;
        const n = Number(v);
        if (Number.isNaN(n))
          throw workbookError(`cell ${cellRef} holds ${JSON.stringify(v.slice(0, 40))}, not a number`);
        value = dates[cellStyle] === true ? serialToIso(n, date1904) : formatGeneral(n);
      }
    }
    if (value !== undefined) row.values[col] = value;
  };

  const parts = parsePart(zip, entry, budget, (p) => {
    p.on("opentag", (tag) => {
      switch (local(tag.name)) {
        case "row": {
          const r = Number(attr(tag, "r"));
          const n = Number.isInteger(r) && r > 0 ? r : lastRow + 1;
          lastRow = n;
          row = { n, values: [] };
          col = -1;
          break;
        }
        case "c": {
          const ref = attr(tag, "r");
          const byRef = ref === undefined ? -1 : columnIndex(ref);
          col = byRef >= 0 ? byRef : col + 1;
          cellRef = ref ?? `row ${lastRow}`;
          if (ref !== undefined && row !== undefined && rowOfRef(ref) === undefined)
            cellRef = `${ref}${row.n}`;
          cellType = attr(tag, "t") ?? "n";
          cellStyle = Number(attr(tag, "s") ?? 0);
          v = "";
          inline = "";
          break;
        }
        case "v":
          into = "v";
          break;
        case "rPh":
          phonetic++;
          break;
        case "t":
          if (phonetic === 0) into = "t";
          break;
      }
    });
    p.on("text", (t) => {
      if (into === "v") v += t;
      else if (into === "t") inline += t;
    });
    p.on("closetag", (tag) => {
      switch (local(tag.name)) {
        case "v":
        case "t":
          into = undefined;
          break;
        case "rPh":
          phonetic--;
          break;
        case "c":
          finishCell();
          break;
        case "row":
          if (row !== undefined && row.values.length > 0) ready.push(row);
          row = undefined;
          break;
      }
    });
  });
  try {
    for await (const _ of parts) {
      if (ready.length > 0) {
        const group = ready;
        ready = [];
        yield group;
      }
    }
  } finally {
    await parts.return(undefined);
    zip.close();
  }
}
