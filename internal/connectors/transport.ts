import type { ConnectorDefinition } from "../config/connector-schema.js";
import { resolveAuthHeaders } from "../config/secrets.js";
import type { WalkContext } from "../ingestion/ports.js";
import type { Clock } from "../platform/clock.js";
import { ConfigError, IngestionError, isIngestionError } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";
import type { Metrics } from "../platform/metrics.js";
import { HttpClient, type HttpResponse } from "./http-client.js";
import { retryReason, runWithRetries } from "./retry-policy.js";

/**
 * What every connector of a supplier shares, declarative or hand-written: the
 * HTTP client (pools, rate limiter, origin pinning), the retry policy with its
 * page deadline, retry logs and metrics, and credential resolution. A
 * hand-written module gets this object, so it cannot bypass any of them.
 */

export interface TransportOptions {
  supplier: string;
  definition: ConnectorDefinition;
  connectorsDir: string;
  readSecretEnv: (name: string) => string | undefined;
  log: Logger;
  metrics: Metrics;
  clock: Clock;
  random: () => number;
}

export interface PageFetch<T> {
  url: URL;
  /** 1-based page number, for logs and the deadline message. */
  seq: number;
  ctx: WalkContext;
  /** The walk's signal (ctx.signal, plus the walk's own stop). */
  signal: AbortSignal;
  /** Auth and configured headers; sent to the baseUrl origin only. */
  headers: Record<string, string>;
  accept?: string;
  /** Decodes a 2xx response; runs inside each attempt, so a `CONTRACT` error there costs no retry. */
  decode: (response: HttpResponse) => T;
}

export class Transport {
  readonly http: HttpClient;

  constructor(readonly options: TransportOptions) {
    this.http = new HttpClient({
      supplier: options.supplier,
      definition: options.definition,
      metrics: options.metrics,
      clock: options.clock,
    });
  }

  get supplier(): string {
    return this.options.supplier;
  }

  /**
   * Credentials for this walk. Secret files are re-read every time, so call it
   * at the start of every walk. A missing or unreadable secret is `AUTH`.
   */
  authHeaders(): Record<string, string> {
    const { definition, connectorsDir, readSecretEnv } = this.options;
    try {
      return resolveAuthHeaders(definition.auth, { connectorsDir, readSecretEnv });
    } catch (err) {
      if (err instanceof ConfigError) {
        throw new IngestionError("AUTH", `credentials unavailable: ${err.message}`, { cause: err });
      }
      throw err;
    }
  }

  /**
   * Fetches and decodes one page with the retry policy, all attempts bounded
   * by `timeouts.pageMs`. Resolves with the value and the requests it took;
   * a failure carries them in `IngestionError.attempts`.
   */
  async fetchPage<T>(request: PageFetch<T>): Promise<{ value: T; attempts: number }> {
    const { definition, clock, random, metrics, supplier } = this.options;
    const pageMs = definition.timeouts.pageMs;
    const deadline = new AbortController();
    const deadlineError = () =>
      new IngestionError("DEADLINE", `page ${request.seq} exceeded timeouts.pageMs (${pageMs} ms)`);
    clock.sleep(pageMs, deadline.signal).then(
      () => deadline.abort(deadlineError()),
      () => {},
    );
    const signal = AbortSignal.any([request.signal, deadline.signal]);
    let attempts = 0;
    try {
      const value = await runWithRetries(
        async () => {
          const send: Parameters<HttpClient["send"]>[1] = {
            headers: request.headers,
            signal,
            onRequest: () => {
              attempts++;
            },
          };
          if (request.accept !== undefined) send.accept = request.accept;
          const response = await this.http.send(request.url, send);
          return request.decode(response);
        },
        {
          retry: definition.retry,
          clock,
          random,
          signal,
          deadlineAt: clock.now() + pageMs,
          deadlineError,
          onRetry: ({ attempt, error, delayMs, retryAfterMs }) => {
            const reason = retryReason(error);
            if (retryAfterMs !== undefined) this.http.limiter.pause(retryAfterMs);
            metrics.httpRetries.inc({ supplier, reason });
            request.ctx.log.warn(
              {
                supplier,
                run_id: request.ctx.runId,
                seq: request.seq,
                attempt,
                reason,
                delay_ms: delayMs,
                err: error.message,
              },
              "request failed, retrying",
            );
          },
        },
      );
      return { value, attempts };
    } catch (err) {
      // Only errors born here carry the count; a signal reason (lease lost, shutdown) is not ours to change.
      if (isIngestionError(err) && !(request.signal.aborted && err === request.signal.reason)) {
        err.attempts = attempts;
      }
      throw err;
    } finally {
      deadline.abort();
    }
  }

  async close(): Promise<void> {
    await this.http.close();
  }
}
