import fc from "fast-check";
import SSF from "ssf";
import t from "tap";
import yazl from "yazl";
import { type WorkbookCell, type WorkbookSpec, xlsBuffer, xlsxBuffer } from "../simulator/workbooks.js";
import { formatSchema } from "./format-schema.js";
import { type FeedReadStats, readFeed } from "./read-feed.js";
import type { FeedBatch } from "./types.js";
import { formatGeneral, isDateFormat, normalizeHeader, serialToIso } from "./workbook.js";

/** Workbooks (docs/feeds.md, Workbooks) read from in-memory bodies; the connectors' HTTP paths are in workbooks.e2e.test.ts. */

async function* chunks(buf: Buffer, size = 4096): AsyncGenerator<Buffer> {
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}

async function read(body: Buffer, format: unknown, columns: string[] = [], maxBytes = 1e9) {
  const batches: FeedBatch[] = [];
  let error: (Error & { code?: string }) | undefined;
  const stats: FeedReadStats = {
    rawBytes: 0,
    decompressedBytes: 0,
    encoding: undefined,
    compression: "none",
    zipEntry: undefined,
  };
  try {
    for await (const b of readFeed(
      chunks(body),
      { format: formatSchema.parse(format), maxBytes, columns },
      stats,
    )) {
      batches.push(b);
    }
  } catch (err) {
    error = err as Error;
  }
  return {
    records: batches.flatMap((b) => b.records) as Record<string, string>[],
    rejects: batches.flatMap((b) => b.rejects),
    batches,
    error,
    stats,
  };
}

/** A price list as suppliers publish it: a title block, merged title, odd header whitespace, then the table. */
function priceList(): WorkbookSpec {
  const rows: WorkbookCell[][] = [
    ["Прайс-лист ООО «Поставщик»", null, null, null, null],
    ["Действует с 01.03.2024"],
    [],
    ["Артикул", "Наименование", "Базовая цена,   с НДС", "Остаток", "Дата"],
    ["00123", "Автомат 1P 16A", 1234.5, 10, { date: 45352 }],
    ["A-2", { rich: ["Кабель ", "ВВГ"] }, { formula: "C5*2", value: 2469 }, 0, { date: 45352.5 }],
    [],
    ["A-3", "Реле", 0.1 + 0.2, true, null],
    ["A-4", "Ошибка", { error: "#N/A" }, 1, null],
    ["A-5", "Неверная цена", "по запросу", 2, null],
  ];
  return {
    sheets: [
      { name: "Обложка", rows: () => [["cover"]] },
      { name: "Прайс", rows: () => rows, merged: ["A1:E1"] },
    ],
  };
}

const COLUMNS = ["Артикул", "Базовая цена, с НДС", "Остаток"];

t.test(
  "xlsx: sheet by name, header found below a title block, cell values as Excel shows them",
  async (t) => {
    const body = await xlsxBuffer(priceList());
    const r = await read(body, { type: "xlsx", sheet: "Прайс" }, COLUMNS);
    t.equal(r.error, undefined);
    t.equal(r.stats.headerRow, 4);
    t.equal(r.stats.sheet, "Прайс");
    t.same(r.stats.header, ["Артикул", "Наименование", "Базовая цена, с НДС", "Остаток", "Дата"]);
    t.same(
      r.records.map((x) => ({ ...x })),
      [
        {
          Артикул: "00123",
          Наименование: "Автомат 1P 16A",
          "Базовая цена, с НДС": "1234.5",
          Остаток: "10",
          Дата: "2024-03-01",
        },
        {
          Артикул: "A-2",
          Наименование: "Кабель ВВГ",
          "Базовая цена, с НДС": "2469",
          Остаток: "0",
          Дата: "2024-03-01T12:00:00",
        },
        { Артикул: "A-3", Наименование: "Реле", "Базовая цена, с НДС": "0.3", Остаток: "true" },
        { Артикул: "A-5", Наименование: "Неверная цена", "Базовая цена, с НДС": "по запросу", Остаток: "2" },
      ],
    );
    t.equal(r.rejects.length, 1, "the error cell in a mapped column rejects its record");
    t.match(r.rejects[0]?.reason, /cell C9 of sheet "Прайс" holds the error #N\/A/);
  },
);

t.test(
  "xlsx: sheet by index, given header row, header false, inline strings and prefixed tags",
  async (t) => {
    const spec = { ...priceList(), strings: "inline" as const, prefix: "x:" };
    const byIndex = await read(await xlsxBuffer(spec), { type: "xlsx", sheet: 2, headerRow: 4 }, COLUMNS);
    t.equal(byIndex.error, undefined);
    t.equal(byIndex.records.length, 4);
    t.equal(byIndex.records[0]?.["Артикул"], "00123");
    const letters = await read(await xlsxBuffer(spec), { type: "xlsx", sheet: 2, header: false });
    t.equal(letters.error, undefined);
    t.same({ ...letters.records[0] }, { A: "Прайс-лист ООО «Поставщик»" });
    t.same(
      { ...letters.records[3] },
      { A: "00123", B: "Автомат 1P 16A", C: "1234.5", D: "10", E: "2024-03-01" },
    );
  },
);

t.test("xlsx: pageSize cuts steps; a 1904 workbook's dates", async (t) => {
  const rows: WorkbookCell[][] = [["sku", "price", "day"]];
  for (let i = 0; i < 25; i++) rows.push([`S${i}`, i + 0.25, { date: 0 }]);
  const r = await read(
    await xlsxBuffer({ sheets: [{ name: "s", rows: () => rows }], date1904: true }),
    { type: "xlsx", pageSize: 10 },
    ["sku", "price"],
  );
  t.equal(r.error, undefined);
  t.same(
    r.batches.map((b) => b.records.length),
    [10, 10, 5],
  );
  t.equal(r.records[0]?.day, "1904-01-01");
});

t.test("xlsx: bad workbooks fail CONTRACT naming what was wrong", async (t) => {
  const good = await xlsxBuffer(priceList());
  const noSheet = await read(good, { type: "xlsx", sheet: "Цены" }, COLUMNS);
  t.equal(noSheet.error?.code, "CONTRACT");
  t.match(noSheet.error?.message, /sheet "Цены" not found: the workbook has "Обложка", "Прайс"/);
  const noIndex = await read(good, { type: "xlsx", sheet: 3 }, COLUMNS);
  t.match(noIndex.error?.message, /sheet 3 not found: the workbook has 2 sheets/);
  const noHeader = await read(good, { type: "xlsx", sheet: 2 }, ["Артикул", "Цена, руб."]);
  t.equal(noHeader.error?.code, "CONTRACT");
  t.match(
    noHeader.error?.message,
    /header row not found in sheet "Прайс": no row among rows 1-\d+ holds every mapped column; the closest, row 4, lacks "Цена, руб."/,
  );
  const wrongRow = await read(good, { type: "xlsx", sheet: 2, headerRow: 2 }, COLUMNS);
  t.match(
    wrongRow.error?.message,
    /header row 2 of sheet "Прайс" lacks the mapped columns "Артикул", "Базовая цена, с НДС", "Остаток"/,
  );
  t.equal(wrongRow.records.length, 0);

  const notAWorkbook = await read(Buffer.from("sku;price\n1;2\n"), { type: "xlsx" }, COLUMNS);
  t.equal(notAWorkbook.error?.code, "CONTRACT");
  t.match(notAWorkbook.error?.message, /not an xlsx workbook/);

  const zip = new yazl.ZipFile();
  zip.addBuffer(Buffer.from("hello"), "readme.txt");
  zip.end();
  const plainZip: Buffer[] = [];
  for await (const c of zip.outputStream) plainZip.push(c as Buffer);
  const zipNotWorkbook = await read(Buffer.concat(plainZip), { type: "xlsx" }, COLUMNS);
  t.match(zipNotWorkbook.error?.message, /not an xlsx workbook \(it has no xl\/workbook.xml\)/);

  const cut = await read(good.subarray(0, Math.floor(good.length / 2)), { type: "xlsx" }, COLUMNS);
  t.equal(cut.error?.code, "CONTRACT", "a truncated workbook");

  const XLSX = await import("@e965/xlsx");
  const cfb = XLSX.CFB.utils.cfb_new();
  XLSX.CFB.utils.cfb_add(cfb, "/EncryptionInfo", Buffer.alloc(64, 1));
  XLSX.CFB.utils.cfb_add(cfb, "/EncryptedPackage", Buffer.alloc(512, 2));
  const encrypted = Buffer.from(XLSX.CFB.write(cfb, { type: "buffer" }) as Uint8Array);
  const enc = await read(encrypted, { type: "xlsx" }, COLUMNS);
  t.equal(enc.error?.code, "CONTRACT");
  t.match(enc.error?.message, /workbook is encrypted/);
  const encXls = await read(encrypted, { type: "xls" }, COLUMNS);
  t.equal(encXls.error?.code, "CONTRACT");

  const xls = await xlsBuffer(priceList());
  const legacy = await read(xls, { type: "xlsx" }, COLUMNS);
  t.match(legacy.error?.message, /legacy binary workbook \(\.xls\).*format\.type to "xls"/);
});

t.test("xlsx: a sheet that inflates beyond 100:1 or maxResponseBytes is refused", async (t) => {
  // A hand-made workbook whose sheet is 40 MiB of spaces (about 1000:1).
  const zip = new yazl.ZipFile();
  const part = (name: string, text: string) => zip.addBuffer(Buffer.from(text), name);
  part(
    "_rels/.rels",
    `<Relationships xmlns="x"><Relationship Id="r1" Type="x/officeDocument" Target="xl/workbook.xml"/></Relationships>`,
  );
  part("xl/workbook.xml", `<workbook><sheets><sheet name="s" r:id="r1"/></sheets></workbook>`);
  part(
    "xl/_rels/workbook.xml.rels",
    `<Relationships><Relationship Id="r1" Type="x/worksheet" Target="s.xml"/></Relationships>`,
  );
  const spaces = Buffer.alloc(40 * 1024 * 1024, 0x20);
  zip.addBuffer(
    Buffer.concat([Buffer.from("<worksheet><sheetData>"), spaces, Buffer.from("</sheetData></worksheet>")]),
    "xl/s.xml",
  );
  zip.end();
  const parts: Buffer[] = [];
  for await (const c of zip.outputStream) parts.push(c as Buffer);
  const bomb = Buffer.concat(parts);
  const r = await read(bomb, { type: "xlsx" }, ["sku"]);
  t.equal(r.error?.code, "CONTRACT");
  t.match(r.error?.message, /100:1.*decompression bomb/);
  const small = await read(await xlsxBuffer(priceList()), { type: "xlsx", sheet: 2 }, COLUMNS, 600);
  t.equal(small.error?.code, "CONTRACT");
  t.match(small.error?.message, /maxResponseBytes \(600 bytes\)/);
});

t.test("zipped workbooks: zipEntry opens the workbook inside the archive", async (t) => {
  const zip = new yazl.ZipFile();
  zip.addBuffer(await xlsxBuffer(priceList()), "prices/IEK_price_2024.xlsx");
  zip.addBuffer(Buffer.from("readme"), "readme.txt");
  zip.end();
  const parts: Buffer[] = [];
  for await (const c of zip.outputStream) parts.push(c as Buffer);
  const body = Buffer.concat(parts);
  const r = await read(body, { type: "xlsx", zipEntry: "*.xlsx", sheet: "Прайс" }, COLUMNS);
  t.equal(r.error, undefined);
  t.equal(r.records.length, 4);
  t.equal(r.stats.zipEntry, "prices/IEK_price_2024.xlsx");
  const wrong = await read(body, { type: "xlsx", zipEntry: "*.xls" }, COLUMNS);
  t.match(wrong.error?.message, /no entry of the zip archive matches format.zipEntry "\*\.xls"/);
});

t.test("xls: the same price list read by SheetJS, with the same values", async (t) => {
  const body = await xlsBuffer(priceList());
  const r = await read(body, { type: "xls", sheet: "Прайс" }, COLUMNS);
  t.equal(r.error, undefined);
  t.equal(r.stats.headerRow, 4);
  t.same(
    r.records.map((x) => [x["Артикул"], x["Базовая цена, с НДС"], x["Дата"]]),
    [
      ["00123", "1234.5", "2024-03-01"],
      ["A-2", "2469", "2024-03-01T12:00:00"],
      ["A-3", "0.3", undefined],
      ["A-5", "по запросу", undefined],
    ],
  );
  t.equal(r.rejects.length, 1);
  const missing = await read(body, { type: "xls", sheet: "Цены" }, COLUMNS);
  t.match(missing.error?.message, /sheet "Цены" not found/);
  const big = await read(body, { type: "xls" }, COLUMNS, 1000);
  t.match(big.error?.message, /larger than maxResponseBytes \(1000 bytes\)/);
  const text = await read(Buffer.from("<html>not a workbook</html>"), { type: "xls" }, COLUMNS);
  t.match(text.error?.message, /not an xls workbook/);
  const corrupt = Buffer.from(body);
  corrupt.fill(0xff, 512, corrupt.length);
  const bad = await read(corrupt, { type: "xls" }, COLUMNS);
  t.equal(bad.error?.code, "CONTRACT");
});

t.test("General format: 15 significant digits, no float artefacts", async (t) => {
  t.equal(formatGeneral(1234.5), "1234.5");
  t.equal(formatGeneral(1234.4999999999998), "1234.5");
  t.equal(formatGeneral(0.1 + 0.2), "0.3");
  t.equal(formatGeneral(100), "100");
  t.equal(formatGeneral(-0.000123), "-0.000123");
  t.equal(formatGeneral(123456789012345), "123456789012345");
  t.equal(formatGeneral(1e15), "1E+15");
  t.equal(formatGeneral(1.5e20), "1.5E+20");
  t.equal(formatGeneral(1e-10), "1E-10");
  t.equal(formatGeneral(1.23456789012e-9), "0.00000000123456789012");
});

/** Half a unit of the last digit a number's text shows (`0.000000005`: 5E-10; `-4.99E-09`: 5E-12). */
function halfLastDigit(text: string): number {
  const [mantissa = "", exponent = "0"] = text.toUpperCase().split("E");
  const decimals = mantissa.split(".")[1]?.length ?? 0;
  return 0.5 * 10 ** (Number(exponent) - decimals);
}

t.test("General format against SSF's General (an independent formatter) over random doubles", async (t) => {
  const general = (v: number) => SSF.format("General", v) as string;
  // Decimals of at most 10 significant digits, 1E-4 to 1E10.
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 9_999_999_999 }),
      fc.integer({ min: -14, max: 0 }),
      fc.boolean(),
      (m, e, neg) => {
        const v = Number(`${neg ? "-" : ""}${m}e${e}`);
        if (Math.abs(v) < 1e-4 || Math.abs(v) >= 1e10 || String(Math.abs(m)).replace(/0+$/, "").length > 10)
          return true;
        const s = general(v);
        // Where a standard column's 11 characters show the value whole, the same text.
        if (Number(s) !== v) return true;
        return formatGeneral(v) === s;
      },
    ),
    { numRuns: 5000 },
  );
  // Any double: never a float artefact (at most 15 significant digits), and the same number
  // as SSF's to the digits SSF keeps.
  fc.assert(
    fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (v) => {
      // Excel's own range ends at 9.99999999999999E+307.
      if (Math.abs(v) > 9.99999999999999e307) return true;
      const mine = formatGeneral(v);
      const digits = mine.replace(/E.*$/, "").replace(/[-.]/g, "").replace(/^0+/, "");
      if (digits.length > 15) return false;
      const ours = Number(mine);
      if (ours !== Number(v.toPrecision(15))) return false;
      const text = general(v);
      const theirs = Number(text);
      if (v === 0 || theirs === 0) return Math.abs(ours) < 1e-300 || Math.abs(v) < 1e-9;
      // SSF fits General into 11 characters, so near 1E-9 it keeps a single digit
      // (-4.9995E-9 is "-0.000000005"): its rounding moves the value by up to half a unit
      // of the last digit it shows.
      return Math.abs(ours - theirs) <= Math.max(Math.abs(v) * 1e-5, halfLastDigit(text) * (1 + 1e-9));
    }),
    { numRuns: 20000 },
  );
  t.equal(halfLastDigit("-0.000000005"), 5e-10);
  t.equal(formatGeneral(-4.9995e-9), "-0.0000000049995", "SSF shows it as -0.000000005: one digit");
  t.pass("25,000 random values agree");
});

t.test("dates, date formats and header normalisation", async (t) => {
  t.equal(serialToIso(45352), "2024-03-01");
  t.equal(serialToIso(45352.75), "2024-03-01T18:00:00");
  t.equal(serialToIso(1), "1900-01-01");
  t.equal(serialToIso(61), "1900-03-01");
  t.equal(serialToIso(0, true), "1904-01-01");
  t.ok(isDateFormat(14, undefined));
  t.notOk(isDateFormat(4, undefined));
  t.ok(isDateFormat(164, "dd.mm.yyyy"));
  t.ok(isDateFormat(164, "[$-F800]dddd, mmmm dd, yyyy"));
  t.notOk(isDateFormat(164, '#,##0.00 "руб."'));
  t.notOk(isDateFormat(164, "[Red]#,##0.00"));
  t.notOk(isDateFormat(164, "General"));
  t.equal(normalizeHeader("  Базовая цена,\u00a0  с\nНДС "), "Базовая цена, с НДС");
});

t.test("CSV records are flat too: header texts whitespace-normalised", async (t) => {
  // How a connector's fields name these columns: field-spec.test.ts (flat records).
  const r = await read(Buffer.from("Артикул;Цена,  руб.\u00a0с НДС\n00123;12.5\n"), {
    type: "csv",
    delimiter: ";",
  });
  t.equal(r.error, undefined);
  t.same({ ...r.records[0] }, { Артикул: "00123", "Цена, руб. с НДС": "12.5" });
});
