import type { ServerResponse } from "node:http";
import { codes, indexOfSku, lookup } from "./profile-etm.js";
import { sendBody, sendJson } from "./respond.js";
import type { SupplierState } from "./supplier.js";
import type { SimulatorRecord } from "./types.js";

/**
 * The `iek` profile: IEK's lk.iek.ru API in the shapes public clients read
 * (../shared/SUPPLIER-APIS.md, IEK), deterministic from the catalog.
 *
 * - `GET /api/ddp` → `[{groupId, kind, section, group, TM}]` (optional `page` + `limit`, for
 *   paged partition lists).
 * - `GET /api/products?groupId=…&page=N&pageSize=M&entity=all` → `{items: [...], totalPage}`,
 *   1-based pages (pageSize default 500, at most 1,000), an empty `items` past the last and
 *   `totalPage` 0 for an empty group; `?art=a` → a bare array. Items: `art`, `name`,
 *   `groupId`, `TM`, `price` (a JSON number, always sent), `extra`, `PriceIndividualPost`
 *   (some), `vat`, `vat_included`, `order_multiplicity`, `min_ship`.
 * - Price on request: every seventh offer, until its price first changes, is flagged in
 *   `extra` while `price` still carries a number; the flag's text varies (alone, padded,
 *   followed by a note: {@link iekExtra}), and other offers carry other notes or `""`.
 * - `GET /api/residues/json/?sku=a,b` → `{shopItems: [{sku, residues: {<store>: qty}, zakaz}],
 *   stores}`, the parts summing to the offer's stock.
 */

/** Groups of the `iek` profile: offer index mod this. */
export const IEK_GROUPS = 3;
/** Every offer whose index is a multiple of this is priced on request (until its price changes). */
export const IEK_PRICE_ON_REQUEST_EVERY = 7;
export const PRICE_ON_REQUEST = "Цена по запросу";

/** Stock of one offer spread over three stores; the parts sum to `total`. */
export function storeSplit(total: number): [number, number, number] {
  const a = Math.floor(total / 2);
  const b = Math.floor(total / 3);
  return [a, b, total - a - b];
}

/** True when offer `index` is priced on request now. */
export function iekOnRequest(state: SupplierState, index: number): boolean {
  return index % IEK_PRICE_ON_REQUEST_EVERY === 0 && !state.catalog.priceChanged(index);
}

/** `extra` of offer `index`: the on-request flag in three spellings, else a note or nothing. */
export function iekExtra(index: number, onRequest: boolean): string {
  if (onRequest) {
    const spelling = (index / IEK_PRICE_ON_REQUEST_EVERY) % 3;
    if (spelling === 1) return `  ${PRICE_ON_REQUEST} `;
    if (spelling === 2) return `${PRICE_ON_REQUEST}. Срок поставки уточняйте у менеджера`;
    return PRICE_ON_REQUEST;
  }
  return index % 5 === 1 ? "Новинка" : "";
}

/** The individual price of offer `index` when it has one (every fourth), as a decimal text. */
export function iekIndividualPrice(record: SimulatorRecord): string | undefined {
  return indexOfSku(record.article) % 4 === 1 ? (Number(record.price.value) * 0.9).toFixed(2) : undefined;
}

function item(state: SupplierState, r: SimulatorRecord) {
  const index = indexOfSku(r.article);
  const onRequest = iekOnRequest(state, index);
  const individual = iekIndividualPrice(r);
  return {
    art: r.article,
    name: r.title,
    groupId: `G${index % IEK_GROUPS}`,
    TM: "IEK",
    price: r.price.value,
    extra: iekExtra(index, onRequest),
    ...(individual === undefined ? {} : { PriceIndividualPost: individual }),
    vat: 20,
    vat_included: true,
    order_multiplicity: 1 + (index % 2) * 9,
    min_ship: 1,
  };
}

/** The JSON text with prices as number literals of exactly the catalog's digits, as IEK sends them. */
function withNumericPrices(body: unknown): string {
  return JSON.stringify(body).replace(/"(price|PriceIndividualPost)":"(\d+(?:\.\d+)?)"/g, '"$1":$2');
}

/** Answers an IEK route; false when `route` is not one. */
export function serveIek(state: SupplierState, route: string, url: URL, res: ServerResponse): boolean {
  const stats = state.stats;
  if (route === "/api/ddp") {
    const limit = Number(url.searchParams.get("limit") ?? Number.POSITIVE_INFINITY);
    const page = Number(url.searchParams.get("page") ?? 1);
    const all = Array.from({ length: Math.min(IEK_GROUPS, state.catalog.liveCount) }, (_, g) => ({
      groupId: `G${g}`,
      kind: "product",
      section: "Electrical",
      group: `Group ${g}`,
      TM: "IEK",
    }));
    sendJson(res, stats, 200, Number.isFinite(limit) ? all.slice((page - 1) * limit, page * limit) : all);
    return true;
  }
  if (route === "/api/products") {
    const json = { "content-type": "application/json" };
    const art = url.searchParams.get("art");
    if (art !== null) {
      const r = lookup(state, art);
      sendBody(res, stats, 200, withNumericPrices(r ? [item(state, r)] : []), json);
      return true;
    }
    const page = Number(url.searchParams.get("page") ?? 1);
    const size = Number(url.searchParams.get("pageSize") ?? 500);
    if (!Number.isInteger(page) || page < 1 || !Number.isInteger(size) || size < 1 || size > 1000) {
      sendJson(res, stats, 400, { error: "page must be 1 or more, pageSize 1 to 1000" });
      return true;
    }
    const g = /^G(\d+)$/.exec(url.searchParams.get("groupId") ?? "");
    const members = g
      ? state.catalog
          .slice(0, state.catalog.liveCount)
          .filter((r) => indexOfSku(r.article) % IEK_GROUPS === Number(g[1]))
      : [];
    const items = members.slice((page - 1) * size, page * size).map((r) => item(state, r));
    const body = { items, totalPage: Math.ceil(members.length / size) };
    sendBody(res, stats, 200, withNumericPrices(body), json);
    return true;
  }
  if (route === "/api/residues/json/" || route === "/api/residues/json") {
    const shopItems = codes(url.searchParams.get("sku")).flatMap((c) => {
      const r = lookup(state, c);
      if (!r) return [];
      const [a, b, c3] = storeSplit(r.stock.total);
      return [{ sku: r.article, residues: { "1": a, "2": b, "3": c3 }, zakaz: 0 }];
    });
    sendJson(res, stats, 200, {
      shopItems,
      stores: { "1": "Moscow", "2": "Saint Petersburg", "3": "Kazan" },
    });
    return true;
  }
  return false;
}
