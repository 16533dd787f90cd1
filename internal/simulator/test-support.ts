/**
 * A minimal loopback HTTP client for the simulator's own tests: node:http, so
 * socket-level faults (reset, truncation) surface as the raw errors they are.
 */
import { request } from "node:http";

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** GET (or another method) `url`; rejects on socket errors; bounded by `timeoutMs`. */
export function httpRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string; timeoutMs?: number } = {},
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: options.method ?? "GET", headers: options.headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("aborted", () => reject(new Error("response aborted")));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString(),
          }),
        );
      },
    );
    req.setTimeout(options.timeoutMs ?? 10_000, () => req.destroy(new Error("client timeout")));
    req.on("error", reject);
    req.end(options.body);
  });
}

/** A served record, loosely: invalid and renamed records lack or change fields. */
export interface ServedItem {
  article?: string;
  sku_code?: string;
  title: string;
  price: { value: string; currency: string };
  stock: { total: number };
}

/** A catalog page body as the simulator serves it. */
export interface PageBody {
  data: { items: ServedItem[] };
  next_cursor?: string | null;
}

/** GET a catalog page and parse it (throws on a non-JSON body). */
export async function getJson(
  url: string,
  headers?: Record<string, string>,
): Promise<{ status: number; json: PageBody }> {
  const res = await httpRequest(url, { headers });
  return { status: res.status, json: JSON.parse(res.body) as PageBody };
}
