import type { IncomingHttpHeaders } from "node:http";
import type { ConnectorDefinition } from "../config/connector-schema.js";
import { IngestionError } from "../platform/errors.js";
import { isLosslessNumber } from "../platform/exact-json.js";
import { readDotPath } from "./dot-path.js";
import type { OriginPolicy } from "./origin.js";

/**
 * The pagination types of DESIGN §3 as pure URL arithmetic: the first page's
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
}

/** The URL of the first page: `baseUrl` + `request.path`, `request.query`, first page parameters. */
export function firstPageUrl(def: ConnectorDefinition): URL {
  const base = new URL(def.baseUrl);
  const prefix = base.pathname.replace(/\/+$/, "");
  const url = new URL(`${base.origin}${prefix}${def.request.path}`);
  for (const [k, v] of Object.entries(def.request.query)) url.searchParams.set(k, v);
  const p = def.pagination;
  if (p.type === "page") url.searchParams.set(p.param, String(p.start));
  if (p.type === "offset") {
    url.searchParams.set(p.offsetParam, "0");
    url.searchParams.set(p.limitParam, String(p.limit));
  }
  return url;
}

/**
 * The next page's URL, or `null` when `page` ended the catalog.
 * @throws IngestionError `CONTRACT` for a next URL outside the allowed
 * origins, a malformed cursor, or a next page identical to this one.
 */
export function nextPageUrl(def: ConnectorDefinition, origins: OriginPolicy, page: AnsweredPage): URL | null {
  const p = def.pagination;
  let next: URL | null;
  switch (p.type) {
    case "none":
      return null;
    case "page": {
      if (page.recordCount === 0) return null;
      const current = Number(page.url.searchParams.get(p.param) ?? p.start);
      next = withParam(page.url, p.param, String(current + 1));
      break;
    }
    case "offset": {
      if (page.recordCount < p.limit) return null;
      const current = Number(page.url.searchParams.get(p.offsetParam) ?? 0);
      next = withParam(page.url, p.offsetParam, String(current + page.recordCount));
      break;
    }
    case "cursor": {
      const cursor = readDotPath(page.body, p.cursorPath);
      if (cursor === undefined || cursor === null || cursor === "") return null;
      // A long numeric id a double cannot hold arrives as its text (LosslessNumber), kept exact.
      if (typeof cursor !== "string" && typeof cursor !== "number" && !isLosslessNumber(cursor)) {
        throw new IngestionError(
          "CONTRACT",
          `cursor at ${JSON.stringify(p.cursorPath)} is ${typeof cursor}, not a string`,
        );
      }
      const text = String(cursor);
      // Some APIs hand out the next page as a full URL; it is followed only inside the pinned origins.
      next = /^https?:\/\//i.test(text)
        ? origins.resolve(text, page.url, "cursor URL")
        : withParam(firstPageUrl(def), p.param, text);
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
