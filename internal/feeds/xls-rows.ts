import { errorMessage } from "../platform/errors.js";
import {
  formatGeneral,
  isDateFormat,
  pickSheet,
  type SheetRow,
  serialToIso,
  workbookError,
} from "./workbook.js";

/**
 * A legacy binary workbook (`.xls`, BIFF5/8 in an OLE2 container) read whole
 * with `@e965/xlsx` (SheetJS 0.20.3 republished; the `xlsx` package on npm is
 * stuck at 0.18.5 with unfixed advisories). The bytes are bounded by
 * `maxResponseBytes` before parsing (100 MiB by default for `xls`). Cells as
 * the xlsx reader makes them: text as is, numbers in the General format,
 * dates as ISO 8601, formulas by their cached value, errors reported.
 */

const OLE_MAGIC = Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]);
const ROWS_PER_GROUP = 1_000;

interface XlsCell {
  t: string;
  v?: unknown;
  w?: string;
  z?: string | number;
}

/** Collects `bytes` into one buffer, at most `maxBytes`. */
export async function readWhole(bytes: AsyncIterable<Buffer>, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of bytes) {
    total += chunk.length;
    if (total > maxBytes) {
      throw workbookError(`xls workbook is larger than maxResponseBytes (${maxBytes} bytes)`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total);
}

function cellText(cell: XlsCell, date1904: boolean): { value?: string; error?: string } {
  switch (cell.t) {
    case "s":
      return { value: String(cell.v ?? "") };
    case "b":
      return { value: cell.v ? "true" : "false" };
    case "e":
      return { error: cell.w ?? `#ERR${String(cell.v)}` };
    case "d":
      return {
        value:
          cell.v instanceof Date
            ? cell.v.toISOString().replace(/T00:00:00\.000Z$|\.\d+Z$/, "")
            : String(cell.v),
      };
    case "n": {
      const n = Number(cell.v);
      const fmt = cell.z;
      const isDate =
        typeof fmt === "number" ? isDateFormat(fmt, undefined) : fmt !== undefined && isDateFormat(-1, fmt);
      return { value: isDate ? serialToIso(n, date1904) : formatGeneral(n) };
    }
    default:
      return {};
  }
}

/**
 * Parses `buffer` as an `.xls` workbook and returns the rows of the sheet
 * `wanted` (a name or a 1-based index).
 * @throws IngestionError `CONTRACT`: not an xls, encrypted, corrupt, no such sheet.
 */
export async function xlsSheetRows(
  buffer: Buffer,
  wanted: string | number,
): Promise<{ name: string; rows: AsyncIterable<SheetRow[]> }> {
  if (buffer.length < 8 || !buffer.subarray(0, 8).equals(OLE_MAGIC)) {
    throw workbookError(
      buffer.length >= 2 && buffer[0] === 0x50 && buffer[1] === 0x4b
        ? 'file is an xlsx (a zip archive), not an xls: set format.type to "xlsx" (or format.zipEntry for a zipped workbook)'
        : "file is not an xls workbook (no OLE2 signature)",
    );
  }
  const XLSX = await import("@e965/xlsx");
  let wb: ReturnType<typeof XLSX.read>;
  try {
    wb = XLSX.read(buffer, {
      type: "buffer",
      dense: true,
      cellNF: true,
      cellDates: false,
      cellHTML: false,
      cellFormula: false,
      WTF: false,
    });
  } catch (err) {
    const message = errorMessage(err);
    if (/password|encrypt/i.test(message)) {
      throw workbookError("workbook is encrypted (password-protected): it cannot be read", err);
    }
    throw workbookError(`xls workbook is corrupt: ${message}`, err);
  }
  const names = wb.SheetNames;
  const index = pickSheet(names, wanted);
  const name = names[index]!;
  const sheet = wb.Sheets[name];
  const date1904 = wb.Workbook?.WBProps?.date1904 === true;
  const data = ((sheet as unknown as { "!data"?: (XlsCell[] | undefined)[] } | undefined)?.["!data"] ??
    []) as ((XlsCell | undefined)[] | undefined)[];
  async function* rows(): AsyncGenerator<SheetRow[]> {
    let group: SheetRow[] = [];
    for (let r = 0; r < data.length; r++) {
      const cells = data[r];
      if (cells === undefined) continue;
      const row: SheetRow = { n: r + 1, values: [] };
      for (let c = 0; c < cells.length; c++) {
        const cell = cells[c];
        if (cell === undefined) continue;
        const { value, error } = cellText(cell, date1904);
        if (error !== undefined) {
          row.errors = [...(row.errors ?? []), { col: c, text: error }];
          row.values[c] = error;
        } else if (value !== undefined && value !== "") row.values[c] = value;
      }
      if (row.values.length > 0) group.push(row);
      if (group.length >= ROWS_PER_GROUP) {
        yield group;
        group = [];
      }
      // Each row is read once: let the parsed sheet go as the read goes.
      data[r] = undefined;
    }
    if (group.length > 0) yield group;
  }
  return { name, rows: rows() };
}
