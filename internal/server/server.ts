/**
 * The health and metrics server (docs/operations.md, Health server): `/livez`, `/readyz`,
 * `/readyz/<supplier>`, `/metrics`, and the read-only console (`/`, `/runs/<id>`,
 * `./console/`). Loopback by default (the app passes the host of
 * `SUPPLIER_SYNC_HTTP_ADDR`, `127.0.0.1` unless set).
 *
 * Hardening, because probes and scrapers are not the only clients a port meets:
 * small header limit (16 KiB, 431 past it), headers and whole-request deadlines
 * enforced every second rather than Node's default 30 s, short keep-alive, request
 * bodies never read (a request that declares one is answered with
 * `Connection: close`, so the server does not wait for it), and `stop()` cuts idle
 * and active connections alike.
 */
import http from "node:http";
import { hostname } from "node:os";
import type pg from "pg";
import type { SupplierConfig } from "../config/types.js";
import type { Metrics } from "../observability/metrics.js";
import { type Clock, systemClock } from "../platform/clock.js";
import { errorMessage, InfraError } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";
import type { SecretRegistry } from "../platform/redact.js";
import { type ConsoleActions, createConsoleAuth } from "./console/actions.js";
import { createConsole } from "./console/console.js";
import type { ConsoleInstance } from "./console/layout.js";
import { createFreshnessCache, type FreshnessSnapshot } from "./freshness.js";
import { evaluateReadiness, evaluateSupplier } from "./readiness.js";

export interface HealthServerOptions {
  /** Interface to bind, from `SUPPLIER_SYNC_HTTP_ADDR`. */
  host: string;
  /** Port to bind; 0 picks an ephemeral one (tests). */
  port: number;
  /** Freshness is read from `ingestion_runs` through this pool. */
  db: pg.Pool;
  /** The configured suppliers; only enabled ones are reported. */
  suppliers: SupplierConfig[];
  metrics: Metrics;
  log: Logger;
  /** The app's redaction registry: the console scrubs stored messages and payloads with it. */
  secrets: SecretRegistry;
  /** Time source for ages and the freshness cache. */
  clock?: Clock;
  /** How long a freshness read is reused, in ms. Default 5000. */
  freshnessCacheMs?: number;
  /** Deadline of one whole request, in ms. Default 10000. */
  requestTimeoutMs?: number;
  /** Bound of the freshness query; past it the database counts as unreachable. Default 2000. */
  databaseTimeoutMs?: number;
  /** Who serves the console pages (owner and version), shown in their header. */
  instance?: ConsoleInstance;
  /**
   * `SUPPLIER_SYNC_ADMIN_TOKEN` and what the console may do with it (docs/operations.md, Console
   * actions). Both absent: the console is read-only and POST is 405, as without actions.
   */
  admin?: { token: string; actions: ConsoleActions };
  /** Bound of one console page's reads, in ms. Default 5000. */
  consoleTimeoutMs?: number;
}

export interface HealthServer {
  /** Binds and listens. Rejects with an error naming the address when it cannot bind. */
  start(): Promise<{ host: string; port: number }>;
  /** Closes the listener and every connection. Safe before start and twice. */
  stop(): Promise<void>;
  /** The bound address while listening. */
  readonly address: { host: string; port: number } | undefined;
}

/** Lifecycle of the server, in order. A stopped server does not start again. */
type ServerState = "NEW" | "STARTING" | "LISTENING" | "STOPPING" | "STOPPED";

const MAX_HEADER_BYTES = 16 * 1024;
const KEEP_ALIVE_TIMEOUT_MS = 5_000;
const MAX_HEADERS_TIMEOUT_MS = 5_000;
const SUPPLIER_NAME = /^[a-z][a-z0-9_-]{0,62}$/;

interface Reply {
  status: number;
  headers?: Record<string, string>;
  body: string;
  contentType?: string;
}

const json = (status: number, value: unknown, headers?: Record<string, string>): Reply => ({
  status,
  body: `${JSON.stringify(value)}\n`,
  contentType: "application/json; charset=utf-8",
  ...(headers ? { headers } : {}),
});

export function createHealthServer(options: HealthServerOptions): HealthServer {
  const clock = options.clock ?? systemClock;
  const { log, metrics } = options;
  const requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
  const headersTimeoutMs = Math.min(requestTimeoutMs, MAX_HEADERS_TIMEOUT_MS);
  const enabled = options.suppliers.filter((s) => s.enabled);
  const byName = new Map(enabled.map((s) => [s.name, s]));
  const freshness = createFreshnessCache({
    db: options.db,
    suppliers: enabled.map((s) => s.name),
    clock,
    cacheMs: options.freshnessCacheMs ?? 5_000,
    queryTimeoutMs: options.databaseTimeoutMs ?? 2_000,
  });
  let database: FreshnessSnapshot["database"] = "ok";
  const instance = options.instance ?? {
    owner: { hostname: hostname(), pid: process.pid, bootId: "unknown" },
    version: "unknown",
  };
  const auth = options.admin
    ? createConsoleAuth({
        adminToken: options.admin.token,
        actions: options.admin.actions,
        clock,
        log,
        instance,
        suppliers: enabled.map((s) => s.name),
      })
    : undefined;
  const consolePages = createConsole({
    db: options.db,
    suppliers: enabled,
    instance,
    clock,
    log,
    secrets: options.secrets,
    freshness: () => readFreshness(),
    queryTimeoutMs: options.consoleTimeoutMs ?? 5_000,
    ...(auth ? { auth } : {}),
  });

  async function readFreshness(): Promise<FreshnessSnapshot> {
    const snapshot = await freshness.get();
    if (snapshot.database !== database) {
      database = snapshot.database;
      if (database === "unreachable") log.warn({ err: snapshot.error }, "readiness: database unreachable");
      else log.info("readiness: database reachable again");
    }
    return snapshot;
  }

  async function renderMetrics(): Promise<Reply> {
    const snapshot = await readFreshness();
    const now = clock.now();
    for (const supplier of enabled) {
      const last = snapshot.lastSuccess.get(supplier.name) ?? null;
      const entry = evaluateSupplier(supplier, last, now);
      metrics.heldItems.set({ supplier: supplier.name }, snapshot.held.get(supplier.name)?.items ?? 0);
      metrics.supplierPaused.set({ supplier: supplier.name }, snapshot.paused?.get(supplier.name) ? 1 : 0);
      // 0 and -1 mean "never", as `initSupplier` starts them.
      metrics.lastSuccessTimestamp.set({ supplier: supplier.name }, last ? last.getTime() / 1000 : 0);
      metrics.lastSuccessAge.set({ supplier: supplier.name }, entry.age_seconds ?? -1);
    }
    return { status: 200, body: await metrics.registry.metrics(), contentType: metrics.registry.contentType };
  }

  async function route(method: string, path: string, req: http.IncomingMessage): Promise<Reply> {
    if (auth) {
      const body = method === "POST" ? await readForm(req) : "";
      if (body === undefined) return { status: 413, body: "form too large\n" };
      const acted = await auth.handle({ method, path, headers: req.headers, body });
      if (acted) return acted;
    }
    if (method !== "GET" && method !== "HEAD") {
      return json(405, { error: "method_not_allowed" }, { Allow: "GET, HEAD" });
    }
    if (path === "/") return consolePages.overview(req.headers);
    if (path.startsWith("/runs/")) return consolePages.run(path.slice("/runs/".length), req.headers);
    if (path.startsWith("/suppliers/"))
      return consolePages.supplier(path.slice("/suppliers/".length), queryOf(req.url));
    if (path === "/livez") return json(200, { status: "ok" });
    if (path === "/metrics") return renderMetrics();
    if (path === "/readyz") {
      const verdict = evaluateReadiness(enabled, await readFreshness(), clock.now());
      return json(verdict.httpStatus, verdict.body);
    }
    if (path.startsWith("/readyz/")) {
      const name = path.slice("/readyz/".length);
      const supplier = SUPPLIER_NAME.test(name) ? byName.get(name) : undefined;
      if (!supplier) return json(404, { error: "not_found", message: "unknown or disabled supplier" });
      const verdict = evaluateReadiness([supplier], await readFreshness(), clock.now());
      return json(verdict.httpStatus, verdict.body);
    }
    return json(404, { error: "not_found" });
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    // Never wait for a body: answering and closing is cheaper than reading one.
    const declaresBody =
      req.headers["transfer-encoding"] !== undefined ||
      (req.headers["content-length"] !== undefined && req.headers["content-length"] !== "0");
    let reply: Reply;
    try {
      reply = await route(req.method ?? "GET", pathOf(req.url), req);
    } catch (err) {
      log.error({ err: errorMessage(err), url: req.url }, "health server request failed");
      reply = json(500, { error: "internal" });
    }
    if (res.destroyed) return;
    const body = Buffer.from(reply.body, "utf8");
    res.writeHead(reply.status, {
      "Content-Type": reply.contentType ?? "text/plain; charset=utf-8",
      "Content-Length": String(body.length),
      "Cache-Control": "no-store",
      ...(declaresBody ? { Connection: "close" } : {}),
      ...reply.headers,
    });
    // Node sends no body for HEAD by itself; the headers stay those of GET.
    res.end(body);
  }

  const server = http.createServer(
    {
      maxHeaderSize: MAX_HEADER_BYTES,
      requestTimeout: requestTimeoutMs,
      headersTimeout: headersTimeoutMs,
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      // Node checks the two deadlines above only this often (30 s by default).
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(headersTimeoutMs / 4))),
    },
    (req, res) => void handle(req, res),
  );

  let state: ServerState = "NEW";
  let starting: Promise<{ host: string; port: number }> | undefined;
  let stopping: Promise<void> | undefined;
  let bound: { host: string; port: number } | undefined;

  function listen(): Promise<{ host: string; port: number }> {
    const where = `${options.host}:${options.port}`;
    return new Promise((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) => {
        const why = err.code === "EADDRINUSE" ? "address already in use" : errorMessage(err);
        reject(new InfraError(`health server cannot listen on ${where}: ${why}`, { cause: err }));
      };
      server.once("error", onError);
      server.listen({ host: options.host, port: options.port }, () => {
        server.off("error", onError);
        server.on("error", (err) => log.error({ err: errorMessage(err) }, "health server error"));
        const addr = server.address();
        if (addr === null || typeof addr === "string") {
          reject(new InfraError(`health server on ${where} has no TCP address`));
          return;
        }
        resolve({ host: addr.address, port: addr.port });
      });
    });
  }

  return {
    start() {
      if (state === "STOPPING" || state === "STOPPED") {
        return Promise.reject(new Error("health server was stopped; create a new one"));
      }
      if (!starting) {
        state = "STARTING";
        starting = listen().then((addr) => {
          if (state === "STARTING") state = "LISTENING";
          bound = addr;
          return addr;
        });
      }
      return starting;
    },
    stop() {
      if (stopping) return stopping;
      const wasStarted = starting;
      state = "STOPPING";
      stopping = (async () => {
        if (wasStarted) await wasStarted.catch(() => {});
        bound = undefined;
        if (server.listening) {
          const closed = new Promise<void>((resolve) => server.close(() => resolve()));
          server.closeAllConnections();
          await closed;
        }
        state = "STOPPED";
      })();
      return stopping;
    },
    get address() {
      return state === "LISTENING" ? bound : undefined;
    },
  };
}

/** The query of a request target (the console's supplier page reads its filters there). */
function queryOf(url: string | undefined): URLSearchParams {
  const raw = url ?? "";
  const at = raw.indexOf("?");
  return new URLSearchParams(at < 0 ? "" : raw.slice(at + 1));
}

/**
 * The path of a request target, without query; `""` for one that is not a URL or
 * that has `.` or `..` segments (plain or percent-encoded): resolving those would turn
 * `/readyz/%2e%2e` into `/`, the console, where a 404 is what the client should see.
 */
function pathOf(url: string | undefined): string {
  const raw = (url ?? "/").split("?")[0] ?? "";
  if (/(^|\/)(\.|%2e){1,2}(\/|$)/i.test(raw)) return "";
  try {
    return new URL(url ?? "/", "http://health.invalid").pathname;
  } catch {
    return "";
  }
}

/** Largest form body read (console actions: a token or a CSRF token). */
const MAX_FORM_BYTES = 8 * 1024;

/** Reads a console form's body; undefined when it is larger than {@link MAX_FORM_BYTES}. */
async function readForm(req: http.IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_FORM_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}
