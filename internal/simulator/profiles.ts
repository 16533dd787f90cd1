import type { IncomingMessage, ServerResponse } from "node:http";
import { serveDkc } from "./profile-dkc.js";
import { codes, indexOfSku, lookup, serveEtm } from "./profile-etm.js";
import { serveIek, storeSplit } from "./profile-iek.js";
import { serveRs24 } from "./profile-rs24.js";
import { sendJson } from "./respond.js";
import type { SupplierState } from "./supplier.js";
import type { SimProfile } from "./types.js";

export { IEK_GROUPS, IEK_PRICE_ON_REQUEST_EVERY, PRICE_ON_REQUEST, storeSplit } from "./profile-iek.js";

/**
 * Routes that answer like the real APIs the project ships connectors for
 * (docs/cookbook.md), deterministic from the supplier's catalog:
 *
 * - `etm`: prices per batch of codes and remains per code (`profile-etm.ts`); ETM's export
 *   jobs are in `export-jobs.ts`.
 * - `iek`: groups, paged products, residues (`profile-iek.ts`).
 * - `rs24`: stores, paged positions per store and category, prices by POST batches of 50,
 *   residues per store and code (`profile-rs24.ts`).
 * - `dkc`: stock per comma list of codes, a material per code (`profile-dkc.ts`).
 * - `systeme`: `GET /new-api/JSON/getdata?page=N&pageSize=M` → `{data: [{commercialRef, description,
 *   brand, range}]}`, 1-based pages (pageSize default 100, at most 1,000), an empty `data` after
 *   the last (the paging names are an assumption: none are published);
 *   `GET /new-api/JSON/getprice?commercialRef=a,b` → `{data: [{commercialRef, price,
 *   currency}]}`; `GET /new-api/JSON/getstock?commercialRef=a,b` → `{data: [{commercialRef,
 *   stocks: [{warehouse, count}]}]}`; at most 45 references a call (else 400). Stock is split
 *   over warehouses so that they sum to the catalog's `stock.total`.
 */

/**
 * Answers `route` for a supplier with a profile; false when the route is not the profile's
 * (the caller answers 404).
 */
export function serveProfile(
  profile: SimProfile,
  state: SupplierState,
  req: IncomingMessage,
  route: string,
  url: URL,
  res: ServerResponse,
): boolean {
  const stats = state.stats;
  if (profile === "etm") return serveEtm(state, route, url, res);
  if (profile === "iek") return serveIek(state, route, url, res);
  if (profile === "rs24") return serveRs24(state, req, route, url, res);
  if (profile === "dkc") return serveDkc(state, route, url, res);
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
      range: `Range ${indexOfSku(r.article) % 5}`,
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
