import type { IncomingMessage, ServerResponse } from "node:http";
import { pipeline, Readable } from "node:stream";
import yazl from "yazl";
import { contentTag, notModified, validators } from "./feeds.js";
import { sendJson } from "./respond.js";
import type { SupplierState } from "./supplier.js";
import type { SimulatorRecord } from "./types.js";
import { type WorkbookCell, xlsBuffer, xlsxStream } from "./workbooks.js";

/**
 * Price lists published as workbooks (SUPPLIER-APIS.md, More suppliers), generated
 * from the supplier's live catalog with a title block above the header, header
 * texts with odd whitespace, prices with VAT, and a 200 carrying an `ETag` and
 * `Last-Modified` (conditional requests answer 304) like the other feeds:
 *
 * - `ekf`: `GET /storage/prices/ekf_pricelist_YYYY-MM-DD.xlsx`, a 404 for a date in
 *   the supplier's `workbook.missingDates` (EKF does not publish every day);
 * - `keaz`: `GET /ftp/keaz.xls`, a legacy BIFF8 workbook;
 * - `iek-pricelist`: `POST /products/price/`, a zip holding `IEK_price.xlsx`.
 *
 * Column headers are not published by any of them: the ones here are assumptions
 * (docs/cookbook.md).
 */

export const EKF_COLUMNS = ["Артикул", "Наименование", "Базовая цена,   с НДС", "Остаток, шт"] as const;
export const KEAZ_COLUMNS = ["Код", "Наименование товара", "Цена с НДС, руб.", "Наличие"] as const;
export const IEK_PRICELIST_COLUMNS = ["Артикул", "Наименование", "Цена, руб. с НДС", "Ед. изм."] as const;

const EKF_ROUTE = /^\/storage\/prices\/ekf_pricelist_(\d{4}-\d{2}-\d{2})\.xlsx$/;

function rowsOf(
  state: SupplierState,
  title: string[],
  header: readonly string[],
  row: (r: SimulatorRecord) => WorkbookCell[],
): () => Iterable<WorkbookCell[]> {
  return function* () {
    for (const t of title) yield [t];
    yield [];
    yield [...header];
    const live = state.catalog.liveCount;
    for (let from = 0; from < live; from += 1000) {
      for (const r of state.catalog.slice(from, from + 1000)) yield row(r);
    }
  };
}

/** The price as a number cell (what Excel holds); the catalog's decimal string is exact to 15 digits. */
const num = (r: SimulatorRecord) => Number(r.price.value);

/** The workbook route of a workbook profile; false when `route` is not one (the caller answers 404). */
export async function serveWorkbookProfile(
  state: SupplierState,
  req: IncomingMessage,
  res: ServerResponse,
  route: string,
  now: () => number,
  missingDates: readonly string[],
): Promise<boolean> {
  const profile = state.profile;
  let file: () => Readable | Promise<Buffer>;
  let type: string;
  let key = route;
  if (profile === "ekf") {
    const m = EKF_ROUTE.exec(route);
    if (!m || req.method !== "GET") return false;
    const date = m[1] as string;
    if (missingDates.includes(date)) {
      sendJson(res, state.stats, 404, { error: `no price list for ${date}` });
      return true;
    }
    type = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";
    file = () =>
      xlsxStream({
        sheets: [
          {
            name: "Прайс-лист",
            rows: rowsOf(
              state,
              [`Прайс-лист EKF на ${date}`, "Цены указаны в рублях с НДС"],
              EKF_COLUMNS,
              (r) => [r.article, `${r.title} (товар)`, num(r), r.stock.total],
            ),
            merged: ["A1:D1"],
          },
        ],
      });
    key = `${route}`;
  } else if (profile === "keaz") {
    if (route !== "/ftp/keaz.xls" || req.method !== "GET") return false;
    type = "application/vnd.ms-excel";
    file = () =>
      xlsBuffer({
        sheets: [
          {
            name: "КЭАЗ",
            rows: rowsOf(state, ["ПАО «КЭАЗ». Прайс-лист"], KEAZ_COLUMNS, (r) => [
              r.article,
              `${r.title} (товар)`,
              num(r),
              r.stock.total > 0 ? "есть" : "нет",
            ]),
          },
        ],
      });
  } else if (profile === "iek-pricelist") {
    if (route !== "/products/price/" || req.method !== "POST") return false;
    type = "application/zip";
    file = () => {
      const zip = new yazl.ZipFile();
      zip.addReadStream(
        xlsxStream({
          sheets: [
            {
              name: "Прайс-лист",
              rows: rowsOf(
                state,
                ["Прайс-лист IEK", "Рекомендованные розничные цены"],
                IEK_PRICELIST_COLUMNS,
                (r) => [r.article, `${r.title} (товар)`, num(r), "шт"],
              ),
            },
          ],
        }),
        "IEK_price.xlsx",
      );
      zip.end();
      return zip.outputStream as unknown as Readable;
    };
  } else {
    return false;
  }
  // Drain a POST's form before answering.
  if (req.method === "POST") for await (const _ of req);
  const arrivedAt = now();
  const { etag, lastModified } = validators(state, key, contentTag(state, key), arrivedAt);
  const lastModifiedText = new Date(lastModified).toUTCString();
  if (notModified(req, etag, lastModified)) {
    state.stats.recordStatus(304);
    res.writeHead(304, { etag, "last-modified": lastModifiedText });
    res.end();
    return true;
  }
  const made = file();
  const body = made instanceof Readable ? made : Readable.from([await made]);
  state.stats.recordStatus(200);
  state.stats.startWalk(arrivedAt);
  res.writeHead(200, { "content-type": type, etag, "last-modified": lastModifiedText });
  await new Promise<void>((resolve) => {
    pipeline(body, res, (err) => {
      if (err) res.destroy();
      else state.stats.completeWalk(now());
      resolve();
    });
  });
  return true;
}
