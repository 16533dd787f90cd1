import { Readable } from "node:stream";
import yazl from "yazl";

/**
 * Generated Office Open XML workbooks (`.xlsx`), written the way Excel writes
 * them (a zip of XML parts: content types, relationships, workbook, styles,
 * shared strings, sheets), for the simulator's workbook profiles, the tests and
 * `bench:feeds`. The sheet's XML is generated as it is zipped, so a workbook of
 * a million rows is never held whole.
 *
 * Cells: a string (a shared string, or inline with `strings: "inline"`), a
 * number, a boolean, `{ date }` (a serial shown as a date), `{ formula, value }`
 * (the cached value written), `{ error }` (`#N/A`), `{ rich }` (runs of a shared
 * string, with a phonetic run that is not part of the text), `null` (no cell).
 */

export type WorkbookCell =
  | string
  | number
  | boolean
  | null
  | undefined
  | { date: number }
  | { formula: string; value: number | string }
  | { error: string }
  | { rich: string[] }
  | { text: string; numFmt: string };

export interface SheetSpec {
  name: string;
  /** Rows from row 1 (title block, header, data); a fresh iterable on each call. */
  rows: () => Iterable<WorkbookCell[]>;
  /** Ranges such as `A1:E1`. */
  merged?: string[];
  /** Empty rows written as `<row r="N"/>` elements between the data (Excel writes styled empty rows so). */
}

export interface WorkbookSpec {
  sheets: SheetSpec[];
  /** `shared` (default): strings in `sharedStrings.xml`, as Excel writes them (read in a first pass); `inline`: in the cells. */
  strings?: "shared" | "inline";
  /** Tag prefix for every SpreadsheetML element (`x:`), as some generators write. */
  prefix?: string;
  date1904?: boolean;
}

const NS = "http://schemas.openxmlformats.org/spreadsheetml/2006/main";
const REL_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";
const PKG_REL_NS = "http://schemas.openxmlformats.org/package/2006/relationships";
const PIECE = 64 * 1024;

function esc(text: string): string {
  return text.replace(/[<>&"]/g, (c) =>
    c === "<" ? "&lt;" : c === ">" ? "&gt;" : c === "&" ? "&amp;" : "&quot;",
  );
}

function colName(index: number): string {
  let n = index + 1;
  let out = "";
  while (n > 0) {
    const rem = (n - 1) % 26;
    out = String.fromCharCode(65 + rem) + out;
    n = Math.floor((n - 1) / 26);
  }
  return out;
}

/** Style index 1: a date (numFmt 14); 2: a custom date format; 3+: a `numFmt` of a `{ text, numFmt }` cell. */
const DATE_STYLE = 1;

class SharedStrings {
  readonly index = new Map<string, number>();
  readonly items: string[] = [];
  add(xml: string): number {
    let i = this.index.get(xml);
    if (i === undefined) {
      i = this.items.length;
      this.items.push(xml);
      this.index.set(xml, i);
    }
    return i;
  }
}

function siOf(text: string): string {
  return `<t xml:space="preserve">${esc(text)}</t>`;
}

function richSi(runs: string[]): string {
  return `${runs.map((r, i) => `<r>${i > 0 ? "<rPr><b/></rPr>" : ""}<t xml:space="preserve">${esc(r)}</t></r>`).join("")}<rPh sb="0" eb="1"><t>フリガナ</t></rPh>`;
}

function cellXml(
  cell: WorkbookCell,
  ref: string,
  p: string,
  sst: SharedStrings | undefined,
  customFormats: Map<string, number>,
): string {
  if (cell === null || cell === undefined) return "";
  if (typeof cell === "string") {
    if (sst) return `<${p}c r="${ref}" t="s"><${p}v>${sst.add(siOf(cell))}</${p}v></${p}c>`;
    return `<${p}c r="${ref}" t="inlineStr"><${p}is><${p}t xml:space="preserve">${esc(cell)}</${p}t></${p}is></${p}c>`;
  }
  if (typeof cell === "number") return `<${p}c r="${ref}"><${p}v>${cell}</${p}v></${p}c>`;
  if (typeof cell === "boolean") return `<${p}c r="${ref}" t="b"><${p}v>${cell ? 1 : 0}</${p}v></${p}c>`;
  if ("date" in cell) return `<${p}c r="${ref}" s="${DATE_STYLE}"><${p}v>${cell.date}</${p}v></${p}c>`;
  if ("formula" in cell) {
    const str = typeof cell.value === "string";
    return `<${p}c r="${ref}"${str ? ' t="str"' : ""}><${p}f>${esc(cell.formula)}</${p}f><${p}v>${esc(String(cell.value))}</${p}v></${p}c>`;
  }
  if ("error" in cell) return `<${p}c r="${ref}" t="e"><${p}v>${esc(cell.error)}</${p}v></${p}c>`;
  if ("rich" in cell) {
    if (sst) return `<${p}c r="${ref}" t="s"><${p}v>${sst.add(richSi(cell.rich))}</${p}v></${p}c>`;
    return `<${p}c r="${ref}" t="inlineStr"><${p}is>${richSi(cell.rich)}</${p}is></${p}c>`;
  }
  const style = customFormats.get(cell.numFmt);
  return `<${p}c r="${ref}"${style === undefined ? "" : ` s="${style}"`}><${p}v>${esc(cell.text)}</${p}v></${p}c>`;
}

function* sheetXml(
  sheet: SheetSpec,
  p: string,
  sst: SharedStrings | undefined,
  formats: Map<string, number>,
): Generator<string> {
  const xmlns = p === "" ? `xmlns="${NS}"` : `xmlns:${p.slice(0, -1)}="${NS}"`;
  let buf = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<${p}worksheet ${xmlns} xmlns:r="${REL_NS}"><${p}sheetData>`;
  let n = 0;
  for (const row of sheet.rows()) {
    n++;
    const cells = row.map((c, i) => cellXml(c, `${colName(i)}${n}`, p, sst, formats)).join("");
    if (cells === "") continue;
    buf += `<${p}row r="${n}">${cells}</${p}row>`;
    if (buf.length >= PIECE) {
      yield buf;
      buf = "";
    }
  }
  buf += `</${p}sheetData>`;
  if (sheet.merged && sheet.merged.length > 0) {
    buf += `<${p}mergeCells count="${sheet.merged.length}">${sheet.merged.map((m) => `<${p}mergeCell ref="${m}"/>`).join("")}</${p}mergeCells>`;
  }
  yield `${buf}</${p}worksheet>`;
}

function customFormatsOf(spec: WorkbookSpec): Map<string, number> {
  const formats = new Map<string, number>();
  for (const sheet of spec.sheets) {
    for (const row of sheet.rows()) {
      for (const c of row) {
        if (c !== null && typeof c === "object" && "numFmt" in c && !formats.has(c.numFmt)) {
          formats.set(c.numFmt, 2 + formats.size);
        }
      }
    }
  }
  return formats;
}

function stylesXml(formats: Map<string, number>): string {
  const custom = [...formats.keys()];
  const numFmts =
    custom.length === 0
      ? ""
      : `<numFmts count="${custom.length}">${custom.map((code, i) => `<numFmt numFmtId="${164 + i}" formatCode="${esc(code)}"/>`).join("")}</numFmts>`;
  const xfs = [
    '<xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/>',
    '<xf numFmtId="14" fontId="0" fillId="0" borderId="0" xfId="0" applyNumberFormat="1"/>',
  ]
    .concat(
      custom.map(
        (_, i) =>
          `<xf numFmtId="${164 + i}" fontId="0" fillId="0" borderId="0" xfId="0" applyNumberFormat="1"/>`,
      ),
    )
    .join("");
  // cellStyleXfs first, with a date format that must not be mistaken for cell formats.
  return `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<styleSheet xmlns="${NS}">${numFmts}<fonts count="1"><font><sz val="11"/><name val="Calibri"/></font></fonts><fills count="1"><fill><patternFill patternType="none"/></fill></fills><borders count="1"><border/></borders><cellStyleXfs count="2"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/><xf numFmtId="14" fontId="0" fillId="0" borderId="0"/></cellStyleXfs><cellXfs count="${2 + custom.length}">${xfs}</cellXfs></styleSheet>`;
}

/** The workbook as a zip stream (yazl), its sheets generated as they are compressed. */
export function xlsxStream(spec: WorkbookSpec): Readable {
  const p = spec.prefix ?? "";
  const zip = new yazl.ZipFile();
  const formats = customFormatsOf(spec);
  const sst = spec.strings === "inline" ? undefined : new SharedStrings();
  const sheetsXml: string[][] | undefined = sst
    ? spec.sheets.map((s) => [...sheetXml(s, p, sst, formats)])
    : undefined;
  const add = (name: string, text: string) => zip.addBuffer(Buffer.from(text, "utf8"), name);
  add(
    "[Content_Types].xml",
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/></Types>`,
  );
  add(
    "_rels/.rels",
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns="${PKG_REL_NS}"><Relationship Id="rId1" Type="${REL_NS}/officeDocument" Target="xl/workbook.xml"/></Relationships>`,
  );
  const sheetEls = spec.sheets
    .map((s, i) => `<${p}sheet name="${esc(s.name)}" sheetId="${i + 1}" r:id="rId${i + 10}"/>`)
    .join("");
  const xmlns = p === "" ? `xmlns="${NS}"` : `xmlns:${p.slice(0, -1)}="${NS}"`;
  add(
    "xl/workbook.xml",
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<${p}workbook ${xmlns} xmlns:r="${REL_NS}">${spec.date1904 ? `<${p}workbookPr date1904="1"/>` : ""}<${p}sheets>${sheetEls}</${p}sheets></${p}workbook>`,
  );
  const rels = spec.sheets
    .map(
      (_, i) =>
        `<Relationship Id="rId${i + 10}" Type="${REL_NS}/worksheet" Target="worksheets/sheet${i + 1}.xml"/>`,
    )
    .join("");
  add(
    "xl/_rels/workbook.xml.rels",
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns="${PKG_REL_NS}">${rels}<Relationship Id="rId2" Type="${REL_NS}/styles" Target="styles.xml"/><Relationship Id="rId3" Type="${REL_NS}/sharedStrings" Target="/xl/sharedStrings.xml"/></Relationships>`,
  );
  add("xl/styles.xml", stylesXml(formats));
  spec.sheets.forEach((sheet, i) => {
    const pieces = sheetsXml?.[i] ?? sheetXml(sheet, p, undefined, formats);
    zip.addReadStream(
      Readable.from(
        (function* () {
          for (const piece of pieces) yield Buffer.from(piece, "utf8");
        })(),
      ),
      `xl/worksheets/sheet${i + 1}.xml`,
    );
  });
  const items = sst?.items ?? [];
  add(
    "xl/sharedStrings.xml",
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<sst xmlns="${NS}" count="${items.length}" uniqueCount="${items.length}">${items.map((x) => `<si>${x}</si>`).join("")}</sst>`,
  );
  zip.end();
  return zip.outputStream as unknown as Readable;
}

/** The whole workbook in memory (tests, small simulator files). */
export async function xlsxBuffer(spec: WorkbookSpec): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of xlsxStream(spec)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A legacy `.xls` (BIFF8) of the same cells, written by SheetJS (`@e965/xlsx`). */
export async function xlsBuffer(spec: WorkbookSpec): Promise<Buffer> {
  const XLSX = await import("@e965/xlsx");
  const wb = XLSX.utils.book_new();
  for (const sheet of spec.sheets) {
    const aoa: unknown[][] = [];
    for (const row of sheet.rows()) {
      aoa.push(
        row.map((c) => {
          if (c === null || c === undefined) return null;
          if (typeof c !== "object") return c;
          if ("date" in c) return { t: "n", v: c.date, z: "yyyy-mm-dd" };
          if ("formula" in c) return { t: typeof c.value === "string" ? "s" : "n", v: c.value, f: c.formula };
          if ("error" in c) return { t: "e", v: 0x2a };
          if ("rich" in c) return c.rich.join("");
          return { t: "n", v: Number(c.text), z: c.numFmt };
        }),
      );
    }
    const ws = XLSX.utils.aoa_to_sheet(aoa as unknown[][]);
    if (sheet.merged) ws["!merges"] = sheet.merged.map((m) => XLSX.utils.decode_range(m));
    XLSX.utils.book_append_sheet(wb, ws, sheet.name);
  }
  return XLSX.write(wb, { type: "buffer", bookType: "biff8" }) as Buffer;
}
