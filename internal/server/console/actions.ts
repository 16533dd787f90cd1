/**
 * Console actions (docs/operations.md, Console actions): with `SUPPLIER_SYNC_ADMIN_TOKEN`
 * set, `GET /login` offers a form that takes the token; a correct token (compared in
 * constant time) opens a session, an `HttpOnly; SameSite=Strict` cookie, and the
 * console shows pause/resume/trigger buttons per supplier and approve/dismiss per held
 * run, as plain HTML forms (no JavaScript) POSTed with the session's CSRF token.
 *
 * Invariants:
 * - Without the token nothing here exists: the server answers as before (405 for POST).
 * - A POST changes something only with a live session cookie, that session's CSRF
 *   token, and, when the browser sends them, an `Origin` equal to the console's own and
 *   `Sec-Fetch-Site: same-origin` (`Origin: null`, which the pages' `no-referrer` policy
 *   makes Chromium send, counts only with `Sec-Fetch-Site: same-origin`). Anything else is 403 and changes nothing.
 * - Sessions live in this process's memory (a replica restart or another replica means
 *   logging in again); logout deletes the session, so a replayed form is 403.
 * - Each action is recorded with `console` as `paused_by` / `requested_by` / `decided_by`.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { Clock } from "../../platform/clock.js";
import { errorMessage } from "../../platform/errors.js";
import type { Logger } from "../../platform/logger.js";
import { type Html, html } from "./html.js";
import { type ConsoleInstance, page } from "./layout.js";

/** What the console may do, implemented by the app (the same functions as the CLI). */
export interface ConsoleActions {
  pause(supplier: string, by: string): Promise<unknown>;
  resume(supplier: string): Promise<unknown>;
  trigger(supplier: string, by: string): Promise<unknown>;
  decide(runId: number, decision: "approve" | "dismiss", by: string): Promise<unknown>;
}

export interface ConsoleSession {
  csrf: string;
  expiresAt: number;
}

export interface ActionRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** The url-encoded form body of a POST (bounded by the server). */
  body: string;
}

export interface ActionReply {
  status: number;
  headers?: Record<string, string>;
  body: string;
  contentType?: string;
}

export const SESSION_COOKIE = "ss_session";
const SESSION_TTL_MS = 8 * 3_600_000;
export const BY_CONSOLE = "console";
const SUPPLIER_NAME = /^[a-z][a-z0-9_-]{0,62}$/;

const digest = (text: string) => createHash("sha256").update(text, "utf8").digest();

export interface ConsoleAuthOptions {
  adminToken: string;
  actions: ConsoleActions;
  clock: Clock;
  log: Logger;
  instance: ConsoleInstance;
  /** Known (enabled) suppliers: actions on any other are 404. */
  suppliers: readonly string[];
}

export function createConsoleAuth(options: ConsoleAuthOptions) {
  const tokenDigest = digest(options.adminToken);
  const sessions = new Map<string, ConsoleSession>();
  const known = new Set(options.suppliers);
  const { clock, log } = options;

  function sessionOf(headers: ActionRequest["headers"]): { id: string; session: ConsoleSession } | undefined {
    const cookie = String(headers.cookie ?? "");
    const id = /(?:^|;\s*)ss_session=([A-Za-z0-9_-]{43})(?:;|$)/.exec(cookie)?.[1];
    if (!id) return undefined;
    const session = sessions.get(id);
    if (!session) return undefined;
    if (session.expiresAt <= clock.now()) {
      sessions.delete(id);
      return undefined;
    }
    return { id, session };
  }

  /** Same-origin as far as the browser tells: `Origin` (when sent) is this host, `Sec-Fetch-Site` (when sent) same-origin. */
  function sameOrigin(headers: ActionRequest["headers"]): boolean {
    const origin = headers.origin;
    const site = headers["sec-fetch-site"];
    // The pages' `no-referrer` policy makes Chromium send `Origin: null` on its own forms:
    // then only the browser's Sec-Fetch-Site can say the form was ours.
    if (origin === "null") return site === "same-origin";
    if (origin !== undefined && origin !== `http://${String(headers.host ?? "")}`) return false;
    return site === undefined || site === "same-origin";
  }

  function csrfMatches(session: ConsoleSession, sent: string | null): boolean {
    if (sent === null) return false;
    return timingSafeEqual(digest(session.csrf), digest(sent));
  }

  const forbidden = (why: string): ActionReply => {
    log.warn({ reason: why }, "console action refused");
    return { status: 403, body: `forbidden: ${why}\n` };
  };
  const redirect = (to: string, headers: Record<string, string> = {}): ActionReply => ({
    status: 303,
    headers: { Location: to, ...headers },
    body: "",
  });

  function loginPage(status: number, message: string | null): ActionReply {
    const body = html`<h2>Log in</h2>
${message ? html`<p class="banner" data-login-error>${message}</p>` : ""}
<form method="post" action="/login">
<label>Admin token <input type="password" name="token" autocomplete="current-password" required></label>
<button type="submit">Log in</button>
</form>`;
    return {
      status,
      body: page("Log in", options.instance, "ok", body).text,
      contentType: "text/html; charset=utf-8",
    };
  }

  async function handle(req: ActionRequest): Promise<ActionReply | undefined> {
    const { method, path } = req;
    if (path === "/login" && (method === "GET" || method === "HEAD")) return loginPage(200, null);
    if (path !== "/login" && path !== "/logout" && !path.startsWith("/actions/")) return undefined;
    if (method !== "POST") return { status: 405, headers: { Allow: "POST" }, body: "method not allowed\n" };
    if (!sameOrigin(req.headers)) return forbidden("cross-origin request");
    const form = new URLSearchParams(req.body);
    if (path === "/login") {
      const sent = form.get("token") ?? "";
      if (!timingSafeEqual(digest(sent), tokenDigest)) {
        log.warn("console login refused: wrong token");
        return loginPage(403, "Wrong token.");
      }
      const id = randomBytes(32).toString("base64url");
      sessions.set(id, {
        csrf: randomBytes(32).toString("base64url"),
        expiresAt: clock.now() + SESSION_TTL_MS,
      });
      log.info("console login");
      return redirect("/", {
        "Set-Cookie": `${SESSION_COOKIE}=${id}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${SESSION_TTL_MS / 1000}`,
      });
    }
    const current = sessionOf(req.headers);
    if (!current) return forbidden("no session");
    if (!csrfMatches(current.session, form.get("csrf"))) return forbidden("bad CSRF token");
    if (path === "/logout") {
      sessions.delete(current.id);
      return redirect("/login", {
        "Set-Cookie": `${SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0`,
      });
    }
    const [, , verb, target = ""] = path.split("/");
    try {
      if (verb === "pause" || verb === "resume" || verb === "trigger") {
        if (!SUPPLIER_NAME.test(target) || !known.has(target))
          return { status: 404, body: "unknown supplier\n" };
        if (verb === "pause") await options.actions.pause(target, BY_CONSOLE);
        else if (verb === "resume") await options.actions.resume(target);
        else await options.actions.trigger(target, BY_CONSOLE);
        log.info({ supplier: target, action: verb, by: BY_CONSOLE }, "console action");
        return redirect("/");
      }
      if (verb === "approve" || verb === "dismiss") {
        if (!/^[1-9]\d{0,15}$/.test(target)) return { status: 404, body: "unknown run\n" };
        await options.actions.decide(Number(target), verb, BY_CONSOLE);
        log.info({ run_id: Number(target), action: verb, by: BY_CONSOLE }, "console action");
        return redirect(`/runs/${target}`);
      }
    } catch (err) {
      log.warn({ err: errorMessage(err), action: verb }, "console action failed");
      return { status: 409, body: `${verb} failed: ${errorMessage(err)}\n` };
    }
    return { status: 404, body: "unknown action\n" };
  }

  /** The action forms for one supplier, for a page rendered for `headers`' session (empty without one). */
  function supplierForms(headers: ActionRequest["headers"], supplier: string, paused: boolean): Html {
    const current = sessionOf(headers);
    if (!current) return html``;
    const csrf = current.session.csrf;
    const button = (verb: string, label: string) =>
      html`<form method="post" action="/actions/${verb}/${supplier}" class="action"><input type="hidden" name="csrf" value="${csrf}"><button type="submit" data-action="${verb}">${label}</button></form>`;
    return html`${paused ? button("resume", "Resume") : button("pause", "Pause")}${button("trigger", "Run now")}`;
  }

  function runForms(headers: ActionRequest["headers"], runId: string): Html {
    const current = sessionOf(headers);
    if (!current) return html``;
    const csrf = current.session.csrf;
    const button = (verb: string, label: string) =>
      html`<form method="post" action="/actions/${verb}/${runId}" class="action"><input type="hidden" name="csrf" value="${csrf}"><button type="submit" data-action="${verb}">${label}</button></form>`;
    return html`<div id="held-actions">Held items of this run: ${button("approve", "Approve all")} ${button("dismiss", "Dismiss all")}</div>`;
  }

  function logoutForm(headers: ActionRequest["headers"]): Html {
    const current = sessionOf(headers);
    if (!current)
      return html`<p><a href="/login">Log in</a> to pause, resume, trigger or decide held items.</p>`;
    return html`<form method="post" action="/logout" class="action"><input type="hidden" name="csrf" value="${current.session.csrf}"><button type="submit" data-action="logout">Log out</button></form>`;
  }

  return { handle, supplierForms, runForms, logoutForm, sessionOf };
}

export type ConsoleAuth = ReturnType<typeof createConsoleAuth>;
