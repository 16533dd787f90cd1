import { randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { sendBody, sendJson } from "./respond.js";
import type { SupplierStats } from "./stats.js";
import type { SimOAuth2Auth, SimSessionAuth } from "./types.js";

/**
 * Session logins and OAuth2 token endpoints of the simulator, answering the
 * way the real APIs do: ETM's `POST /user/login?log=…&pwd=…` with the token
 * at `data.session` and `{status: {code: 403}}` in a 200 body once the session
 * is gone; a form login that sets a cookie; a client-credentials token
 * endpoint. Tokens are random, live in memory, and expire by request count
 * or by time on the simulator clock.
 */

interface Issued {
  issuedAt: number;
  uses: number;
}

/** The verdict on a catalog request's credentials. */
export type Verdict = "ok" | "unauthorized" | "expired";

const MAX_BODY = 64 * 1024;

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new Error("body too large");
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** Nests `value` at dot path `path` in a fresh object. */
function atPath(path: string, value: unknown): Record<string, unknown> {
  const parts = path.split(".");
  let out: unknown = value;
  for (const part of parts.reverse()) out = { [part]: out };
  return out as Record<string, unknown>;
}

export class TokenIssuer {
  private readonly tokens = new Map<string, Issued>();
  private lastLoginAt: number | undefined;
  private failedLogins = 0;

  constructor(
    private readonly supplier: string,
    readonly auth: SimSessionAuth | SimOAuth2Auth,
    private readonly stats: SupplierStats,
    private readonly now: () => number,
  ) {}

  /** The route (under the supplier) of the login or token endpoint. */
  get path(): string {
    return this.auth.type === "session" ? this.auth.loginPath : this.auth.tokenPath;
  }

  /** True when `route` is the login or token endpoint (a credential in the path included). */
  serves(route: string): boolean {
    if (this.auth.type === "session" && this.auth.credentialsIn === "path") {
      return route.startsWith(`${this.path}/`) && !route.slice(this.path.length + 1).includes("/");
    }
    return route === this.path;
  }

  /** Answers a login or token request. */
  async handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const stats = this.stats;
    stats.logins++;
    const at = this.now();
    const auth = this.auth;
    const method = auth.type === "session" ? (auth.loginMethod ?? "POST") : "POST";
    if (req.method !== method) {
      sendJson(res, stats, 405, { error: "method not allowed" }, { allow: method });
      return;
    }
    const fail = auth.type === "session" ? auth.failLogins : undefined;
    if (fail && this.failedLogins < fail.times) {
      this.failedLogins++;
      this.lastLoginAt = at;
      sendJson(res, stats, fail.status, { error: `simulated login status ${fail.status}` });
      return;
    }
    const minGap = auth.type === "session" ? (auth.minLoginIntervalMs ?? 0) : 0;
    if (this.lastLoginAt !== undefined && at - this.lastLoginAt < minGap) {
      stats.loginViolations++;
      this.lastLoginAt = at;
      sendJson(
        res,
        stats,
        429,
        { error: "too many logins" },
        { "retry-after": String(Math.ceil(minGap / 1000)) },
      );
      return;
    }
    this.lastLoginAt = at;
    let body: string;
    try {
      body = await readBody(req);
    } catch {
      sendJson(res, stats, 413, { error: "body too large" });
      return;
    }
    if (!this.credentialsOk(req, url, body)) {
      stats.loginFailures++;
      sendJson(res, stats, 401, { status: { code: 401, message: "invalid login or password" } });
      return;
    }
    const token = `${this.supplier}-${randomBytes(12).toString("hex")}`;
    this.tokens.set(token, { issuedAt: at, uses: 0 });
    stats.issuedTokens.push(token);
    if (stats.issuedTokens.length > 1000) stats.issuedTokens.shift();
    if (auth.type === "oauth2") {
      sendJson(res, stats, 200, {
        access_token: token,
        token_type: "Bearer",
        expires_in: auth.expiresInSeconds ?? 3600,
      });
      return;
    }
    const tokenIn = auth.tokenIn ?? { body: "data.session" };
    if ("header" in tokenIn) {
      sendJson(res, stats, 200, { status: { code: 200, message: "OK" } }, { [tokenIn.header]: token });
    } else if ("cookie" in tokenIn) {
      res.setHeader("set-cookie", [`tracking=1; Path=/`, `${tokenIn.cookie}=${token}; Path=/; HttpOnly`]);
      sendBody(res, stats, 200, "", { "content-type": "text/html" });
    } else if (auth.tokenOnly) {
      sendJson(res, stats, 200, atPath(tokenIn.body, token));
    } else {
      sendJson(res, stats, 200, { status: { code: 200, message: "OK" }, ...atPath(tokenIn.body, token) });
    }
  }

  private credentialsOk(req: IncomingMessage, url: URL, body: string): boolean {
    const auth = this.auth;
    if (auth.type === "oauth2") {
      const form = new URLSearchParams(body);
      if (form.get("grant_type") !== "client_credentials") return false;
      let id = form.get("client_id");
      let secret = form.get("client_secret");
      const header = req.headers.authorization;
      if (header?.startsWith("Basic ")) {
        const pair = Buffer.from(header.slice(6), "base64").toString("utf8");
        const colon = pair.indexOf(":");
        id = decodeURIComponent(pair.slice(0, colon));
        secret = decodeURIComponent(pair.slice(colon + 1));
      }
      return id === auth.clientId && secret === auth.clientSecret;
    }
    let given: (name: string) => unknown;
    const where = auth.credentialsIn ?? "query";
    if (where === "path") {
      const at = url.pathname.lastIndexOf(`${auth.loginPath}/`);
      const segment = at < 0 ? "" : decodeURIComponent(url.pathname.slice(at + auth.loginPath.length + 1));
      return Object.values(auth.credentials).every((v) => segment === v);
    }
    if (where === "query") given = (n) => url.searchParams.get(n);
    else if (where === "form") {
      const form = new URLSearchParams(body);
      given = (n) => form.get(n);
    } else {
      let json: Record<string, unknown> = {};
      try {
        json = JSON.parse(body) as Record<string, unknown>;
      } catch {
        return false;
      }
      given = (n) => json[n];
    }
    return Object.entries(auth.credentials).every(([k, v]) => given(k) === v);
  }

  /** Checks the token a catalog request carries; a live one is used once more. */
  verify(req: IncomingMessage, url: URL): Verdict {
    const auth = this.auth;
    let token: string | undefined;
    if (auth.type === "oauth2") {
      const header = req.headers.authorization;
      token = header?.startsWith("Bearer ") ? header.slice(7) : undefined;
    } else {
      const send = auth.sendAs ?? { query: "session-id" };
      if ("query" in send) token = url.searchParams.get(send.query) ?? undefined;
      else if ("header" in send) {
        const raw = req.headers[send.header.toLowerCase()];
        const value = Array.isArray(raw) ? raw[0] : raw;
        const prefix = send.prefix ?? "";
        token = value?.startsWith(prefix) ? value.slice(prefix.length) : undefined;
      } else token = cookieValue(req.headers.cookie, send.cookie);
    }
    if (token === undefined) return "unauthorized";
    const issued = this.tokens.get(token);
    if (!issued) return "unauthorized";
    const maxUses = auth.expireAfterRequests;
    const maxAgeMs = auth.type === "oauth2" ? (auth.expiresInSeconds ?? 3600) * 1000 : auth.expireAfterMs;
    if (
      (maxUses !== undefined && issued.uses >= maxUses) ||
      (maxAgeMs !== undefined && this.now() - issued.issuedAt >= maxAgeMs)
    ) {
      this.tokens.delete(token);
      return "expired";
    }
    issued.uses++;
    return "ok";
  }

  /** Answers a request whose token is missing, unknown or expired. */
  refuse(res: ServerResponse, verdict: Exclude<Verdict, "ok">): void {
    if (verdict === "expired") this.stats.expiredRequests++;
    if (this.auth.type === "session" && (this.auth.expiredAs ?? "401") === "body403") {
      sendJson(res, this.stats, 200, { status: { code: 403, message: "session expired or invalid" } });
      return;
    }
    sendJson(res, this.stats, 401, { error: verdict === "expired" ? "token expired" : "unauthorized" });
  }
}
