import type { IncomingHttpHeaders } from "node:http";
import { readDotPath } from "../../platform/dot-path.js";
import { IngestionError } from "../../platform/errors.js";
import { isLosslessNumber } from "../../platform/exact-json.js";
import type { ConnectorDefinition } from "../schema/connector-schema.js";
import type { OriginPolicy } from "../transport/origin.js";
import { type PlaceholderValues, requestUrl } from "./request-template.js";

/**
 * The pagination types (docs/connectors.md, Pagination) as pure URL arithmetic: the first page's
 * URL, then from each answered page either the next URL or `null` at the end
 * of the catalog. Every URL that comes from the supplier (a `Link`, a cursor
 * that is itself a URL) is checked against origin pinning here, before it
 * could be requested.
 */

/** What the paginator needs to know about an answered page. */
export interface AnsweredPage {
  url: URL;
  headers: IncomingHttpHeaders;
  body: unknown;
  recordCount: number;
  /** The page's last record (for `lastRecordPath`), undefined on an empty page. */
  lastRecord?: unknown;
}

/** The URL of the first page: `baseUrl` + `request.path`, `request.query`, first page parameters. */
export function firstPageUrl(def: PagedRequest, values: PlaceholderValues = {}, literal = ""): URL {
  const pageParams: Record<string, string> = {};
  const p = def.pagination;
  if (p.type === "page") {
    pageParams[p.param] = String(p.start);
    if (p.sizeParam !== undefined && p.size !== undefined) pageParams[p.sizeParam] = String(p.size);
  }
  if (p.type === "offset") {
    pageParams[p.offsetParam] = "0";
    pageParams[p.limitParam] = String(p.limit);
  }
  return requestUrl(def.baseUrl, def.request, values, literal, pageParams);
}

/** What pagination needs of a definition: the main request's, or a partition list's. */
export type PagedRequest = Pick<ConnectorDefinition, "baseUrl" | "request" | "pagination">;

/**
 * The next page's URL, or `null` when `page` ended the catalog.
 * @throws IngestionError `CONTRACT` for a next URL outside the allowed
 * origins, a malformed cursor, or a next page identical to this one.
 */
export function nextPageUrl(
  def: PagedRequest,
  origins: OriginPolicy,
  page: AnsweredPage,
  values: PlaceholderValues = {},
): URL | null {
  const p = def.pagination;
  let next: URL | null;
  if (p.type !== "none" && p.type !== "link" && p.hasMorePath !== undefined) {
    if (!readFlag(page.body, p.hasMorePath)) return null;
  }
  switch (p.type) {
    case "none":
      return null;
    case "page": {
      if (page.recordCount === 0) return null;
      const current = Number(page.url.searchParams.get(p.param) ?? p.start);
      if (p.totalPagesPath !== undefined) {
        const total = readCount(page.body, p.totalPagesPath);
        // Pages are numbered from `start`: with start 0, page total-1 is the last.
        if (current - p.start + 1 >= total) return null;
      }
      next = withParam(page.url, p.param, String(current + 1));
      break;
    }
    case "offset": {
      const current = Number(page.url.searchParams.get(p.offsetParam) ?? 0);
      if (p.totalPath !== undefined) {
        const total = readCount(page.body, p.totalPath);
        if (current + page.recordCount >= total || page.recordCount === 0) return null;
      } else if (page.recordCount < p.limit) return null;
      next = withParam(page.url, p.offsetParam, String(current + page.recordCount));
      break;
    }
    case "cursor": {
      let cursor: unknown;
      let where: string;
      if (p.cursorHeader !== undefined) {
        const raw = page.headers[p.cursorHeader.toLowerCase()];
        cursor = Array.isArray(raw) ? raw[0] : raw;
        where = `header ${p.cursorHeader}`;
      } else if (p.lastRecordPath !== undefined) {
        if (page.recordCount === 0) return null;
        cursor = readDotPath(page.lastRecord, p.lastRecordPath);
        where = `lastRecordPath ${JSON.stringify(p.lastRecordPath)}`;
        if (cursor === undefined || cursor === null || cursor === "") {
          throw new IngestionError("CONTRACT", `the page's last record has no cursor at ${where}`);
        }
      } else {
        cursor = readDotPath(page.body, p.cursorPath ?? "");
        where = `cursorPath ${JSON.stringify(p.cursorPath)}`;
      }
      if (cursor === undefined || cursor === null || cursor === "") return null;
      // A long numeric id a double cannot hold arrives as its text (LosslessNumber), kept exact.
      if (typeof cursor !== "string" && typeof cursor !== "number" && !isLosslessNumber(cursor)) {
        throw new IngestionError("CONTRACT", `cursor at ${where} is ${typeof cursor}, not a string`);
      }
      const text = String(cursor);
      // Some APIs hand out the next page as a full URL; it is followed only inside the pinned origins.
      next =
        /^https?:\/\//i.test(text) && p.lastRecordPath === undefined
          ? origins.resolve(text, page.url, "cursor URL")
          : withParam(firstPageUrl(def, values), p.param, text);
      break;
    }
    case "link": {
      const ref = nextLink(page.headers.link);
      if (ref === undefined) return null;
      next = origins.resolve(ref, page.url, "Link rel=next URL");
      break;
    }
  }
  if (next.href === page.url.href) {
    throw new IngestionError(
      "CONTRACT",
      `pagination does not advance: next page is again ${redactQuery(next)}`,
    );
  }
  return next;
}

/** `hasMorePath`: a boolean (or `"true"`/`"false"`, 1/0); anything else is `CONTRACT`. */
function readFlag(body: unknown, path: string): boolean {
  const value = readDotPath(body, path);
  if (value === true || value === "true" || value === 1 || value === "1") return true;
  if (value === false || value === "false" || value === 0 || value === "0") return false;
  throw new IngestionError(
    "CONTRACT",
    `hasMorePath ${JSON.stringify(path)} is ${value === undefined ? "missing" : JSON.stringify(value)?.slice(0, 50)}, not a boolean`,
  );
}

/** `totalPagesPath` / `totalPath`: a non-negative integer (or its decimal string); anything else is `CONTRACT`. */
function readCount(body: unknown, path: string): number {
  const value = readDotPath(body, path);
  const n = typeof value === "string" && /^\d+$/.test(value.trim()) ? Number(value) : value;
  if (typeof n !== "number" || !Number.isSafeInteger(n) || n < 0) {
    throw new IngestionError(
      "CONTRACT",
      `${JSON.stringify(path)} is ${value === undefined ? "missing" : JSON.stringify(value)?.slice(0, 50)}, not a count`,
    );
  }
  return n;
}

/**
 * Remembers the page URLs of a walk: a next page already visited (a cursor
 * that comes round again, a `Link` back to an earlier page) means the walk
 * would never end, so it fails `CONTRACT`. Memory stays bounded: only the
 * last {@link PROGRESS_WINDOW} URLs are kept; a longer cycle is still ended by
 * the run deadline.
 */
export class ProgressGuard {
  private readonly seen = new Set<string>();
  visit(url: URL): void {
    if (this.seen.has(url.href)) {
      throw new IngestionError(
        "CONTRACT",
        `pagination does not advance: next page ${redactQuery(url)} was already fetched in this walk`,
      );
    }
    this.seen.add(url.href);
    // A Set iterates in insertion order: the first key is the oldest.
    if (this.seen.size > PROGRESS_WINDOW) this.seen.delete(this.seen.values().next().value as string);
  }
}

/** Page URLs a walk remembers for {@link ProgressGuard}. */
export const PROGRESS_WINDOW = 10_000;

function withParam(url: URL, name: string, value: string): URL {
  const next = new URL(url);
  next.searchParams.set(name, value);
  return next;
}

function redactQuery(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

/**
 * The target of the first `rel="next"` link of an RFC 8288 `Link` header
 * (several headers or comma-separated links; `rel` may list several types).
 */
export function nextLink(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const text = Array.isArray(header) ? header.join(", ") : header;
  const link = /<([^>]*)>((?:\s*;\s*[^;,]+)*)/g;
  for (const match of text.matchAll(link)) {
    const params = match[2] ?? "";
    for (const param of params.split(";")) {
      const eq = param.indexOf("=");
      if (eq < 0) continue;
      const key = param.slice(0, eq).trim().toLowerCase();
      const value = param
        .slice(eq + 1)
        .trim()
        .replace(/^"(.*)"$/, "$1");
      if (key === "rel" && value.toLowerCase().split(/\s+/).includes("next")) return match[1];
    }
  }
  return undefined;
}
