import type { ServerResponse } from "node:http";
import { sendJson } from "./respond.js";
import type { SupplierState } from "./supplier.js";
import type { SimulatorRecord } from "./types.js";

/**
 * The `etm` profile: ETM iPRO's price and remains answers in the shapes public clients
 * read (../shared/SUPPLIER-APIS.md, ETM), deterministic from the catalog.
 *
 * - `GET /api/v1/goods/{c1,…,c50}/price?type=etm` → `{status, data: {rows: [{gdscode, price,
 *   pricewnds, price_tarif, price_retail}]}}`; more than 50 codes 400; no known code 404.
 * - `GET /api/v1/goods/{code}/remains?type=etm` → `{status, data: {gdscode, UnitName,
 *   InfoStores: [{StoreCode, StoreName, StoreType, StoreQuantRem}]}}` (see {@link etmRemains}).
 * - `type` says what the ids are: `etm` (or absent) ETM's own codes, the catalog's SKUs;
 *   `mnf` / `cli` (manufacturer's or buyer's codes) find none of them, as ETM would not.
 * - `renameField` of the supplier's options renames the quantity key of every store row
 *   (`{from: "StoreQuantRem", to: "StockRem"}`): the remains answer a connector misreads.
 */

/** One row of `InfoStores`. */
export interface EtmStoreRow {
  StoreCode: string;
  StoreName: string;
  StoreType: string;
  StoreQuantRem: string | number;
}

/** Offer index from a SKU such as `ETM-0000042`. */
export function indexOfSku(sku: string): number {
  return Number(sku.slice(sku.lastIndexOf("-") + 1));
}

/** Three stores' parts of `total`, summing to it exactly. */
function split(total: number): [number, number, number] {
  const a = Math.floor(total / 2);
  const b = Math.floor(total / 3);
  return [a, b, total - a - b];
}

/**
 * The store rows of one offer; their stock is always the catalog's `stock.total`, read
 * the way ETM's clients read it — the `all` row when there is one, else the others
 * summed. By offer index mod 4:
 * - 0: an `all` row last, holding the total; the three listed stores hold less (a quarter
 *   of the stock is in stores not listed), so summing the listed rows would be wrong, and
 *   summing every row too;
 * - 1: no `all` row, the three stores sum to the total;
 * - 2: the `all` row first, its quantity a JSON number, the others strings;
 * - 3: no `all` row, every quantity a JSON number.
 * Quantities are strings (`"12"`) unless said otherwise.
 */
export function etmRemains(record: SimulatorRecord): EtmStoreRow[] {
  const index = indexOfSku(record.article);
  const total = record.stock.total;
  const variant = index % 4;
  const withTotal = variant === 0 || variant === 2;
  const listed = withTotal ? total - Math.floor(total / 4) : total;
  const quantity = (n: number) => (variant === 3 ? n : String(n));
  const rows: EtmStoreRow[] = split(listed).map((n, i) => ({
    StoreCode: `S${i + 1}`,
    StoreName: `Склад ${i + 1}`,
    StoreType: ["rc", "op", "reg"][i] as string,
    StoreQuantRem: quantity(n),
  }));
  const all: EtmStoreRow = {
    StoreCode: "0",
    StoreName: "Все склады",
    StoreType: "all",
    StoreQuantRem: variant === 2 ? total : String(total),
  };
  if (variant === 0) return [...rows, all];
  if (variant === 2) return [all, ...rows];
  return rows;
}

/** The live record of `sku`, or undefined for a code the catalog does not (or no longer) have. */
export function lookup(state: SupplierState, sku: string): SimulatorRecord | undefined {
  const position = state.catalog.positionOf(sku);
  return position < 0 ? undefined : state.catalog.recordOf(state.catalog.indexAt(position));
}

export function codes(text: string | null): string[] {
  return (text ?? "")
    .split(",")
    .map((c) => c.trim())
    .filter((c) => c !== "");
}

const ETM_PRICE = /^\/api\/v1\/goods\/([^/]+)\/price$/;
const ETM_REMAINS = /^\/api\/v1\/goods\/([^/]+)\/remains$/;
const OK = { code: 200, message: "OK" };
const NOT_FOUND = { status: { code: 404, message: "goods not found" } };

/** Answers an ETM price or remains route; false when `route` is neither. */
export function serveEtm(state: SupplierState, route: string, url: URL, res: ServerResponse): boolean {
  const stats = state.stats;
  const type = url.searchParams.get("type") ?? "etm";
  const find = (code: string) => (type === "etm" ? lookup(state, code) : undefined);
  const price = ETM_PRICE.exec(route);
  if (price) {
    const list = codes(decodeURIComponent(price[1] as string));
    if (list.length > 50) {
      sendJson(res, stats, 400, { status: { code: 400, message: "at most 50 codes" } });
      return true;
    }
    const rows = list.flatMap((c) => {
      const r = find(c);
      if (!r) return [];
      const net = r.price.value;
      return [
        {
          gdscode: r.article,
          price: net,
          pricewnds: (Number(net) * 1.2).toFixed(2),
          price_tarif: net,
          price_retail: (Number(net) * 1.5).toFixed(2),
        },
      ];
    });
    if (rows.length === 0) sendJson(res, stats, 404, NOT_FOUND);
    else sendJson(res, stats, 200, { status: OK, data: { rows } });
    return true;
  }
  const remains = ETM_REMAINS.exec(route);
  if (!remains) return false;
  const r = find(decodeURIComponent(remains[1] as string));
  if (!r) {
    sendJson(res, stats, 404, NOT_FOUND);
    return true;
  }
  const rename = state.renameField;
  const InfoStores = etmRemains(r).map((row) => {
    if (rename?.from !== "StoreQuantRem") return row;
    const { StoreQuantRem, ...rest } = row;
    return { ...rest, [rename.to]: StoreQuantRem };
  });
  sendJson(res, stats, 200, { status: OK, data: { gdscode: r.article, UnitName: "шт.", InfoStores } });
  return true;
}

const MANUFACTURERS = ["IEK", "Schneider Electric", "ABB", "EKF", "DKC"];

/**
 * One product of ETM's catalog export file (`goods_report.json`): what the product list
 * carries, and no price (importers price the codes afterwards, 50 a request).
 */
export function etmProduct(record: SimulatorRecord) {
  const index = indexOfSku(record.article);
  const mnf = index % MANUFACTURERS.length;
  return {
    gdscode: record.article,
    name: record.title,
    art: `A${String(index * 7 + 3).padStart(6, "0")}`,
    mnf_name: MANUFACTURERS[mnf] as string,
    mnf_code: String(100 + mnf),
    edizm: "шт.",
    min_cnt: String(1 + (index % 3)),
    gdsChars: [
      { gdsCharName: "Номинальный ток, А", gdsCharVal: String(10 + (index % 6) * 6), ConfigCharCode: "I" },
      { gdsCharName: "Степень защиты", gdsCharVal: `IP${20 + (index % 5) * 10}`, ConfigCharCode: "IP" },
    ],
    gdsClassTree: [{ name: "Электротехника" }, { name: `Класс ${index % 9}` }],
    gdsPacks: [{ qty: "1" }],
    gdsImages: [],
  };
}
