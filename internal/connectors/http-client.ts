import type { IncomingHttpHeaders } from "node:http";
import { pipeline, type Readable, type Transform } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import { Pool } from "undici";
import type { ConnectorDefinition } from "../config/connector-schema.js";
import type { Clock } from "../platform/clock.js";
import { IngestionError, isIngestionError } from "../platform/errors.js";
import type { Metrics } from "../platform/metrics.js";
import { OriginPolicy } from "./origin.js";
import { RateLimiter } from "./rate-limiter.js";
import { classifyNetworkError, classifyStatus, parseRetryAfter } from "./retry-policy.js";

/**
 * One supplier's HTTP transport: an undici Pool per allowed origin (keep-alive,
 * `maxConcurrency` connections, TLS verification on), the supplier's rate
 * limiter, origin pinning, manual redirects, decompression and a response size
 * limit enforced while streaming. It sends one logical request (redirect hops
 * included) and classifies every failure where it happens; retrying is the
 * caller's business (`runWithRetries`).
 */

export type TransportDefinition = Pick<
  ConnectorDefinition,
  "baseUrl" | "allowedOrigins" | "rateLimit" | "timeouts" | "maxResponseBytes"
>;

export interface HttpClientOptions {
  supplier: string;
  definition: TransportDefinition;
  metrics: Metrics;
  clock: Clock;
}

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
  /** Credentials and configured headers: attached only when the URL is on the baseUrl origin. */
  headers: Record<string, string>;
  /** Defaults to `application/json`. */
  accept?: string;
  signal: AbortSignal;
  /** Called once per HTTP request actually sent (redirect hops included), before it is sent. */
  onRequest?: () => void;
}

const MAX_REDIRECTS = 3;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** Error bodies are drained (so the connection can be reused) only up to this size. */
const DRAIN_LIMIT = 64 * 1024;

export class HttpClient {
  readonly origins: OriginPolicy;
  readonly limiter: RateLimiter;
  private readonly pools = new Map<string, Pool>();
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
    let current = url;
    this.origins.check(current, "request URL");
    for (let hop = 0; ; hop++) {
      const response = await this.sendOnce(current, options);
      if (!("location" in response)) return response;
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
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(pools.map((p) => p.destroy().catch(() => {})));
  }

  private pool(origin: string): Pool {
    if (this.closed) throw new IngestionError("SHUTDOWN", "connector is closed");
    let pool = this.pools.get(origin);
    if (!pool) {
      const { rateLimit, timeouts } = this.options.definition;
      pool = new Pool(origin, {
        connections: rateLimit.maxConcurrency,
        connect: { timeout: timeouts.connectMs, rejectUnauthorized: true },
        headersTimeout: timeouts.requestMs,
        bodyTimeout: timeouts.requestMs,
        keepAliveTimeout: 10_000,
      });
      this.pools.set(origin, pool);
    }
    return pool;
  }

  /** One HTTP request: a response, or the Location of a redirect. */
  private async sendOnce(url: URL, options: SendOptions): Promise<HttpResponse | { location: string }> {
    const { supplier, metrics, clock, definition } = this.options;
    const release = await this.limiter.acquire(options.signal);
    // requestMs bounds headers and body together; undici's own timeouts are per phase/idle gap.
    const timer = new AbortController();
    const timedOut = new IngestionError(
      "NETWORK",
      `request timed out after ${definition.timeouts.requestMs} ms`,
      {
        retryable: true,
      },
    );
    clock.sleep(definition.timeouts.requestMs, timer.signal).then(
      () => timer.abort(timedOut),
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
        ...(this.origins.isPrimary(url) ? options.headers : {}),
      };
      const res = await this.pool(url.origin)
        .request({ method: "GET", path: `${url.pathname}${url.search}`, headers, signal })
        .catch((err: unknown) => {
          throw this.failure(err, options.signal, timer.signal);
        });
      code = String(res.statusCode);
      const location = headerText(res.headers.location);
      if (REDIRECT_STATUSES.has(res.statusCode) && location !== undefined) {
        await drain(res.body);
        return { location };
      }
      if (res.statusCode < 200 || res.statusCode > 299) {
        await drain(res.body);
        throw classifyStatus(
          res.statusCode,
          parseRetryAfter(headerText(res.headers["retry-after"]), clock.now()),
        );
      }
      const declared = Number(headerText(res.headers["content-length"]));
      if (Number.isFinite(declared) && declared > definition.maxResponseBytes) {
        res.body.destroy();
        throw tooLarge(definition.maxResponseBytes, `declares ${declared} bytes`);
      }
      const body = await readLimited(
        res.body,
        headerText(res.headers["content-encoding"]),
        definition.maxResponseBytes,
      ).catch((err: unknown) => {
        throw this.failure(err, options.signal, timer.signal);
      });
      return {
        url,
        status: res.statusCode,
        headers: res.headers,
        contentType: headerText(res.headers["content-type"]),
        body,
      };
    } finally {
      timer.abort();
      release();
      metrics.httpRequests.inc({ supplier, code });
      metrics.httpRequestDuration.observe({ supplier }, (clock.now() - started) / 1000);
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

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function tooLarge(limit: number, detail: string): IngestionError {
  return new IngestionError("CONTRACT", `response body exceeds maxResponseBytes (${limit}): ${detail}`);
}

async function drain(body: Readable & { dump?: (o: { limit: number }) => Promise<void> }): Promise<void> {
  await (body.dump ? body.dump({ limit: DRAIN_LIMIT }) : Promise.resolve(body.destroy())).catch(() => {});
}

function decoderFor(encoding: string | undefined): Transform | undefined {
  const e = (encoding ?? "identity").trim().toLowerCase();
  if (e === "identity" || e === "") return undefined;
  if (e === "gzip" || e === "x-gzip") return createGunzip();
  if (e === "deflate") return createInflate();
  if (e === "br") return createBrotliDecompress();
  throw new IngestionError("CONTRACT", `unsupported content-encoding ${JSON.stringify(e.slice(0, 50))}`);
}

/**
 * Reads a body, decompressing it, and stops as soon as `limit` decompressed
 * bytes are exceeded: the excess is never buffered and the socket is destroyed.
 */
async function readLimited(body: Readable, encoding: string | undefined, limit: number): Promise<Buffer> {
  let decoder: Transform | undefined;
  try {
    decoder = decoderFor(encoding);
  } catch (err) {
    body.destroy();
    throw err;
  }
  const source: Readable = decoder ? pipeline(body, decoder, () => {}) : body;
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (total > limit) throw tooLarge(limit, `more than ${limit} bytes received`);
      chunks.push(chunk);
    }
  } finally {
    if (!body.readableEnded) body.destroy();
    decoder?.destroy();
  }
  return Buffer.concat(chunks, total);
}
