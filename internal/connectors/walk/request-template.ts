import type { RequestDefinition } from "../schema/connector-schema.js";
import { substitute, substituteJson } from "../schema/placeholders.js";

/**
 * A request of the walk with its placeholders filled in (docs/connectors.md, Requests): the
 * main request per partition or SKU batch, a partition list, an enrichment.
 * Values are percent-encoded in the path and in query values, except the
 * `{skus}` separator (`literal`), which stays as written; `body` and `form`
 * strings take them as they are.
 */

/** Placeholder name → value for one request (`partition`, `skus`, `sku`). */
export type PlaceholderValues = Readonly<Record<string, string>>;

export interface RequestBody {
  contentType: string;
  data: string;
}

/** `baseUrl` + the request's path and query, placeholders substituted. */
export function requestUrl(
  baseUrl: string,
  request: Pick<RequestDefinition, "path" | "query">,
  values: PlaceholderValues = {},
  literal = "",
  extraQuery: Readonly<Record<string, string>> = {},
): URL {
  const base = new URL(baseUrl);
  const prefix = base.pathname.replace(/\/+$/, "");
  const url = new URL(`${base.origin}${prefix}${substitute(request.path, values, "path", literal)}`);
  const templated: [string, string][] = [];
  for (const [k, v] of Object.entries(request.query)) {
    if (v.includes("{")) templated.push([k, v]);
    else url.searchParams.set(k, v);
  }
  for (const [k, v] of Object.entries(extraQuery)) url.searchParams.set(k, v);
  if (templated.length > 0) {
    // Written by hand: URLSearchParams would encode the separator of `{skus}` too.
    const parts = templated.map(
      ([k, v]) => `${encodeURIComponent(k)}=${substitute(v, values, "path", literal)}`,
    );
    const search = url.search.length > 1 ? url.search.slice(1) : "";
    url.search = [search, ...parts].filter((p) => p !== "").join("&");
  }
  return url;
}

/** `body` as JSON or `form` as a urlencoded form, placeholders substituted; undefined for neither. */
export function requestBody(
  request: Pick<RequestDefinition, "body" | "form">,
  values: PlaceholderValues = {},
): RequestBody | undefined {
  if (request.form !== undefined) {
    const form = Object.fromEntries(
      Object.entries(request.form).map(([k, v]) => [k, substitute(v, values, "form")]),
    );
    return { contentType: "application/x-www-form-urlencoded", data: new URLSearchParams(form).toString() };
  }
  if (request.body !== undefined) {
    return { contentType: "application/json", data: JSON.stringify(substituteJson(request.body, values)) };
  }
  return undefined;
}

/**
 * The values of one batch of SKUs: `{skus}` joined by `separator`, `{sku}` for a batch of one,
 * `{sku_list}` the batch as a JSON array (a whole `body` string only).
 */
export function batchValues(batch: readonly string[], separator: string): Record<string, string> {
  const values: Record<string, string> = { skus: batch.join(separator), sku_list: JSON.stringify(batch) };
  if (batch.length === 1) values.sku = batch[0] as string;
  return values;
}

/** `items` in consecutive batches of at most `size`. */
export function inBatches<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
