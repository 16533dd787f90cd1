import type { Clock } from "../../platform/clock.js";
import { httpErrorCode, IngestionError, isIngestionError } from "../../platform/errors.js";

/**
 * The retry policy (docs/failure-modes.md, Suppliers). Errors are classified where they are born
 * (status, network, body); this module only decides what a classified error
 * means for the next attempt.
 *
 * Transient (retried): network errors and timeouts, 408, 425, 429, 500, 502,
 * 503, 504. Everything else is permanent and costs exactly one request.
 */

export interface RetrySettings {
  /** Attempts in all, the first included. */
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** A `Retry-After` longer than this ends the step instead of waiting. */
  maxRetryAfterMs: number;
}

const TRANSIENT_STATUSES = new Set([408, 425, 429, 500, 502, 503, 504]);

/** Node and undici error codes of a request that never got a usable response. */
const TIMEOUT_CODES = new Set([
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "ETIMEDOUT",
]);

/** Full jitter: `random() * min(maxDelayMs, baseDelayMs * 2^(attempt-1))`, `attempt` being the one that failed. */
export function backoffDelay(attempt: number, retry: RetrySettings, random: () => number): number {
  const ceiling = Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** (attempt - 1));
  return Math.floor(random() * ceiling);
}

/** `Retry-After` as delta-seconds or an HTTP date → ms from `nowMs` (≥ 0); undefined when absent or malformed. */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}

/**
 * The error of a non-2xx status, classified: 401/403 → `AUTH`, 429 →
 * `RATE_LIMITED`, otherwise `HTTP_<status>`; retryable for the transient set.
 */
export function classifyStatus(status: number, retryAfterMs: number | undefined): IngestionError {
  const retryable = TRANSIENT_STATUSES.has(status);
  const code =
    status === 401 || status === 403 ? "AUTH" : status === 429 ? "RATE_LIMITED" : httpErrorCode(status);
  const options: { retryable: boolean; retryAfterMs?: number } = { retryable };
  if (retryAfterMs !== undefined) options.retryAfterMs = retryAfterMs;
  return new IngestionError(code, `supplier answered HTTP ${status}`, options);
}

/** A request that failed without a response: always `NETWORK`, always retryable. */
export function classifyNetworkError(err: unknown): IngestionError {
  const code = (err as { code?: unknown })?.code;
  const name = typeof code === "string" ? code : (err as Error)?.name;
  const timeout = typeof code === "string" && TIMEOUT_CODES.has(code);
  return new IngestionError(
    "NETWORK",
    `${timeout ? "request timed out" : "network error"} (${name}): ${(err as Error)?.message ?? String(err)}`,
    { cause: err, retryable: true },
  );
}

/** Low-cardinality reason label of a retry: `timeout`, `network`, or the status as `http_<n>`. */
export function retryReason(err: IngestionError): string {
  if (err.code === "NETWORK") return err.message.startsWith("request timed out") ? "timeout" : "network";
  const status = /HTTP (\d{3})/.exec(err.message)?.[1];
  return status ? `http_${status}` : err.code.toLowerCase();
}

export interface RetryLoopOptions {
  retry: RetrySettings;
  clock: Clock;
  random: () => number;
  /** Aborts on the page deadline or the walk's signal; the loop never sleeps past it. */
  signal: AbortSignal;
  /** Epoch ms after which no further attempt starts (the page deadline). */
  deadlineAt: number;
  /** Builds the error thrown when the deadline ends the loop. */
  deadlineError: () => IngestionError;
  /** Called before sleeping for a retry; `delayMs` includes any `Retry-After`. */
  onRetry: (info: { attempt: number; error: IngestionError; delayMs: number; retryAfterMs?: number }) => void;
}

/**
 * Runs `attempt(n)` (n = 1, 2, …) until it succeeds, fails permanently, or the
 * attempts or the deadline run out. The thrown error is always the last
 * cause, unless the deadline or a `Retry-After` beyond `maxRetryAfterMs`
 * ended the loop. A `Retry-After` is not slept here: `onRetry` pauses the
 * supplier's limiter, which makes the next request wait for it.
 */
export async function runWithRetries<T>(
  attempt: (n: number) => Promise<T>,
  options: RetryLoopOptions,
): Promise<T> {
  const { retry, clock, signal } = options;
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      if (!isIngestionError(err) || !err.retryable || n >= retry.maxAttempts) throw err;
      const retryAfter = err.retryAfterMs;
      if (retryAfter !== undefined && retryAfter > retry.maxRetryAfterMs) {
        throw new IngestionError(
          err.code,
          `${err.message}: Retry-After of ${retryAfter} ms exceeds maxRetryAfterMs (${retry.maxRetryAfterMs} ms)`,
          { cause: err },
        );
      }
      const backoff = backoffDelay(n, retry, options.random);
      const delayMs = Math.max(backoff, retryAfter ?? 0);
      if (clock.now() + delayMs >= options.deadlineAt) throw options.deadlineError();
      const info: { attempt: number; error: IngestionError; delayMs: number; retryAfterMs?: number } = {
        attempt: n,
        error: err,
        delayMs,
      };
      if (retryAfter !== undefined) info.retryAfterMs = retryAfter;
      options.onRetry(info);
      await clock.sleep(backoff, signal).catch((reason) => {
        throw signal.aborted ? signal.reason : reason;
      });
    }
  }
}
