import type { IncomingHttpHeaders } from "node:http";
import { pipeline, type Readable, type Transform } from "node:stream";
import { Pool } from "undici";
import { STREAMED_MAX_RESPONSE_BYTES } from "../../feeds/format-schema.js";
import type { ResponseValidators } from "../../ingestion/ports.js";
import type { Metrics } from "../../observability/metrics.js";
import type { Clock } from "../../platform/clock.js";
import {
  contentCodings,
  contentDecoders,
  exceedsDecompressionRatio,
  MAX_DECOMPRESSION_RATIO,
} from "../../platform/content-encoding.js";
import { errorMessage, IngestionError, isIngestionError } from "../../platform/errors.js";
import type { SecretRegistry } from "../../platform/redact.js";
import { type ConnectorDefinition, DEFAULT_MAX_RESPONSE_BYTES } from "../schema/connector-schema.js";
import { OriginPolicy } from "./origin.js";
import { RateLimiter } from "./rate-limiter.js";
import { classifyNetworkError, classifyStatus, parseRetryAfter } from "./retry-policy.js";

/**
 * One supplier's HTTP client, the lowest part of its `Transport` (transport.ts): an undici Pool per allowed origin (keep-alive,
 * `maxConcurrency` connections, TLS verification on), the supplier's rate
 * limiter, origin pinning, manual redirects, decompression and a response size
 * limit enforced while streaming. It sends one logical request (redirect hops
 * included) and classifies every failure where it happens; retrying is the
 * caller's business (`runWithRetries`).
 */

/** The parts of a connector file the HTTP client reads. */
export type HttpClientDefinition = Pick<
  ConnectorDefinition,
  "baseUrl" | "allowedOrigins" | "rateLimit" | "timeouts" | "maxResponseBytes"
>;

export interface HttpClientOptions {
  supplier: string;
  definition: HttpClientDefinition;
  metrics: Metrics;
  clock: Clock;
  /** Scrubs the URLs and errors told to `observer`. */
  secrets: SecretRegistry;
  /** Told of every HTTP request sent, after it ended (`preview` lists them). */
  observer?: (event: RequestEvent) => void;
}

/** One HTTP request as `preview` shows it: secrets already redacted from the URL. */
export interface RequestEvent {
  method: string;
  url: string;
  /** HTTP status, or null when no response arrived. */
  status: number | null;
  /** Decompressed body bytes read. */
  bytes: number;
  ms: number;
  /** Why it failed, when it did (already redacted). */
  error?: string;
  /**
   * The start of the supplier's answer when it was not 2xx (a 401's reason, say): at most
   * {@link ANSWER_EXCERPT_CHARS} characters, whitespace collapsed, secrets redacted.
   */
  answer?: string;
}

/** Longest excerpt of a non-2xx answer told to an observer (`preview`). */
export const ANSWER_EXCERPT_CHARS = 300;
/** Bytes of a non-2xx body read for that excerpt; the rest is drained as before. */
const ANSWER_EXCERPT_BYTES = 4 * 1024;

/**
 * A 2xx response whose body is handed over unread (a feed, docs/feeds.md): still
 * compressed as sent (`contentEncoding` says how), never buffered. Whoever
 * gets it must consume or destroy `body`; the connection is busy until then.
 */
export interface StreamedResponse {
  url: URL;
  status: number;
  headers: IncomingHttpHeaders;
  contentType: string | undefined;
  contentEncoding: string | undefined;
  body: Readable;
}

/** Marker of a value replaced in URLs shown to people. */
export const REDACTED = "[REDACTED]";

export interface HttpResponse {
  /** Final URL, after redirects. */
  url: URL;
  status: number;
  headers: IncomingHttpHeaders;
  contentType: string | undefined;
  /** Decompressed body, at most `maxResponseBytes`. */
  body: Buffer;
}

export interface SendOptions {
  /** `GET` by default. */
  method?: "GET" | "POST";
  /** Request body of a POST, with its content type. */
  body?: { contentType: string; data: string };
  /** Credentials and configured headers: attached only when the URL is on the baseUrl origin. */
  headers: Record<string, string>;
  /** Secret query parameters (auth): added only when the URL is on the baseUrl origin, redacted when shown. */
  secretQuery?: Record<string, string>;
  /** Non-2xx statuses answered as a response (body read) instead of thrown: conditions look at them. */
  passStatuses?: ReadonlySet<number>;
  /** Defaults to `application/json`. */
  accept?: string;
  /**
   * Validators of an earlier response (docs/conditional-requests.md), sent back as `If-None-Match` /
   * `If-Modified-Since` on every hop (they are no credentials). Only a request that sent
   * one of them takes a `304 Not Modified` as a response; anywhere else 304 is an error.
   */
  conditional?: ResponseValidators | undefined;
  signal: AbortSignal;
  /** Called once per HTTP request actually sent (redirect hops included), before it is sent. */
  onRequest?: () => void;
  /** Called once per HTTP request when it ended, like `HttpClientOptions.observer`. */
  onEvent?: (event: RequestEvent) => void;
}

const MAX_REDIRECTS = 3;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** Error bodies are drained (so the connection can be reused) only up to this size. */
const DRAIN_LIMIT = 64 * 1024;

/** The URL as people may see it: secret query parameters replaced by {@link REDACTED}. */
export function displayUrl(url: URL, secretParams: Iterable<string> = []): string {
  const shown = new URL(url);
  for (const name of secretParams) if (shown.searchParams.has(name)) shown.searchParams.set(name, REDACTED);
  if (shown.password) shown.password = REDACTED;
  return shown.href.replaceAll(encodeURIComponent(REDACTED), REDACTED);
}

export class HttpClient {
  readonly origins: OriginPolicy;
  readonly limiter: RateLimiter;
  private readonly pools = new Map<string, Pool>();
  /** Pools of streamed bodies: a feed holds its connection for the whole file, so never one that pages and enrichments need. */
  private readonly streamPools = new Map<string, Pool>();
  private closed = false;

  constructor(private readonly options: HttpClientOptions) {
    const def = options.definition;
    this.origins = new OriginPolicy(def.baseUrl, def.allowedOrigins);
    this.limiter = new RateLimiter({
      ...def.rateLimit,
      clock: options.clock,
      onWait: (ms) => {
        if (ms > 0) options.metrics.rateLimitWait.inc({ supplier: options.supplier }, ms / 1000);
      },
    });
  }

  /**
   * GETs `url`, following at most 3 redirects, each checked against origin
   * pinning before it is sent. Resolves only with a 2xx response.
   * @throws IngestionError classified (`AUTH`, `RATE_LIMITED`, `HTTP_<n>`,
   * `NETWORK`, `CONTRACT`), or the signal's reason when it aborted.
   */
  async send(url: URL, options: SendOptions): Promise<HttpResponse> {
    return (await this.follow(url, options, false)) as HttpResponse;
  }

  /**
   * Like {@link send}, but the 2xx body is not read: it is returned as a stream,
   * still compressed (a feed reader undoes `Content-Encoding` itself, so nothing
   * is decompressed twice), bounded by its reader. Rate limit, origin pinning,
   * redirects, credentials, metrics and `requestMs` (up to the response headers;
   * the body is bounded by undici's idle timeout of `requestMs`) are the same.
   */
  async sendStream(url: URL, options: SendOptions): Promise<StreamedResponse> {
    return (await this.follow(url, options, true)) as StreamedResponse;
  }

  private async follow(
    url: URL,
    options: SendOptions,
    stream: boolean,
  ): Promise<HttpResponse | StreamedResponse> {
    let current = url;
    let hopOptions = options;
    this.origins.check(current, "request URL");
    for (let hop = 0; ; hop++) {
      const response = await this.sendOnce(current, hopOptions, stream);
      if (!("location" in response)) return response;
      // 307/308 repeat the request as it was; 301/302/303 after a POST continue as a GET (RFC 9110 §15.4).
      if (response.status !== 307 && response.status !== 308 && hopOptions.method === "POST") {
        const { body: _body, ...rest } = hopOptions;
        hopOptions = { ...rest, method: "GET" };
      }
      if (hop >= MAX_REDIRECTS) {
        throw new IngestionError(
          "CONTRACT",
          `more than ${MAX_REDIRECTS} redirects, last to ${response.location}`,
        );
      }
      current = this.origins.resolve(response.location, current, "redirect Location");
    }
  }

  /** Closes every pool. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const pools = [...this.pools.values(), ...this.streamPools.values()];
    this.pools.clear();
    this.streamPools.clear();
    await Promise.all(pools.map((p) => p.destroy().catch(() => {})));
  }

  private pool(origin: string, stream = false): Pool {
    if (this.closed) throw new IngestionError("SHUTDOWN", "connector is closed");
    const pools = stream ? this.streamPools : this.pools;
    let pool = pools.get(origin);
    if (!pool) {
      const { rateLimit, timeouts } = this.options.definition;
      const created = new Pool(origin, {
        connections: stream ? 1 : rateLimit.maxConcurrency,
        connect: { timeout: timeouts.connectMs, rejectUnauthorized: true },
        headersTimeout: timeouts.requestMs,
        bodyTimeout: timeouts.requestMs,
        keepAliveTimeout: 10_000,
      });
      // Dropped once idle: its last connection closed (keep-alive over) with nothing queued.
      // A daemon's suppliers tick far apart, and an idle pool kept its request queue (16 kB)
      // and clients between ticks: 151 → 127 MB RSS for 1,000 idle suppliers (bench/README.md, Idle pools).
      // The next request opens a new pool, as a new connection it would need anyway.
      const dropWhenIdle = () => {
        const { connected, size } = created.stats;
        if (connected > 0 || size > 0 || pools.get(origin) !== created) return;
        pools.delete(origin);
        created.close().catch(() => {});
      };
      created.on("disconnect", dropWhenIdle);
      created.on("connectionError", dropWhenIdle);
      pools.set(origin, created);
      pool = created;
    }
    return pool;
  }

  /** Pools open now (kept while a connection is open or a request queued): for tests. */
  get openPools(): number {
    return this.pools.size + this.streamPools.size;
  }

  /** One HTTP request: a response, or the Location of a redirect. */
  private async sendOnce(
    url: URL,
    options: SendOptions,
    stream = false,
  ): Promise<HttpResponse | StreamedResponse | { location: string; status: number }> {
    const { supplier, metrics, clock, definition } = this.options;
    const method = options.method ?? "GET";
    const primary = this.origins.isPrimary(url);
    const secretQuery = primary ? (options.secretQuery ?? {}) : {};
    let target = url;
    if (Object.keys(secretQuery).length > 0) {
      target = withQuery(url, secretQuery);
    }
    let status: number | null = null;
    let bytes = 0;
    let failure: unknown;
    let answer: string | undefined;
    const release = await this.limiter.acquire(options.signal);
    // requestMs bounds headers and body together (a stream: the headers); undici's own timeouts are per
    // phase/idle gap. `timer` aborts only when the time is up; `timerDone` cancels the countdown.
    const timer = new AbortController();
    const timerDone = new AbortController();
    // The error is built only when the time is up: an error's stack trace, built for every
    // request, was a fifth of a millisecond a page in the worker's profile.
    clock.sleep(definition.timeouts.requestMs, timerDone.signal).then(
      () =>
        timer.abort(
          new IngestionError("NETWORK", `request timed out after ${definition.timeouts.requestMs} ms`, {
            retryable: true,
          }),
        ),
      () => {},
    );
    const signal = AbortSignal.any([options.signal, timer.signal]);
    const started = clock.now();
    let code = "error";
    try {
      options.onRequest?.();
      const headers: Record<string, string> = {
        accept: options.accept ?? "application/json",
        "accept-encoding": "gzip, deflate, br",
        "user-agent": "supplier-sync",
        ...(primary ? options.headers : {}),
      };
      if (options.body !== undefined) headers["content-type"] = options.body.contentType;
      const sentConditional = addConditionalHeaders(headers, options.conditional);
      const res = await this.pool(url.origin, stream)
        .request({
          method,
          path: `${target.pathname}${target.search}`,
          headers,
          signal,
          ...(options.body !== undefined ? { body: options.body.data } : {}),
        })
        .catch((err: unknown) => {
          throw this.failure(err, options.signal, timer.signal);
        });
      code = String(res.statusCode);
      status = res.statusCode;
      const location = headerText(res.headers.location);
      if (REDIRECT_STATUSES.has(res.statusCode) && location !== undefined) {
        await drain(res.body);
        return { location, status: res.statusCode };
      }
      const passed =
        (options.passStatuses?.has(res.statusCode) ?? false) || (sentConditional && res.statusCode === 304);
      if (!passed && (res.statusCode < 200 || res.statusCode > 299)) {
        if (this.options.observer || options.onEvent) {
          answer = await answerExcerpt(res.body, headerText(res.headers["content-encoding"]));
        }
        await drain(res.body);
        throw classifyStatus(
          res.statusCode,
          parseRetryAfter(headerText(res.headers["retry-after"]), clock.now()),
        );
      }
      if (stream) {
        return {
          url,
          status: res.statusCode,
          headers: res.headers,
          contentType: headerText(res.headers["content-type"]),
          contentEncoding: headerText(res.headers["content-encoding"]),
          body: res.body,
        };
      }
      // A feed connector's 4 GiB default bounds its feed; its other bodies (logins, enrichments,
      // export polls) are read whole and keep the default of a body read whole.
      const maxBytes =
        definition.maxResponseBytes === STREAMED_MAX_RESPONSE_BYTES
          ? DEFAULT_MAX_RESPONSE_BYTES
          : definition.maxResponseBytes;
      const declared = Number(headerText(res.headers["content-length"]));
      if (Number.isFinite(declared) && declared > maxBytes) {
        res.body.destroy();
        throw tooLarge(maxBytes, `declares ${declared} bytes`);
      }
      const body = await readLimited(res.body, headerText(res.headers["content-encoding"]), maxBytes).catch(
        (err: unknown) => {
          throw this.failure(err, options.signal, timer.signal);
        },
      );
      bytes = body.length;
      return {
        url,
        status: res.statusCode,
        headers: res.headers,
        contentType: headerText(res.headers["content-type"]),
        body,
      };
    } catch (err) {
      failure = err;
      throw err;
    } finally {
      timerDone.abort();
      release();
      const ms = clock.now() - started;
      metrics.httpRequests.inc({ supplier, code });
      metrics.httpRequestDuration.observe({ supplier }, ms / 1000);
      if (this.options.observer || options.onEvent) {
        const event: RequestEvent = {
          method,
          url: this.options.secrets.safeText(displayUrl(target, Object.keys(secretQuery))),
          status,
          bytes,
          ms,
        };
        if (failure !== undefined) event.error = this.options.secrets.safeText(errorMessage(failure), 500);
        if (answer !== undefined && answer !== "") {
          event.answer = this.options.secrets.safeText(redactSecretFields(answer), ANSWER_EXCERPT_CHARS);
        }
        this.options.observer?.(event);
        options.onEvent?.(event);
      }
    }
  }

  /** Classifies a failure of the request or its body, preferring the abort reason that caused it. */
  private failure(err: unknown, outer: AbortSignal, timer: AbortSignal): unknown {
    if (outer.aborted) return outer.reason;
    if (timer.aborted) return timer.reason;
    if (isIngestionError(err)) return err;
    const code = (err as { code?: unknown })?.code;
    if (typeof code === "string" && code.startsWith("Z_")) {
      return new IngestionError("CONTRACT", `response body cannot be decompressed (${code})`, { cause: err });
    }
    return classifyNetworkError(err);
  }
}

/**
 * Adds `If-None-Match` / `If-Modified-Since` for the validators given; true when one was
 * added (then, and only then, a 304 is an answer). Every request path of a one-request
 * walk uses it, a streamed feed's included.
 */
export function addConditionalHeaders(
  headers: Record<string, string>,
  validators: ResponseValidators | undefined,
): boolean {
  if (validators?.etag) headers["if-none-match"] = validators.etag;
  if (validators?.lastModified) headers["if-modified-since"] = validators.lastModified;
  return Boolean(validators?.etag || validators?.lastModified);
}

/** The `ETag` and `Last-Modified` of a response, verbatim (docs/conditional-requests.md). */
export function validatorsOf(response: Pick<HttpResponse, "headers">): ResponseValidators {
  return {
    etag: headerText(response.headers.etag) ?? null,
    lastModified: headerText(response.headers["last-modified"]) ?? null,
  };
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function tooLarge(limit: number, detail: string): IngestionError {
  return new IngestionError("CONTRACT", `response body exceeds maxResponseBytes (${limit}): ${detail}`);
}

/**
 * The first bytes of a non-2xx body as text, whitespace collapsed; empty when the body is
 * compressed (not worth a decoder for an excerpt) or cannot be read. Never throws.
 */
async function answerExcerpt(body: Readable, encoding: string | undefined): Promise<string> {
  const codings = contentCodings(encoding);
  if (codings.length > 0) return `(${codings.reverse().join(", ")}-encoded body)`;
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
      chunks.push(buffer);
      size += buffer.length;
      if (size >= ANSWER_EXCERPT_BYTES) break;
    }
  } catch {
    // An excerpt is a courtesy: a body that fails to read gives none.
  }
  return Buffer.concat(chunks).subarray(0, ANSWER_EXCERPT_BYTES).toString("utf8").replace(/\s+/g, " ").trim();
}

/** Values of JSON or form fields named like secrets (token, session, password, key…), replaced. */
export function redactSecretFields(text: string): string {
  const names = "[\\w-]*(?:token|session|secret|password|passwd|pwd|api[_-]?key|access[_-]?code|auth)[\\w-]*";
  return text
    .replace(new RegExp(`("${names}"\\s*:\\s*)"(?:[^"\\\\]|\\\\.)*"`, "gi"), '$1"[redacted]"')
    .replace(new RegExp(`\\b(${names})=[^&\\s"]+`, "gi"), "$1=[redacted]");
}

async function drain(body: Readable & { dump?: (o: { limit: number }) => Promise<void> }): Promise<void> {
  await (body.dump ? body.dump({ limit: DRAIN_LIMIT }) : Promise.resolve(body.destroy())).catch(() => {});
}

/**
 * Reads a body, decompressing it, and stops as soon as `limit` decompressed
 * bytes are exceeded, or the body decompresses to more than
 * {@link MAX_DECOMPRESSION_RATIO} times its compressed size: the excess is never
 * buffered (zlib hands out small chunks) and the socket is destroyed.
 */
async function readLimited(body: Readable, encoding: string | undefined, limit: number): Promise<Buffer> {
  let decoders: Transform[];
  try {
    decoders = contentDecoders(encoding, "response");
  } catch (err) {
    body.destroy();
    throw err;
  }
  const decoding = decoders.length > 0;
  let compressed = 0;
  if (decoding)
    body.on("data", (chunk: Buffer) => {
      compressed += chunk.length;
    });
  const source = decoders.reduce<Readable>((stream, decoder) => pipeline(stream, decoder, () => {}), body);
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (total > limit) throw tooLarge(limit, `more than ${limit} bytes received`);
      if (decoding && exceedsDecompressionRatio(total, compressed)) {
        throw new IngestionError(
          "CONTRACT",
          `response body decompresses more than ${MAX_DECOMPRESSION_RATIO}:1 (${total} bytes from ${compressed}): refused as a decompression bomb`,
        );
      }
      chunks.push(chunk);
    }
  } finally {
    if (!body.readableEnded) body.destroy();
    for (const decoder of decoders) decoder.destroy();
  }
  return Buffer.concat(chunks, total);
}

/**
 * `url` with `params` set, the rest of its query left byte for byte: going through
 * `searchParams` would re-encode it (the literal separator of `{skus}` included, docs/connectors.md, Requests).
 */
function withQuery(url: URL, params: Record<string, string>): URL {
  const target = new URL(url);
  const names = new Set(Object.keys(params));
  const kept = target.search
    .slice(1)
    .split("&")
    .filter((pair) => pair !== "" && !names.has(queryName(pair)));
  const added = Object.entries(params).map(([k, v]) => new URLSearchParams({ [k]: v }).toString());
  target.search = [...kept, ...added].join("&");
  return target;
}

function queryName(pair: string): string {
  const raw = (pair.split("=")[0] ?? "").replace(/\+/g, " ");
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}
