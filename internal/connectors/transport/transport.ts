import type { ResponseValidators, WalkContext } from "../../ingestion/ports.js";
import type { Metrics } from "../../observability/metrics.js";
import type { Clock } from "../../platform/clock.js";
import { IngestionError, isIngestionError } from "../../platform/errors.js";
import type { Logger } from "../../platform/logger.js";
import type { SecretRegistry } from "../../platform/redact.js";
import type { ConnectorDefinition } from "../schema/connector-schema.js";
import { type Authenticator, authUnavailable, createAuthenticator, type LoginExchange } from "./auth.js";
import {
  applyErrorRules,
  bodyForConditions,
  conditionStatuses,
  matchesCondition,
  needsBody,
} from "./error-rules.js";
import {
  HttpClient,
  type HttpResponse,
  type RequestEvent,
  type SendOptions,
  type StreamedResponse,
  validatorsOf,
} from "./http-client.js";
import { classifyStatus, parseRetryAfter, retryReason, runWithRetries } from "./retry-policy.js";

/**
 * What every connector of a supplier shares, declarative or hand-written: the
 * HTTP client (pools, rate limiter, origin pinning), the retry policy with its
 * page deadline, retry logs and metrics, and credential resolution. A
 * hand-written module gets this object, so it cannot bypass any of them.
 */

export interface TransportOptions {
  supplier: string;
  /** Validated connector file. */
  definition: ConnectorDefinition;
  /** Folder of the connector files; relative secret files are resolved against it. */
  connectorsDir: string;
  /** Reads secret env vars named by the connector file. */
  readSecretEnv: (name: string) => string | undefined;
  /** The app's redaction registry: credentials register what they resolve, messages are scrubbed with it. */
  secrets: SecretRegistry;
  log: Logger;
  metrics: Metrics;
  /** Time source of the rate limiter, backoff, deadlines and token lifetimes. */
  clock: Clock;
  /** Jitter source in [0, 1). */
  random: () => number;
  /** Told of every HTTP request sent, secrets redacted (`preview`). */
  observer?: (event: RequestEvent) => void;
}

export interface PageFetch<T> {
  url: URL;
  /** 1-based page number, for logs and the deadline message. */
  seq: number;
  ctx: WalkContext;
  /** The walk's signal (ctx.signal, plus the walk's own stop). */
  signal: AbortSignal;
  /** Configured headers; sent to the baseUrl origin only. Credentials are added here, not by the caller. */
  headers: Record<string, string>;
  accept?: string;
  /** `GET` by default. */
  method?: "GET" | "POST";
  /** Body of a POST with its content type. */
  body?: { contentType: string; data: string };
  /** Decodes a 2xx response; runs inside each attempt, so a `CONTRACT` error there costs no retry. */
  decode: (response: HttpResponse) => T;
  /**
   * Validators to send back (docs/conditional-requests.md). When one is set, a `304 Not Modified`
   * skips the response conditions and reaches `decode` (status 304, empty body).
   * Prefer {@link Transport.fetchConditional}.
   */
  conditional?: ResponseValidators | null | undefined;
}

/** What a conditional fetch got: the decoded value, or the supplier's word that nothing changed. */
export type ConditionalFetch<T> = { attempts: number; validators: ResponseValidators } & (
  | { notModified: false; value: T }
  | { notModified: true }
);
/** A request whose 2xx body is handed over as a stream (a feed, docs/feeds.md). */
export type StreamFetch = Omit<PageFetch<never>, "decode">;

/** A response matched `auth.expiredWhen`: log in once more and repeat. Never retried as such. */
class CredentialsExpired extends IngestionError {
  constructor(readonly generation: number) {
    super("AUTH", "supplier reported the session expired");
  }
}

export class Transport {
  readonly http: HttpClient;
  readonly auth: Authenticator;
  /** Statuses answered as responses, for `errors` and `expiredWhen` to look at. */
  private readonly passStatuses: ReadonlySet<number>;
  private readonly conditionsNeedBody: boolean;

  constructor(readonly options: TransportOptions) {
    const def = options.definition;
    this.http = new HttpClient(options);
    this.auth = createAuthenticator({ ...options, auth: def.auth, baseUrl: def.baseUrl, sources: options });
    const conditions = [...this.auth.expiredWhen, ...def.errors];
    this.passStatuses = conditionStatuses(conditions);
    this.conditionsNeedBody = needsBody(conditions);
  }

  get supplier(): string {
    return this.options.supplier;
  }

  /**
   * Starts a walk: secrets are re-read (env and files), so rotated ones apply.
   * A missing or unreadable secret is `AUTH`. A session or OAuth token is kept.
   */
  beginWalk(): void {
    try {
      this.auth.refresh();
    } catch (err) {
      throw authUnavailable(err);
    }
  }

  /**
   * Starts a walk ({@link beginWalk}) and returns `{}`: credentials of every
   * kind are attached by {@link fetchPage} itself, per request, so callers
   * only pass their configured headers. Kept for hand-written modules.
   */
  authHeaders(): Record<string, string> {
    this.beginWalk();
    return {};
  }

  /**
   * Fetches and decodes one page with the retry policy, all attempts (logins
   * included) bounded by `timeouts.pageMs`. Credentials are attached here; a
   * response matching `auth.expiredWhen` costs one new login and one repeat,
   * a second expiry in a row is `AUTH`. Resolves with the value and the
   * requests it took; a failure carries them in `IngestionError.attempts`.
   */
  fetchPage<T>(request: PageFetch<T>): Promise<{ value: T; attempts: number }> {
    return this.fetch(request, false);
  }

  /**
   * Opens a streamed body ({@link HttpClient.sendStream}) with everything
   * {@link fetchPage} does up to the response headers: rate limit, credentials
   * (only on the baseUrl origin), session expiry, status conditions of `errors`
   * (a streamed body is not read for conditions), retries within
   * `timeouts.pageMs`. Once the headers are in, the body is the caller's: a
   * failure while reading it is not retried (the file cannot be resumed).
   */
  openStream(request: StreamFetch): Promise<{ value: StreamedResponse; attempts: number }> {
    return this.fetch({ ...request, decode: () => undefined as never }, true) as Promise<{
      value: StreamedResponse;
      attempts: number;
    }>;
  }

  private async fetch<T>(request: PageFetch<T>, stream: boolean): Promise<{ value: T; attempts: number }> {
    const pageMs = this.options.definition.timeouts.pageMs;
    const { clock } = this.options;
    // `deadline` aborts only when the time is up (a streamed body outlives this call); `deadlineDone` ends the countdown.
    const deadline = new AbortController();
    const deadlineDone = new AbortController();
    const deadlineError = () =>
      new IngestionError("DEADLINE", `page ${request.seq} exceeded timeouts.pageMs (${pageMs} ms)`);
    clock.sleep(pageMs, deadlineDone.signal).then(
      () => deadline.abort(deadlineError()),
      () => {},
    );
    const signal = AbortSignal.any([request.signal, deadline.signal]);
    const deadlineAt = clock.now() + pageMs;
    const counter = { attempts: 0 };
    const exchange = (login: LoginExchange): Promise<HttpResponse> =>
      this.exchange({
        url: login.url,
        send: {
          method: login.method,
          headers: login.headers,
          secretQuery: login.secretQuery,
          ...(login.body ? { body: login.body } : {}),
        },
        seq: request.seq,
        ctx: request.ctx,
        signal,
        deadlineAt,
        deadlineError,
        counter,
        beforeAttempt: login.beforeAttempt,
        afterAttempt: login.afterAttempt,
        check: (response) => response,
      });
    try {
      for (let expiries = 0; ; expiries++) {
        const credentials = await this.auth.credentials({
          ctx: request.ctx,
          seq: request.seq,
          signal,
          exchange,
        });
        try {
          const value = await this.exchange({
            url: request.url,
            send: {
              ...(request.method ? { method: request.method } : {}),
              ...(request.body ? { body: request.body } : {}),
              ...(request.accept !== undefined ? { accept: request.accept } : {}),
              ...(request.conditional ? { conditional: request.conditional } : {}),
              headers: mergeHeaders(request.headers, credentials.headers),
              secretQuery: credentials.query,
            },
            seq: request.seq,
            ctx: request.ctx,
            signal,
            deadlineAt,
            deadlineError,
            counter,
            generation: credentials.generation,
            check: request.decode,
            stream,
          });
          return { value, attempts: counter.attempts };
        } catch (err) {
          if (!(err instanceof CredentialsExpired)) throw err;
          if (expiries >= 1) {
            throw new IngestionError(
              "AUTH",
              "supplier reported the session expired again right after a new login",
            );
          }
          request.ctx.log.info(
            { seq: request.seq },
            "session expired: logging in again and repeating the request",
          );
          this.auth.expire(err.generation);
        }
      }
    } catch (err) {
      // Only errors born here carry the count; a signal reason (lease lost, shutdown) is not ours to change.
      if (isIngestionError(err) && !(request.signal.aborted && err === request.signal.reason)) {
        err.attempts = counter.attempts;
      }
      throw err;
    } finally {
      deadlineDone.abort();
    }
  }

  /**
   * {@link fetchPage} of a walk's one request (docs/conditional-requests.md): `previous` validators
   * (the last succeeded run's) are sent back, and a 304 resolves `notModified`
   * without decoding. Either way the response's own validators are returned, so the
   * caller can keep them for the next run. With `previous` null it is a plain fetch
   * whose validators are reported.
   */
  async fetchConditional<T>(
    request: PageFetch<T>,
    previous: ResponseValidators | null,
  ): Promise<ConditionalFetch<T>> {
    type Decoded = { validators: ResponseValidators } & (
      | { notModified: false; value: T }
      | { notModified: true }
    );
    const { value, attempts } = await this.fetchPage<Decoded>({
      ...request,
      conditional: previous,
      decode: (res): Decoded =>
        res.status === 304
          ? { notModified: true, validators: validatorsOf(res) }
          : { notModified: false, value: request.decode(res), validators: validatorsOf(res) },
    });
    return { ...value, attempts };
  }

  /**
   * One logical request with the retry policy: send, then the response
   * conditions (`expiredWhen` first, then `errors`, then the status), then
   * `check`. `generation` is set for requests carrying a token that may expire.
   */
  private exchange<T>(x: {
    url: URL;
    send: Omit<SendOptions, "signal" | "onRequest">;
    seq: number;
    ctx: WalkContext;
    signal: AbortSignal;
    deadlineAt: number;
    deadlineError: () => IngestionError;
    counter: { attempts: number };
    generation?: number;
    beforeAttempt?: (signal: AbortSignal) => Promise<void>;
    afterAttempt?: () => void;
    check: (response: HttpResponse) => T;
    /** Resolve with the {@link StreamedResponse} itself, its body unread. */
    stream?: boolean;
  }): Promise<T> {
    const { definition, clock, random, metrics, supplier } = this.options;
    return runWithRetries(
      async () => {
        await x.beforeAttempt?.(x.signal);
        let response: HttpResponse | StreamedResponse;
        const send = x.stream ? this.http.sendStream.bind(this.http) : this.http.send.bind(this.http);
        try {
          response = await send(x.url, {
            ...x.send,
            passStatuses: this.passStatuses,
            signal: x.signal,
            onRequest: () => {
              x.counter.attempts++;
            },
            ...(x.ctx.log.isLevelEnabled("debug")
              ? {
                  onEvent: (event: RequestEvent) => x.ctx.log.debug({ seq: x.seq, ...event }, "http request"),
                }
              : {}),
          });
        } finally {
          x.afterAttempt?.();
        }
        // A 304 answers a conditional request (docs/conditional-requests.md): no body for the conditions to judge. A
        // streamed one is handed over as it is: the feed walk reads its status and validators.
        if (response.status === 304 && x.send.conditional) {
          return "contentEncoding" in response ? (response as T) : x.check(response);
        }
        if ("contentEncoding" in response) {
          const streamed = response;
          try {
            this.inspect({ ...streamed, body: Buffer.alloc(0) }, x.generation);
          } catch (err) {
            streamed.body.destroy();
            throw err;
          }
          return streamed as T;
        }
        this.inspect(response, x.generation);
        return x.check(response);
      },
      {
        retry: definition.retry,
        clock,
        random,
        signal: x.signal,
        deadlineAt: x.deadlineAt,
        deadlineError: x.deadlineError,
        onRetry: ({ attempt, error, delayMs, retryAfterMs }) => {
          const reason = retryReason(error);
          if (retryAfterMs !== undefined) this.http.limiter.pause(retryAfterMs);
          metrics.httpRetries.inc({ supplier, reason });
          x.ctx.log.warn(
            {
              seq: x.seq,
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
  }

  /** Response conditions, in the documented order (docs/connectors.md, Errors inside responses): expiry (token requests only), `errors`, then a passed non-2xx status. */
  private inspect(response: HttpResponse, generation: number | undefined): void {
    const def = this.options.definition;
    const body = this.conditionsNeedBody
      ? bodyForConditions(response.body, response.contentType, def.maxJsonDepth)
      : undefined;
    if (
      generation !== undefined &&
      this.auth.expiredWhen.some((c) => matchesCondition(c, response.status, body))
    ) {
      throw new CredentialsExpired(generation);
    }
    applyErrorRules(def.errors, response.status, body, this.options.secrets);
    if (response.status < 200 || response.status > 299) {
      const retryAfter = response.headers["retry-after"];
      throw classifyStatus(
        response.status,
        parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter, this.options.clock.now()),
      );
    }
  }

  async close(): Promise<void> {
    await this.http.close();
  }
}

/** Configured headers plus credentials; a session cookie joins configured cookies. */
function mergeHeaders(
  configured: Record<string, string>,
  credentials: Record<string, string>,
): Record<string, string> {
  const out: Record<string, string> = { ...configured };
  for (const [name, value] of Object.entries(credentials)) {
    const existing = Object.keys(out).find((k) => k.toLowerCase() === name.toLowerCase());
    if (existing !== undefined && name.toLowerCase() === "cookie")
      out[existing] = `${out[existing]}; ${value}`;
    else {
      if (existing !== undefined) delete out[existing];
      out[name] = value;
    }
  }
  return out;
}
