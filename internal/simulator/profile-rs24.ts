import type { IncomingMessage, ServerResponse } from "node:http";
import { indexOfSku, lookup } from "./profile-etm.js";
import { sendBody, sendJson } from "./respond.js";
import type { SupplierState } from "./supplier.js";
import type { SimulatorRecord } from "./types.js";

/**
 * The `rs24` profile: Русский Свет's cdis.russvet.ru/rs API in the shapes public clients
 * read (../shared/SUPPLIER-APIS.md, More suppliers; docs/cookbook.md, RS24), deterministic
 * from the catalog. HTTP Basic is checked in front of every route (`realApiSupplier`).
 *
 * - `GET /stocks` → `{Stocks: [{ORGANIZATION_ID, NAME}]}`.
 * - `GET /position/{store}/{instock|custom}?page=N&rows=M` → `{items: [{CODE, VENDOR_CODE,
 *   NAME, BRAND, CATEGORY, UOM}], meta: {last_page, rows_count}}`, 1-based pages, `rows` at
 *   most 1,000 (default 1,000), an empty `items` past the last page. Every fifth offer is a
 *   made-to-order position (`custom`), the others stock positions (`instock`); no offer is
 *   in both. `CODE` (the RS code, the catalog's SKU) is a string; every ninth `VENDOR_CODE`
 *   is empty. An unknown store or category answers 404.
 * - `POST /massprice` with `{"items": [codes]}` (strings or numbers) → a bare array of
 *   `{RSCode, Price: {Personal, Personal_w_VAT, Retail, Retail_w_VAT, MRC, MRC_w_VAT,
 *   AvailabilityMRC}}` for the codes it knows, prices as JSON numbers (`Personal` with
 *   exactly the catalog's digits); more than 50 codes, or a body without an `items` array, 400.
 * - `GET /residue/{store}/{code}` → `{Residue, UOM}`, `Residue` a JSON number: the catalog's
 *   stock at {@link RS24_STORE}, a different figure at the other stores (a connector reading
 *   another store's stock is caught); an unknown code or store 404.
 */

/** The store whose residues are the catalog's stock (the one `config/suppliers/rs24.json` names). */
export const RS24_STORE = "287";
const STORES = [
  { ORGANIZATION_ID: 287, NAME: "Самара" },
  { ORGANIZATION_ID: 96, NAME: "Тольятти" },
  { ORGANIZATION_ID: 14030, NAME: "Москва" },
];
/** Every offer whose index is a multiple of this is a made-to-order (`custom`) position. */
export const RS24_CUSTOM_EVERY = 5;

export function rs24Category(record: SimulatorRecord): "instock" | "custom" {
  return indexOfSku(record.article) % RS24_CUSTOM_EVERY === 0 ? "custom" : "instock";
}

/** The manufacturer's article of an offer; every ninth has none (`""`). */
export function rs24VendorCode(record: SimulatorRecord): string {
  const index = indexOfSku(record.article);
  return index % 9 === 0 ? "" : `MNF-${String(index * 13 + 7).padStart(6, "0")}`;
}

/** Residue of `record` at `store`: the catalog's stock at {@link RS24_STORE}, less elsewhere. */
export function rs24Residue(record: SimulatorRecord, store: string): number {
  return store === RS24_STORE ? record.stock.total : Math.floor(record.stock.total / 3);
}

const cents = (n: number) => Math.round(n * 100) / 100;

/** The price block of `record`: `Personal` is the catalog's price, the others derived from it. */
export function rs24Prices(record: SimulatorRecord) {
  const net = Number(record.price.value);
  return {
    Personal: record.price.value,
    Personal_w_VAT: cents(net * 1.2),
    Retail: cents(net * 1.4),
    Retail_w_VAT: cents(net * 1.4 * 1.2),
    Base: cents(net * 1.5),
    Base_w_VAT: cents(net * 1.5 * 1.2),
    MRC: cents(net * 1.3),
    MRC_w_VAT: cents(net * 1.3 * 1.2),
    AvailabilityMRC: indexOfSku(record.article) % 2 === 0 ? "Y" : "N",
  };
}

const POSITION = /^\/position\/([^/]+)\/([^/]+)$/;
const RESIDUE = /^\/residue\/([^/]+)\/([^/]+)$/;
const MAX_BODY = 64 * 1024;
const json = { "content-type": "application/json" };

function knownStore(store: string): boolean {
  return STORES.some((s) => String(s.ORGANIZATION_ID) === store);
}

/** `Personal` as a number literal of exactly the catalog's digits, as the clients' sample shows prices. */
function withNumericPersonal(body: unknown): string {
  return JSON.stringify(body).replace(/"Personal":"(\d+(?:\.\d+)?)"/g, '"Personal":$1');
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) return undefined;
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
}

async function serveMassprice(state: SupplierState, req: IncomingMessage, res: ServerResponse) {
  const stats = state.stats;
  if (req.method !== "POST") {
    sendJson(res, stats, 405, { error: "method not allowed" }, { allow: "POST" });
    return;
  }
  const body = (await readJson(req)) as { items?: unknown } | undefined;
  const items = body?.items;
  if (!Array.isArray(items) || !items.every((c) => typeof c === "string" || typeof c === "number")) {
    sendJson(res, stats, 400, { error: 'the body must be {"items": [codes]}' });
    return;
  }
  if (items.length > 50) {
    sendJson(res, stats, 400, { error: "at most 50 codes per request" });
    return;
  }
  const answer = items.flatMap((c) => {
    const r = lookup(state, String(c));
    return r ? [{ RSCode: r.article, Price: rs24Prices(r) }] : [];
  });
  sendBody(res, stats, 200, withNumericPersonal(answer), json);
}

/** Answers an RS24 route; false when `route` is not one. */
export function serveRs24(
  state: SupplierState,
  req: IncomingMessage,
  route: string,
  url: URL,
  res: ServerResponse,
): boolean {
  const stats = state.stats;
  if (route === "/stocks") {
    sendJson(res, stats, 200, { Stocks: STORES });
    return true;
  }
  if (route === "/massprice") {
    serveMassprice(state, req, res).catch(() => res.destroy());
    return true;
  }
  const position = POSITION.exec(route);
  if (position) {
    const [store, category] = [position[1] as string, position[2] as string];
    if (!knownStore(store) || (category !== "instock" && category !== "custom")) {
      sendJson(res, stats, 404, { error: "unknown store or category" });
      return true;
    }
    const page = Number(url.searchParams.get("page") ?? 1);
    const rows = Number(url.searchParams.get("rows") ?? 1000);
    if (!Number.isInteger(page) || page < 1 || !Number.isInteger(rows) || rows < 1 || rows > 1000) {
      sendJson(res, stats, 400, { error: "page must be 1 or more, rows 1 to 1000" });
      return true;
    }
    const members = state.catalog
      .slice(0, state.catalog.liveCount)
      .filter((r) => rs24Category(r) === category);
    const items = members.slice((page - 1) * rows, page * rows).map((r) => ({
      CODE: r.article,
      VENDOR_CODE: rs24VendorCode(r),
      NAME: r.title,
      BRAND: ["IEK", "EKF", "DKC", "Schneider Electric"][indexOfSku(r.article) % 4],
      CATEGORY: category === "custom" ? "Заказная" : "Складская",
      UOM: "шт",
    }));
    sendJson(res, stats, 200, {
      items,
      meta: { last_page: Math.max(1, Math.ceil(members.length / rows)), rows_count: members.length },
    });
    return true;
  }
  const residue = RESIDUE.exec(route);
  if (residue) {
    const store = residue[1] as string;
    const r = lookup(state, decodeURIComponent(residue[2] as string));
    if (!knownStore(store) || !r) {
      sendJson(res, stats, 404, { error: "position not found" });
      return true;
    }
    sendJson(res, stats, 200, { Residue: rs24Residue(r, store), UOM: "шт" });
    return true;
  }
  return false;
}
