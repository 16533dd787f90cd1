import type { ServerResponse } from "node:http";
import { codes, indexOfSku, lookup } from "./profile-etm.js";
import { storeSplit } from "./profile-iek.js";
import { sendBody, sendJson } from "./respond.js";
import type { SupplierState } from "./supplier.js";
import type { SimulatorRecord } from "./types.js";

/**
 * The `dkc` profile: DKC's api.dkc.ru/v1 in the shapes public clients read
 * (../shared/SUPPLIER-APIS.md, More suppliers; docs/cookbook.md, DKC), deterministic from the
 * catalog. The token (`GET /auth.access.token/{masterKey}` → `{access_token}`) and the
 * `AccessToken` header every other route needs are checked in front of them
 * (`realApiSupplier`, `sessions.ts`).
 *
 * - `GET /catalog/material/stock?code=a,b` → `{create, materials: [{id, status, code,
 *   warehouse: [{code, amount, receipt: [{date, amount}]}]}]}` for the codes it knows
 *   (warehouse codes strings, amounts and dates JSON numbers, dates in Unix seconds); the
 *   warehouses' amounts sum to the catalog's stock; every third material has a dated
 *   receipt at its first warehouse. More than 100 codes 400; none known 404.
 * - `GET /catalog/material?code=X` (one code) → `{material: {id, code, name, price, no_price,
 *   unit, series, country}}`, `price` a JSON number of exactly the catalog's digits; every
 *   eleventh material is priced on request (`no_price: true`, `price: 0`) until its price
 *   first changes. An unknown code answers 404 `{message}`.
 */

/** Every material whose index is a multiple of this has `no_price: true` (until its price changes). */
export const DKC_NO_PRICE_EVERY = 11;
/** Codes a stock request may name (one public client sends 100 at a time). */
export const DKC_STOCK_BATCH = 100;
/** Warehouse codes of the `dkc` profile, as the clients' sample answer has them. */
export const DKC_WAREHOUSES = ["1100", "1200", "1600"] as const;
const RECEIPT_DATE = 1_767_225_600; // 2026-01-01T00:00:00Z
const NOT_FOUND = { message: "Не найден запрашиваемый код материала." };
const json = { "content-type": "application/json" };

export function dkcNoPrice(state: SupplierState, record: SimulatorRecord): boolean {
  const index = indexOfSku(record.article);
  return index % DKC_NO_PRICE_EVERY === 0 && !state.catalog.priceChanged(index);
}

/** The warehouses of one material, their amounts summing to the catalog's stock. */
export function dkcWarehouses(record: SimulatorRecord) {
  const index = indexOfSku(record.article);
  return storeSplit(record.stock.total).map((amount, i) => ({
    code: DKC_WAREHOUSES[i] as string,
    amount,
    receipt: i === 0 && index % 3 === 0 ? [{ date: RECEIPT_DATE + index * 86_400, amount: 100 + index }] : [],
  }));
}

/** Answers a DKC catalog route; false when `route` is not one. */
export function serveDkc(state: SupplierState, route: string, url: URL, res: ServerResponse): boolean {
  const stats = state.stats;
  if (route === "/catalog/material/stock") {
    const list = codes(url.searchParams.get("code"));
    if (list.length > DKC_STOCK_BATCH) {
      sendJson(res, stats, 400, { message: `at most ${DKC_STOCK_BATCH} codes` });
      return true;
    }
    const materials = list.flatMap((c) => {
      const r = lookup(state, c);
      if (!r) return [];
      return [
        { id: 40_000 + indexOfSku(r.article), status: 1, code: r.article, warehouse: dkcWarehouses(r) },
      ];
    });
    if (materials.length === 0) sendJson(res, stats, 404, NOT_FOUND);
    else sendJson(res, stats, 200, { create: Math.floor(Date.now() / 1000), materials });
    return true;
  }
  if (route === "/catalog/material") {
    const r = lookup(state, url.searchParams.get("code") ?? "");
    if (!r) {
      sendJson(res, stats, 404, NOT_FOUND);
      return true;
    }
    const index = indexOfSku(r.article);
    const noPrice = dkcNoPrice(state, r);
    const material = {
      id: 40_000 + index,
      node_id: 1000 + (index % 7),
      code: r.article,
      name: r.title,
      unit: "шт",
      series: `Серия ${index % 4}`,
      country: "Россия",
      no_price: noPrice,
      price: noPrice ? "0" : r.price.value,
    };
    // The price as a number literal with exactly the catalog's digits.
    const text = JSON.stringify({ material }).replace(/"price":"(\d+(?:\.\d+)?)"/, '"price":$1');
    sendBody(res, stats, 200, text, json);
    return true;
  }
  return false;
}
