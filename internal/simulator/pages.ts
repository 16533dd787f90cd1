import type { SupplierState } from "./supplier.js";

/**
 * Pagination of the catalog route, one function pair per concern: parse the
 * query into a position range, then build the body/headers for that range.
 * Every type maps a request to `page` (1-based number within the walk), which
 * is what faults refer to.
 */

const MAX_LIMIT = 100_000;

export interface PageRequest {
  /** 1-based page number within the walk. */
  page: number;
  /** First live position served. */
  from: number;
  /** Records asked for (all of them for `none`). */
  limit: number;
}

export interface PageResponse {
  body: unknown;
  headers: Record<string, string>;
  /** True when this answer ends the walk for a client following this pagination type. */
  terminal: boolean;
}

export class BadRequest extends Error {
  override readonly name = "BadRequest";
}

function intParam(query: URLSearchParams, name: string, fallback: number, min: number): number {
  const raw = query.get(name);
  if (raw === null || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new BadRequest(`query ${name} must be an integer >= ${min}`);
  return n;
}

function limitParam(query: URLSearchParams, state: SupplierState, name = "limit"): number {
  const limit = intParam(query, name, state.pageSize, 1);
  if (limit > MAX_LIMIT) throw new BadRequest(`query limit must be <= ${MAX_LIMIT}`);
  return limit;
}

/** Opaque cursor: base64url of the next position. */
export function encodeCursor(position: number): string {
  return Buffer.from(`p:${position}`).toString("base64url");
}

function decodeCursor(cursor: string): number {
  const text = Buffer.from(cursor, "base64url").toString("utf8");
  const match = /^p:(\d+)$/.exec(text);
  if (!match) throw new BadRequest("invalid cursor");
  return Number(match[1]);
}

/** Throws {@link BadRequest} for malformed pagination parameters. */
export function parsePageRequest(state: SupplierState, query: URLSearchParams): PageRequest {
  switch (state.pagination) {
    case "none":
      return { page: 1, from: 0, limit: Number.MAX_SAFE_INTEGER };
    case "page":
    case "total-pages":
    case "link": {
      const page = intParam(query, "page", 1, 1);
      const limit = limitParam(query, state, state.sizeParam);
      return { page, from: (page - 1) * limit, limit };
    }
    case "stripe": {
      const after = query.get("starting_after");
      const limit = limitParam(query, state);
      if (after === null || after === "") return { page: 1, from: 0, limit };
      const at = state.catalog.positionOf(after);
      if (at < 0) throw new BadRequest(`starting_after ${after} is not a known id`);
      return { page: Math.floor((at + 1) / limit) + 1, from: at + 1, limit };
    }
    case "cursor-header": {
      const cursor = query.get("cursor");
      const from = cursor === null || cursor === "" ? 0 : decodeCursor(cursor);
      const limit = limitParam(query, state);
      return { page: Math.floor(from / limit) + 1, from, limit };
    }
    case "offset":
    case "offset-total": {
      const offset = intParam(query, "offset", 0, 0);
      const limit = limitParam(query, state);
      return { page: Math.floor(offset / limit) + 1, from: offset, limit };
    }
    case "cursor": {
      const cursor = query.get("cursor");
      const from = cursor === null || cursor === "" ? 0 : decodeCursor(cursor);
      const limit = limitParam(query, state);
      return { page: Math.floor(from / limit) + 1, from, limit };
    }
  }
}

/** The normal answer for `req`; `linkTo` / `cursorValue` override the next pointer while more remain. */
export function buildPage(
  state: SupplierState,
  req: PageRequest,
  overrides: { linkTo?: string; cursorValue?: string },
): PageResponse {
  const to = Math.min(req.from + req.limit, state.catalog.liveCount);
  const items = state.servedSlice(req.from, to);
  const more = to < state.catalog.liveCount;
  const body = { data: { items } };
  switch (state.pagination) {
    case "none":
      return { body, headers: {}, terminal: true };
    case "page":
      // Clients stop on an empty page, so that page (not the last full one) ends the walk.
      return { body, headers: {}, terminal: items.length === 0 };
    case "offset":
      return { body, headers: {}, terminal: items.length < req.limit };
    case "offset-total":
      return {
        body: { ...body, meta: { total: state.catalog.liveCount } },
        headers: {},
        terminal: to >= state.catalog.liveCount,
      };
    case "total-pages": {
      const totalPages = Math.ceil(state.catalog.liveCount / req.limit);
      return {
        body: { ...body, meta: { page: req.page, total_pages: totalPages, has_more: req.page < totalPages } },
        headers: {},
        terminal: req.page >= totalPages,
      };
    }
    case "stripe":
      return { body: { object: "list", data: items, has_more: more }, headers: {}, terminal: !more };
    case "cursor-header": {
      if (!more) return { body, headers: {}, terminal: true };
      return {
        body,
        headers: { "x-next-cursor": overrides.cursorValue ?? encodeCursor(to) },
        terminal: false,
      };
    }
    case "cursor": {
      const next = more ? (overrides.cursorValue ?? encodeCursor(to)) : null;
      return { body: { ...body, next_cursor: next }, headers: {}, terminal: next === null };
    }
    case "link": {
      if (!more) return { body, headers: {}, terminal: true };
      const next =
        overrides.linkTo ??
        `/${encodeURIComponent(state.name)}/v1/offers?page=${req.page + 1}&limit=${req.limit}`;
      return { body, headers: { link: `<${next}>; rel="next"` }, terminal: false };
    }
  }
}

/** True when `req` is the first page of a walk. */
export function isFirstPage(req: PageRequest): boolean {
  return req.from === 0;
}
