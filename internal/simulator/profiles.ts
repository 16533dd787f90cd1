import type { ServerResponse } from "node:http";
import { sendJson } from "./respond.js";
import type { SupplierState } from "./supplier.js";
import type { SimProfile, SimulatorRecord } from "./types.js";

/**
 * Routes that answer like the real APIs the project ships connectors for
 * (docs/cookbook.md), deterministic from the supplier's catalog:
 *
 * - `etm`: `GET /api/v1/goods/{c1,…,c50}/price` → `{status, data: {rows: [{gdscode, price,
 *   pricewnds, price_tarif, price_retail}]}}`; `GET /api/v1/goods/{code}/remains` →
 *   `{status, data: {InfoStores: [{StoreCode, StoreName, StoreType, Remain}]}}`. A request
 *   of which no code is known answers 404; more than 50 codes 400.
 * - `iek`: `GET /api/ddp` → `[{groupId, kind, section, group, TM}]`; `GET /api/products?groupId=…`
 *   → a bare array `[{art, name, price, saleprice, extra, vat, vat_included, min_ship}]`, every
 *   seventh offer with the price "Цена по запросу" until its price first changes (a mutation then
 *   gives it a real price); `GET /api/residues/json/?sku=a,b` →
 *   `{shopItems: [{sku, residues: {<store>: qty}, zakaz}], stores}`.
 * - `systeme`: `GET /new-api/JSON/getdata?page=N&pageSize=M` → `{data: [{commercialRef, description,
 *   brand, range}]}`, 1-based pages (pageSize default 100, at most 1,000), an empty `data` after
 *   the last (the paging names are an assumption: none are published);
 *   `GET /new-api/JSON/getprice?commercialRef=a,b` → `{data: [{commercialRef, price,
 *   currency}]}`; `GET /new-api/JSON/getstock?commercialRef=a,b` → `{data: [{commercialRef,
 *   stocks: [{warehouse, count}]}]}`; at most 45 references a call (else 400).
 *
 * Stock is split over stores so that the stores sum to the catalog's `stock.total`.
 */

/** Groups of the `iek` profile: offer index mod this. */
export const IEK_GROUPS = 3;
/** Every offer whose index is a multiple of this has no price at `iek` ("Цена по запросу"). */
export const IEK_PRICE_ON_REQUEST_EVERY = 7;
export const PRICE_ON_REQUEST = "Цена по запросу";

/** Stock of one offer spread over three stores; the parts sum to `total`. */
export function storeSplit(total: number): [number, number, number] {
  const a = Math.floor(total / 2);
  const b = Math.floor(total / 3);
  return [a, b, total - a - b];
}

function indexOf(record: SimulatorRecord): number {
  return Number(record.article.slice(record.article.lastIndexOf("-") + 1));
}

/** The live record of `sku`, or undefined for a code the catalog does not (or no longer) have. */
function lookup(state: SupplierState, sku: string): SimulatorRecord | undefined {
  const position = state.catalog.positionOf(sku);
  return position < 0 ? undefined : state.catalog.recordOf(state.catalog.indexAt(position));
}

function codes(text: string | null): string[] {
  return (text ?? "")
    .split(",")
    .map((c) => c.trim())
    .filter((c) => c !== "");
}

const ETM_PRICE = /^\/api\/v1\/goods\/([^/]+)\/price$/;
const ETM_REMAINS = /^\/api\/v1\/goods\/([^/]+)\/remains$/;

/**
 * Answers `route` for a supplier with a profile; false when the route is not the profile's
 * (the caller answers 404).
 */
export function serveProfile(
  profile: SimProfile,
  state: SupplierState,
  route: string,
  url: URL,
  res: ServerResponse,
): boolean {
  const stats = state.stats;
  const ok = { code: 200, message: "OK" };
  if (profile === "etm") {
    const price = ETM_PRICE.exec(route);
    if (price) {
      const list = codes(decodeURIComponent(price[1] as string));
      if (list.length > 50) {
        sendJson(res, stats, 400, { status: { code: 400, message: "at most 50 codes" } });
        return true;
      }
      const rows = list.flatMap((c) => {
        const r = lookup(state, c);
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
      if (rows.length === 0) sendJson(res, stats, 404, { status: { code: 404, message: "goods not found" } });
      else sendJson(res, stats, 200, { status: ok, data: { rows } });
      return true;
    }
    const remains = ETM_REMAINS.exec(route);
    if (remains) {
      const r = lookup(state, decodeURIComponent(remains[1] as string));
      if (!r) {
        sendJson(res, stats, 404, { status: { code: 404, message: "goods not found" } });
        return true;
      }
      const InfoStores = storeSplit(r.stock.total).map((Remain, i) => ({
        StoreCode: `S${i + 1}`,
        StoreName: `Store ${i + 1}`,
        StoreType: i === 0 ? "rc" : "op",
        Remain,
      }));
      sendJson(res, stats, 200, { status: ok, data: { InfoStores } });
      return true;
    }
    return false;
  }
  if (profile === "iek") {
    if (route === "/api/ddp") {
      // Optional `page` + `limit` (1-based pages, an empty page at the end), for paged partition lists.
      const limit = Number(url.searchParams.get("limit") ?? Number.POSITIVE_INFINITY);
      const page = Number(url.searchParams.get("page") ?? 1);
      const all = Array.from({ length: Math.min(IEK_GROUPS, state.catalog.liveCount) }, (_, g) => ({
        groupId: `G${g}`,
        kind: "product",
        section: "Electrical",
        group: `Group ${g}`,
        TM: "IEK",
      }));
      const groups = Number.isFinite(limit) ? all.slice((page - 1) * limit, page * limit) : all;
      sendJson(res, stats, 200, groups);
      return true;
    }
    if (route === "/api/products") {
      const group = url.searchParams.get("groupId") ?? "";
      const g = /^G(\d+)$/.exec(group);
      const records = state.catalog.slice(0, state.catalog.liveCount);
      const items = g
        ? records
            .filter((r) => indexOf(r) % IEK_GROUPS === Number(g[1]))
            .map((r) => {
              const index = indexOf(r);
              const onRequest =
                index % IEK_PRICE_ON_REQUEST_EVERY === 0 && !state.catalog.priceChanged(index);
              return {
                art: r.article,
                name: r.title,
                price: onRequest ? PRICE_ON_REQUEST : r.price.value,
                saleprice: onRequest ? PRICE_ON_REQUEST : r.price.value,
                extra: onRequest ? PRICE_ON_REQUEST : "",
                vat: 20,
                vat_included: true,
                min_ship: 1,
              };
            })
        : [];
      sendJson(res, stats, 200, items);
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
  if (profile !== "systeme") return false;
  if (route === "/new-api/JSON/getdata") {
    const page = Number(url.searchParams.get("page") ?? 1);
    const size = Number(url.searchParams.get("pageSize") ?? 100);
    if (!Number.isInteger(page) || page < 1 || !Number.isInteger(size) || size < 1 || size > 1000) {
      sendJson(res, stats, 400, { error: "page must be 1 or more, pageSize 1 to 1000" });
      return true;
    }
    const data = state.catalog.slice((page - 1) * size, page * size).map((r) => ({
      commercialRef: r.article,
      description: r.title,
      brand: "Systeme Electric",
      range: `Range ${indexOf(r) % 5}`,
    }));
    sendJson(res, stats, 200, { data });
    return true;
  }
  if (route === "/new-api/JSON/getprice" || route === "/new-api/JSON/getstock") {
    const list = codes(url.searchParams.get("commercialRef"));
    if (list.length > 45) {
      sendJson(res, stats, 400, { error: "at most 45 references per call" });
      return true;
    }
    const found = list.flatMap((c) => {
      const r = lookup(state, c);
      return r ? [r] : [];
    });
    const data = route.endsWith("getprice")
      ? found.map((r) => ({ commercialRef: r.article, price: r.price.value, currency: "RUB" }))
      : found.map((r) => ({
          commercialRef: r.article,
          stocks: storeSplit(r.stock.total).map((count, i) => ({ warehouse: `W${i + 1}`, count })),
        }));
    sendJson(res, stats, 200, { data });
    return true;
  }
  return false;
}
