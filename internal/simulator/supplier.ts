import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import { Catalog, invalidKindOf } from "./catalog.js";
import { FaultState } from "./faults.js";
import { TokenBucket } from "./rate-limit.js";
import { TokenIssuer, type Verdict } from "./sessions.js";
import { SupplierStats } from "./stats.js";
import type { SimAuth, SimPagination, SimulatorRecord, SimulatorSupplierOptions } from "./types.js";

/**
 * The JSON text of a page body. With `priceFormat: "number"` every `price.value` is
 * written as a number literal of the same digits: `JSON.stringify` could only write
 * the nearest double. `"value":"` occurs in the text only as that key (a quote inside
 * a string is escaped), and the simulator's price texts are plain decimals.
 */
export function pageText(state: SupplierState, body: unknown): string {
  const text = JSON.stringify(body);
  return state.priceFormat === "number" ? text.replace(/"value":"([0-9.eE+-]+)"/g, '"value":$1') : text;
}

/** Everything the simulator keeps for one supplier. Replaced whole by `configure`. */
export class SupplierState {
  readonly catalog: Catalog;
  readonly faults: FaultState;
  readonly stats = new SupplierStats();
  readonly pageSize: number;
  readonly pagination: SimPagination;
  readonly auth: SimAuth;
  readonly invalidRate: number;
  readonly renameField: { from: string; to: string } | undefined;
  readonly envelope: boolean;
  readonly compression: SimulatorSupplierOptions["compression"];
  readonly method: "GET" | "POST";
  readonly sizeParam: string;
  /** The login or token endpoint, for session and OAuth2 auth. */
  readonly issuer: TokenIssuer | undefined;
  readonly priceFormat: "string" | "number";
  readonly profile: SimulatorSupplierOptions["profile"];
  /** Dates whose dated workbook is not published (`profile-workbooks.ts`). */
  readonly missingDates: readonly string[];
  private readonly bucket: TokenBucket | undefined;

  constructor(
    readonly name: string,
    options: SimulatorSupplierOptions,
    now: () => number,
  ) {
    this.catalog = new Catalog(name, options.size);
    this.faults = new FaultState(name);
    this.faults.set(options.faults ?? {});
    this.pageSize = options.pageSize ?? 100;
    this.pagination = options.pagination ?? "page";
    this.auth = options.auth ?? { type: "none" };
    this.invalidRate = options.invalidRate ?? 0;
    this.renameField = options.renameField;
    this.envelope = options.envelope ?? false;
    this.compression = options.compression;
    this.method = options.method ?? "GET";
    this.sizeParam = options.sizeParam ?? "limit";
    this.issuer =
      this.auth.type === "session" || this.auth.type === "oauth2"
        ? new TokenIssuer(name, this.auth, this.stats, now)
        : undefined;
    this.priceFormat = options.priceFormat ?? "string";
    this.profile = options.profile;
    this.missingDates = options.workbook?.missingDates ?? [];
    this.bucket = options.rateLimit
      ? new TokenBucket(options.rateLimit.requestsPerSecond, options.rateLimit.burst, now)
      : undefined;
  }

  /** False when this request is over the rate-limit budget. */
  admit(): boolean {
    return this.bucket ? this.bucket.tryTake() : true;
  }

  /** The verdict on a catalog request's credentials. */
  verify(req: IncomingMessage, url: URL): Verdict {
    if (this.issuer) return this.issuer.verify(req, url);
    if (this.auth.type === "query")
      return url.searchParams.get(this.auth.param) === this.auth.value ? "ok" : "unauthorized";
    return this.authorized(req.headers) ? "ok" : "unauthorized";
  }

  authorized(headers: IncomingHttpHeaders): boolean {
    const a = this.auth;
    switch (a.type) {
      case "none":
        return true;
      case "query":
      case "session":
      case "oauth2":
        return false;
      case "bearer":
        return headers.authorization === `Bearer ${a.token}`;
      case "header":
        return headers[a.name.toLowerCase()] === a.value;
      case "basic": {
        const expected = Buffer.from(`${a.username}:${a.password}`).toString("base64");
        return headers.authorization === `Basic ${expected}`;
      }
    }
  }

  /** Live records at positions [from, to) in the shape served (invalidation, renaming applied). */
  servedSlice(from: number, to: number): unknown[] {
    const records = this.catalog.slice(from, to);
    if (this.invalidRate <= 0 && !this.renameField) return records;
    return records.map((r) => this.shape(r));
  }

  private shape(record: SimulatorRecord): unknown {
    const index = indexFromSku(record.article);
    let out: Record<string, unknown> = record as unknown as Record<string, unknown>;
    const kind = invalidKindOf(index, this.invalidRate);
    if (kind === "missing-article") {
      const { article: _dropped, ...rest } = record;
      out = rest;
    } else if (kind === "bad-price") out = { ...record, price: { ...record.price, value: "abc" } };
    else if (kind === "bad-currency") out = { ...record, price: { ...record.price, currency: "EURO" } };
    else if (kind === "negative-stock") out = { ...record, stock: { total: -1 - record.stock.total } };
    if (this.renameField) out = renamePath(out, this.renameField.from, this.renameField.to);
    return out;
  }
}

function indexFromSku(sku: string): number {
  return Number(sku.slice(sku.lastIndexOf("-") + 1));
}

/** Copy of `obj` with the value at dot path `from` moved to dot path `to` (no-op when absent). */
export function renamePath(obj: Record<string, unknown>, from: string, to: string): Record<string, unknown> {
  const copy = structuredClone(obj);
  const fromParts = from.split(".");
  let parent: Record<string, unknown> | undefined = copy;
  for (const part of fromParts.slice(0, -1)) {
    const next: unknown = parent?.[part];
    parent = typeof next === "object" && next !== null ? (next as Record<string, unknown>) : undefined;
  }
  const leaf = fromParts[fromParts.length - 1]!;
  if (!parent || !(leaf in parent)) return copy;
  const value = parent[leaf];
  delete parent[leaf];
  const toParts = to.split(".");
  let target: Record<string, unknown> = copy;
  for (const part of toParts.slice(0, -1)) {
    const next = target[part];
    if (typeof next !== "object" || next === null) target[part] = {};
    target = target[part] as Record<string, unknown>;
  }
  target[toParts[toParts.length - 1]!] = value;
  return copy;
}
