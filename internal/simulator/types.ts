/**
 * Public types of the supplier simulator: a deterministic fake supplier API
 * served over real HTTP on loopback, for the demo, the tests, the fault suite
 * and the benchmarks.
 *
 * Glossary:
 * - *offer index*: the stable identity of an offer (its SKU is derived from it);
 *   indices are never reused, so an offer added after a removal is a new SKU.
 * - *position*: the 0-based place of a live offer in the served catalog order.
 * - *page*: the 1-based number of a request within a walk (page 1 = first
 *   request of a walk, whatever the pagination type). Faults name pages.
 * - *walk*: one client pass over the catalog, from the first page to the page
 *   the pagination type treats as the end.
 */

/** How the simulator checks credentials; wrong or missing credentials answer 401. */
export type SimAuth =
  | { type: "none" }
  | { type: "bearer"; token: string }
  | { type: "header"; name: string; value: string }
  | { type: "basic"; username: string; password: string }
  /** Systeme-style key in the query string (`accessCode=<value>`). */
  | { type: "query"; param: string; value: string }
  | SimSessionAuth
  | SimOAuth2Auth;

/**
 * A session login (ETM's `POST /user/login?log=…&pwd=…`, IEK's form login
 * that sets a cookie): the login route checks `credentials`, issues a fresh
 * token, and catalog requests must carry a live one.
 */
export interface SimSessionAuth {
  type: "session";
  /** Route of the login under the supplier, e.g. `/api/v1/user/login`. */
  loginPath: string;
  /** `POST` when absent. */
  loginMethod?: "GET" | "POST";
  /**
   * Where the login reads `credentials`: the query (ETM, default), a form body, a JSON body, or
   * the path segment after `loginPath` (DKC's `GET /auth.access.token/{masterKey}`; then
   * `credentials` holds one value).
   */
  credentialsIn?: "query" | "form" | "json" | "path";
  credentials: Record<string, string>;
  /** Where the login answer puts the token: JSON body at `path` (default `data.session`), a header, a cookie. */
  tokenIn?: { body: string } | { header: string } | { cookie: string };
  /** A JSON login answer holds the token alone (DKC's `{access_token}`), without ETM's `status` block. */
  tokenOnly?: boolean;
  /** How catalog requests must carry it (default `{ query: "session-id" }`). */
  sendAs?: { query: string } | { header: string; prefix?: string } | { cookie: string };
  /** A token expires after this many catalog requests made with it. */
  expireAfterRequests?: number;
  /** A token expires this many ms (simulator clock) after its login. */
  expireAfterMs?: number;
  /** How an expired or unknown token is answered: HTTP 401 (default) or ETM's 200 with `status.code` 403. */
  expiredAs?: "401" | "body403";
  /** Logins closer together than this are violations: counted, and answered 429. */
  minLoginIntervalMs?: number;
  /** Answer the first `times` logins with `status` (e.g. 503), before checking anything else. */
  failLogins?: { status: number; times: number };
}

/** An OAuth2 client-credentials token endpoint (form POST, client in the form or HTTP Basic). */
export interface SimOAuth2Auth {
  type: "oauth2";
  tokenPath: string;
  clientId: string;
  clientSecret: string;
  /** `expires_in` of issued tokens (default 3600); a token is refused 401 after it. */
  expiresInSeconds?: number;
  /** A token is refused 401 after this many catalog requests made with it. */
  expireAfterRequests?: number;
}

/**
 * `stripe`: `{object: "list", data: [...], has_more}`, next page by
 * `starting_after=<last id>`; `total-pages`: `page` plus `meta.total_pages`;
 * `offset-total`: `offset` plus `meta.total`; `cursor-header`: the next
 * cursor in the `X-Next-Cursor` header.
 */
export type SimPagination =
  | "page"
  | "offset"
  | "cursor"
  | "link"
  | "none"
  | "stripe"
  | "total-pages"
  | "offset-total"
  | "cursor-header";

/**
 * Faults of one supplier, settable at any time (`{}` clears them). Every
 * fault is deterministic: counters and a PRNG seeded from the supplier name.
 */
export interface SimulatorFaults {
  /** Answer `code` (JSON body); on every page, or only `onPage`; with probability `rate`; at most `times` times. */
  status?: { code: number; rate?: number; onPage?: number; times?: number };
  /** Answer 429 with `Retry-After` in seconds (default 1) or as an HTTP date; at most `times` times. */
  retryAfter?: { seconds?: number; httpDate?: boolean; times?: number; onPage?: number };
  /** Delay every request by this many ms before anything else. */
  latencyMs?: number;
  /** Never answer this page until the fault is cleared (then it is served) or the server closes. */
  hangOnPage?: number;
  /** Send a Content-Length larger than the body, then destroy the socket. */
  truncateOnPage?: number;
  /** Answer 200 with a body that is not valid JSON. */
  invalidJsonOnPage?: number;
  /** Answer 200 with `{ "oops": [] }` (no `data.items`). */
  missingRecordsPathOnPage?: number;
  /** Content-Type of every answer; an `html` type gets an HTML body. */
  contentType?: string;
  /** Stream a JSON body of exactly this many bytes (chunked, never buffered whole). */
  oversizedBodyBytes?: number;
  /** Destroy the socket without any response. */
  resetOnPage?: number;
  /** Answer every request with 302 and this Location. */
  redirectTo?: string;
  /** Override the `Link` next URL (link pagination, while more pages remain). */
  linkTo?: string;
  /** Override `next_cursor` (cursor pagination, while more pages remain). */
  cursorValue?: string;
  /** Answer 200 with an ETM-style error body `{status: {code, message}}` and no data. */
  bodyError?: { code: number; message?: string; onPage?: number; times?: number };
  /** Answer this page with a gzip decompression bomb (valid JSON, ratio about 1000:1). */
  bombOnPage?: number;
}

/** Real-API shapes served besides `/v1/offers` (see `profiles.ts`). */
export type SimProfile = "etm" | "iek" | "systeme" | "ekf" | "keaz" | "iek-pricelist" | "rs24" | "dkc";

export interface SimulatorSupplierOptions {
  /** Number of offers of the pristine catalog (indices 0..size-1). */
  size: number;
  /** Also answer the routes of this real API, from the same catalog. */
  profile?: SimProfile;
  /** Workbook profiles (`profile-workbooks.ts`): dates (`YYYY-MM-DD`) whose dated file answers 404. */
  workbook?: { missingDates?: string[] };
  /** Default `limit` of a page; 100 when absent. */
  pageSize?: number;
  /** Pagination style; `page` when absent. */
  pagination?: SimPagination;
  auth?: SimAuth;
  /** Server-side token bucket; a request over budget answers 429 with `Retry-After: 1`. */
  rateLimit?: { requestsPerSecond: number; burst: number };
  /** Fraction (0..1) of records served invalid, evenly spread by index, kinds rotating. */
  invalidRate?: number;
  /** Schema drift: serve the field at dot path `from` under dot path `to` instead. */
  renameField?: { from: string; to: string };
  /**
   * How `price.value` is served: a JSON string (default, `"12.50"`) or a JSON number
   * literal with exactly the same digits (`12.50`, `4821.1234567890123457`), as
   * suppliers that send prices as numbers do.
   */
  priceFormat?: "string" | "number";
  faults?: SimulatorFaults;
  /** Wrap every catalog answer ETM-style: `{status: {code: 200, message: "OK"}, data: …}`. */
  envelope?: boolean;
  /** Compress catalog answers when the request's Accept-Encoding allows it. */
  compression?: "gzip" | "deflate" | "deflate-raw" | "br";
  /** Method the catalog route answers (default GET); other methods get 405. POST bodies are recorded. */
  method?: "GET" | "POST";
  /** Name of the page-size parameter of `page`, `link` and `total-pages` (default `limit`). */
  sizeParam?: string;
}

export interface SimulatorMutation {
  /** Change the price of the next `changePrices` live offers, in a rotating order. */
  changePrices?: number;
  /** Change the stock of this many live offers, in a rotating order from the catalog's end. */
  changeStock?: number;
  /** Remove this many offers from the end of the catalog. */
  remove?: number;
  /** Append this many new offers (new indices, never reused). */
  add?: number;
  /** Back to the pristine catalog (applied before the other fields). */
  reset?: boolean;
  /**
   * Serve these exact price texts (SKU → decimal text, any number of digits) instead
   * of the generated prices, until a `reset` or the next `changePrices` of that offer.
   */
  setPrices?: Record<string, string>;
  /** Serve these currency codes (SKU → code) instead of `EUR`, until a `reset`. */
  setCurrencies?: Record<string, string>;
}

export interface SimulatorWalk {
  /** ms timestamp (simulator clock) of the first-page request. */
  startedAt: number;
  /** ms timestamp of the terminal page served successfully; null while open or if never finished. */
  endedAt: number | null;
}

export interface SimulatorStats {
  requests: number;
  /** HTTP status answered → count (sockets destroyed without a response are not counted here). */
  byStatus: Record<number, number>;
  /** First pages (position 0) served with 200: a refused or faulted first page starts no walk. */
  walksStarted: number;
  /**
   * Terminal pages served with 200: the empty page (`page`), the short page
   * (`offset`), `next_cursor: null` (`cursor`), no `Link` (`link`), the one
   * response (`none`).
   */
  walksCompleted: number;
  /** One entry per walk started; a completion closes the most recent open walk. */
  walks: SimulatorWalk[];
  /** Requests in flight right now. */
  concurrency: number;
  /** Highest number of requests in flight at once. */
  maxConcurrency: number;
  /** Requests refused by the rate limit (429). */
  overBudget: number;
  /** ms timestamps of every request, the last 100k. */
  requestTimes: number[];
  /** Login (or token) requests received, their failures (bad credentials), and those sooner than `minLoginIntervalMs`. */
  logins: number;
  loginFailures: number;
  loginViolations: number;
  /** Tokens issued, in order (tests look for them in output). */
  issuedTokens: string[];
  /** Catalog requests refused because their token had expired or was unknown. */
  expiredRequests: number;
  /** The last 20 catalog request bodies (POST), with their content types. */
  bodies: { contentType: string | undefined; body: string }[];
  /** The last 20 catalog request URLs (path and query), for assertions. */
  urls: string[];
}

/** A record as served by default (before invalidation and renaming). */
export interface SimulatorRecord {
  article: string;
  title: string;
  price: { value: string; currency: string };
  stock: { total: number };
}

export interface Simulator {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  /** The connector baseUrl of a supplier: `http://127.0.0.1:<port>/<supplier>`. */
  baseUrl(supplier: string): string;
  /** Create or replace a supplier (pristine catalog, fresh stats). */
  configure(name: string, options: SimulatorSupplierOptions): void;
  mutate(name: string, m: SimulatorMutation): void;
  setFaults(name: string, faults: SimulatorFaults): void;
  stats(name: string): SimulatorStats;
  resetStats(name: string): void;
  /** The live catalog as served (valid shape, in served order), for assertions. */
  offers(name: string): SimulatorRecord[];
  /** Number of live offers. */
  liveCount(name: string): number;
  /** The file server, a second loopback origin (`http://127.0.0.1:<port>`) serving export jobs' files. */
  readonly filesUrl: string;
  /** A supplier's export jobs (see `export-jobs.ts`), oldest first. */
  exportJobs(name: string): SimExportJob[];
  /** Ends hanging requests and open sockets; safe to call twice. */
  close(): Promise<void>;
}

/** An export job of the simulator (`export-jobs.ts`). */
export interface SimExportJob {
  id: string;
  /** The `<template>` of `POST /api/v1/job/create/<template>`. */
  template: string;
  polls: number;
  /** One entry per download of its file: what carried credentials (empty: none arrived). */
  downloads: { credentials: string[] }[];
}

export interface StartSimulatorOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  /** Port of the file server (export downloads); 0 (default) picks a free one. */
  filesPort?: number;
  /** Default 127.0.0.1. */
  host?: string;
  suppliers?: Record<string, SimulatorSupplierOptions>;
  /** ms since the epoch; drives stats timestamps, rate limiting and HTTP dates. Default `Date.now`. */
  clock?: () => number;
  /**
   * How long an idle keep-alive connection stays open after a response was written (Node's
   * `keepAliveTimeout`, default 5,000 ms, as Apache's): a short one closes under a client
   * that still reads the last response slowly.
   */
  keepAliveTimeoutMs?: number;
}
