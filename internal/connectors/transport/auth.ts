import { parseSetCookie } from "set-cookie-parser";
import type { WalkContext } from "../../ingestion/ports.js";
import type { Metrics } from "../../observability/metrics.js";
import type { Clock } from "../../platform/clock.js";
import { readDotPath } from "../../platform/dot-path.js";
import { ConfigError, IngestionError } from "../../platform/errors.js";
import type {
  AuthDefinition,
  ConditionDefinition,
  OAuth2AuthDefinition,
  SessionAuthDefinition,
} from "../schema/connector-schema.js";
import {
  type ResolvedLogin,
  resolveAuthHeaders,
  resolveLogin,
  resolveOAuth2Client,
  resolveQueryAuth,
  type SecretSources,
} from "../schema/credentials.js";
import type { HttpResponse } from "./http-client.js";

/**
 * Credentials of a supplier's requests (docs/connectors.md, Authentication). Static kinds (`none`,
 * `bearer`, `header`, `basic`, `query`) are re-resolved at the start of every
 * walk, so rotated secret files apply. `session` and `oauth2` log in: the
 * token lives in this object's memory only (registered for redaction, never
 * logged, stored or put in an error message) and outlives walks, so later
 * ticks of this process reuse it until 90 % of its lifetime has passed.
 *
 * Invariants:
 * - At most one login is in flight per supplier: concurrent requests that
 *   need a token wait for the same login.
 * - A response that means "expired" invalidates only the token it was sent
 *   with: a request that used an older token repeats with the current one
 *   instead of logging in again.
 * - Login requests are at least `minLoginIntervalMs` apart (every request
 *   counts, retries included); a login due sooner waits, within the page
 *   deadline of the step that needs it.
 */

/** What a request carries; `generation` identifies the token, for {@link Authenticator.expire}. */
export interface Credentials {
  headers: Record<string, string>;
  /** Secret query parameters, sent to the supplier's origin only and redacted when shown. */
  query: Record<string, string>;
  generation: number;
}

/** A login request as the transport sends it. */
export interface LoginExchange {
  url: URL;
  method: "GET" | "POST";
  headers: Record<string, string>;
  secretQuery: Record<string, string>;
  body?: { contentType: string; data: string };
  /** Runs before every attempt is sent (login spacing). */
  beforeAttempt: (signal: AbortSignal) => Promise<void>;
  /** Runs when an attempt has its answer or failed. */
  afterAttempt: () => void;
}

/** The transport's side of a login: sends with rate limit, retries, deadline and `errors` rules. */
export interface AuthRequestContext {
  ctx: WalkContext;
  seq: number;
  /** The page deadline and the walk's signal. */
  signal: AbortSignal;
  exchange: (login: LoginExchange) => Promise<HttpResponse>;
}

export interface Authenticator {
  /** Conditions that mean the credentials expired: one new login and a repeat (checked before `errors`). */
  readonly expiredWhen: readonly ConditionDefinition[];
  /** Re-reads secrets (env and files) for a new walk. @throws ConfigError */
  refresh(): void;
  /** Credentials for the next request, logging in first when there is no valid token. */
  credentials(request: AuthRequestContext): Promise<Credentials>;
  /** Drops the token of `generation` (a response said it expired). */
  expire(generation: number): void;
}

export interface AuthenticatorOptions {
  supplier: string;
  auth: AuthDefinition;
  /** `baseUrl`: logins and token requests go to its origin (and path prefix). */
  baseUrl: string;
  sources: SecretSources;
  clock: Clock;
  metrics: Metrics;
}

/** Tokens are used until this fraction of their lifetime has passed. */
const TOKEN_LIFETIME_USED = 0.9;
/** `expires_in` of an OAuth token response that gives none. */
const DEFAULT_OAUTH_EXPIRES_S = 3_600;

export function createAuthenticator(options: AuthenticatorOptions): Authenticator {
  const { auth } = options;
  if (auth.type === "session") return new TokenAuthenticator(options, sessionFlavour(auth, options));
  if (auth.type === "oauth2") return new TokenAuthenticator(options, oauthFlavour(auth, options));
  return staticAuthenticator(auth, options.sources);
}

function staticAuthenticator(auth: AuthDefinition, sources: SecretSources): Authenticator {
  let current: Credentials | undefined;
  const refresh = () => {
    const headers = resolveAuthHeaders(auth, sources);
    const query: Record<string, string> = {};
    if (auth.type === "query") {
      const { param, value } = resolveQueryAuth(auth, sources);
      query[param] = value;
    }
    current = { headers, query, generation: 0 };
  };
  return {
    expiredWhen: [],
    refresh,
    async credentials() {
      if (!current) refresh();
      return current as Credentials;
    },
    expire() {},
  };
}

/** What differs between a session login and an OAuth token request. */
interface Flavour {
  expiredWhen: readonly ConditionDefinition[];
  minIntervalMs: number;
  refresh(): void;
  request(): Omit<LoginExchange, "beforeAttempt" | "afterAttempt">;
  /** Token and its lifetime in ms, from the response. @throws IngestionError `AUTH` */
  read(response: HttpResponse): { token: string; lifetimeMs: number };
  /** How a request carries the token. */
  carry(token: string): { headers: Record<string, string>; query: Record<string, string> };
}

interface Token {
  value: string;
  /** Clock ms after which a new login is due. */
  renewAt: number;
  generation: number;
}

class TokenAuthenticator implements Authenticator {
  readonly expiredWhen: readonly ConditionDefinition[];
  private token: Token | undefined;
  private loggingIn: Promise<Token> | undefined;
  private generation = 0;
  private lastLoginAt: number | undefined;

  constructor(
    private readonly options: AuthenticatorOptions,
    private readonly flavour: Flavour,
  ) {
    this.expiredWhen = flavour.expiredWhen;
  }

  refresh(): void {
    this.flavour.refresh();
  }

  async credentials(request: AuthRequestContext): Promise<Credentials> {
    const now = this.options.clock.now();
    let token = this.token;
    if (!token || now >= token.renewAt) {
      this.loggingIn ??= this.login(request).finally(() => {
        this.loggingIn = undefined;
      });
      token = await this.loggingIn;
    }
    return { ...this.flavour.carry(token.value), generation: token.generation };
  }

  expire(generation: number): void {
    if (this.token?.generation === generation) this.token = undefined;
  }

  private async login(request: AuthRequestContext): Promise<Token> {
    const { clock, metrics, supplier } = this.options;
    const exchange = this.flavour.request();
    let response: HttpResponse;
    try {
      response = await request.exchange({
        ...exchange,
        beforeAttempt: async (signal) => {
          if (this.lastLoginAt !== undefined && this.flavour.minIntervalMs > 0) {
            const wait = this.lastLoginAt + this.flavour.minIntervalMs - clock.now();
            if (wait > 0) {
              request.ctx.log.info(
                { seq: request.seq, wait_ms: wait },
                "login due sooner than minLoginIntervalMs: waiting",
              );
              await clock.sleep(wait, signal).catch(() => {
                throw signal.reason;
              });
            }
          }
          this.lastLoginAt = clock.now();
        },
        // Spacing counts from the answer too: the supplier saw the login before it answered, so
        // network jitter can never make two logins look closer together to it than to us.
        afterAttempt: () => {
          this.lastLoginAt = clock.now();
        },
      });
    } catch (err) {
      metrics.authLogins.inc({ supplier, result: "failed" });
      throw loginFailure(err);
    }
    let read: { token: string; lifetimeMs: number };
    try {
      read = this.flavour.read(response);
    } catch (err) {
      metrics.authLogins.inc({ supplier, result: "failed" });
      throw err;
    }
    metrics.authLogins.inc({ supplier, result: "ok" });
    this.options.sources.secrets.add(read.token);
    const token: Token = {
      value: read.token,
      renewAt: clock.now() + Math.floor(read.lifetimeMs * TOKEN_LIFETIME_USED),
      generation: ++this.generation,
    };
    this.token = token;
    request.ctx.log.info({ seq: request.seq, renew_in_ms: token.renewAt - clock.now() }, "logged in");
    return token;
  }
}

/** A login that failed: 401/403 stay `AUTH` (never retried); the message says it was the login. */
function loginFailure(err: unknown): unknown {
  if (err instanceof IngestionError && !err.message.startsWith("login ")) {
    const wrapped = new IngestionError(err.code, `login failed: ${err.message}`, { cause: err });
    wrapped.attempts = err.attempts;
    return wrapped;
  }
  return err;
}

function loginUrl(baseUrl: string, path: string, query: Record<string, string>): URL {
  const base = new URL(baseUrl);
  const url = new URL(`${base.origin}${base.pathname.replace(/\/+$/, "")}${path}`);
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
  return url;
}

function encodeBody(
  body: unknown,
  form: Record<string, string> | undefined,
): { contentType: string; data: string } | undefined {
  if (form !== undefined) {
    return { contentType: "application/x-www-form-urlencoded", data: new URLSearchParams(form).toString() };
  }
  if (body !== undefined) return { contentType: "application/json", data: JSON.stringify(body) };
  return undefined;
}

function sessionFlavour(auth: SessionAuthDefinition, options: AuthenticatorOptions): Flavour {
  let login: ResolvedLogin | undefined;
  const refresh = () => {
    login = resolveLogin(auth.login, options.sources);
  };
  return {
    expiredWhen: auth.expiredWhen,
    minIntervalMs: auth.minLoginIntervalMs,
    refresh,
    request() {
      if (!login) refresh();
      const l = login as ResolvedLogin;
      // Literal query values stay in the URL; secret ones are redacted wherever the URL is shown.
      const literal: Record<string, string> = {};
      const secret: Record<string, string> = {};
      for (const [k, v] of Object.entries(auth.login.query)) {
        if (typeof v === "string") literal[k] = v;
        else secret[k] = l.query[k] as string;
      }
      const exchange: Omit<LoginExchange, "beforeAttempt" | "afterAttempt"> = {
        url: loginUrl(options.baseUrl, l.path, literal),
        method: l.method,
        headers: l.headers,
        secretQuery: secret,
      };
      const body = encodeBody(l.body, l.form);
      if (body) exchange.body = body;
      return exchange;
    },
    read(response) {
      const token = sessionToken(auth, response);
      if (token === undefined || token === "") {
        const where =
          auth.token.path !== undefined
            ? `at ${auth.token.path}`
            : auth.token.header !== undefined
              ? `in header ${auth.token.header}`
              : `in cookie ${auth.token.cookie}`;
        throw new IngestionError("AUTH", `login response has no token ${where}`);
      }
      if (/[\r\n\0]/.test(token)) throw new IngestionError("AUTH", "login token contains a line break");
      return { token, lifetimeMs: auth.ttlMs };
    },
    carry(token): { headers: Record<string, string>; query: Record<string, string> } {
      const send = auth.send;
      if (send.query !== undefined) return { headers: {}, query: { [send.query]: token } };
      if (send.header !== undefined) {
        return { headers: { [send.header.toLowerCase()]: `${send.prefix ?? ""}${token}` }, query: {} };
      }
      return { headers: { cookie: `${send.cookie}=${token}` }, query: {} };
    },
  };
}

function sessionToken(auth: SessionAuthDefinition, response: HttpResponse): string | undefined {
  if (auth.token.header !== undefined) {
    const raw = response.headers[auth.token.header.toLowerCase()];
    return Array.isArray(raw) ? raw[0] : raw;
  }
  if (auth.token.cookie !== undefined) {
    const raw = response.headers["set-cookie"];
    if (raw === undefined) return undefined;
    const cookie = parseSetCookie(raw, { map: true, decodeValues: false, silent: true })[auth.token.cookie];
    return cookie?.value;
  }
  const body = jsonOf(response);
  const value = readDotPath(body, auth.token.path ?? "");
  if (typeof value === "number") return String(value);
  return typeof value === "string" ? value : undefined;
}

function jsonOf(response: HttpResponse): unknown {
  try {
    return JSON.parse(response.body.toString("utf8")) as unknown;
  } catch {
    return undefined;
  }
}

function oauthFlavour(auth: OAuth2AuthDefinition, options: AuthenticatorOptions): Flavour {
  let client: { clientId: string; clientSecret: string } | undefined;
  const refresh = () => {
    client = resolveOAuth2Client(auth, options.sources);
  };
  return {
    expiredWhen: [{ status: [401] }],
    minIntervalMs: 0,
    refresh,
    request() {
      if (!client) refresh();
      const c = client as { clientId: string; clientSecret: string };
      const form: Record<string, string> = { grant_type: "client_credentials" };
      if (auth.scope !== undefined) form.scope = auth.scope;
      const headers: Record<string, string> = {};
      if (auth.clientAuth === "basic") {
        // RFC 6749 §2.3.1: both parts form-urlencoded before base64.
        const pair = `${encodeURIComponent(c.clientId)}:${encodeURIComponent(c.clientSecret)}`;
        options.sources.secrets.add(pair);
        headers.authorization = `Basic ${Buffer.from(pair).toString("base64")}`;
      } else {
        form.client_id = c.clientId;
        form.client_secret = c.clientSecret;
      }
      return {
        url: loginUrl(options.baseUrl, auth.tokenPath, {}),
        method: "POST",
        headers,
        secretQuery: {},
        body: {
          contentType: "application/x-www-form-urlencoded",
          data: new URLSearchParams(form).toString(),
        },
      };
    },
    read(response) {
      const body = jsonOf(response);
      const token = readDotPath(body, "access_token");
      if (typeof token !== "string" || token === "") {
        throw new IngestionError("AUTH", "token response has no access_token");
      }
      if (/[\r\n\0]/.test(token)) throw new IngestionError("AUTH", "access_token contains a line break");
      const expires = Number(readDotPath(body, "expires_in") ?? DEFAULT_OAUTH_EXPIRES_S);
      const seconds = Number.isFinite(expires) && expires > 0 ? expires : DEFAULT_OAUTH_EXPIRES_S;
      return { token, lifetimeMs: seconds * 1000 };
    },
    carry(token) {
      return { headers: { authorization: `Bearer ${token}` }, query: {} };
    },
  };
}

/** Wraps a secret-resolution failure as the step error `AUTH`, message naming the key, never the value. */
export function authUnavailable(err: unknown): unknown {
  if (err instanceof ConfigError) {
    return new IngestionError("AUTH", `credentials unavailable: ${err.message}`, { cause: err });
  }
  return err;
}
