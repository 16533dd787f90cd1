import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { setTimeout as delay } from "node:timers/promises";
import { handleAdmin } from "./admin.js";
import { ETM_REPORT_ROUTE, serveEtmJobRoute, serveEtmReport } from "./etm-export.js";
import {
  EXPORT_CREATE_ROUTE,
  EXPORT_POLL_ROUTE,
  exportJobs,
  serveExportFile,
  serveExportRoute,
} from "./export-jobs.js";
import { FEED_ROUTE, serveFeed } from "./feeds.js";
import { serveWorkbookProfile } from "./profile-workbooks.js";
import { serveProfile } from "./profiles.js";
import { sendJson } from "./respond.js";
import { serveOffers } from "./serve-offers.js";
import { SupplierStats } from "./stats.js";
import { SupplierState } from "./supplier.js";
import type {
  Simulator,
  SimulatorFaults,
  SimulatorMutation,
  SimulatorStats,
  SimulatorSupplierOptions,
  StartSimulatorOptions,
} from "./types.js";

const SUPPLIER_ROUTE = /^\/([^/]+)(\/.*)$/;

/** Profiles whose catalog is a published workbook (`profile-workbooks.ts`). */
const WORKBOOK_PROFILES = new Set<string>(["ekf", "keaz", "iek-pricelist"]);

/**
 * Starts the simulator on `host:port` (127.0.0.1 and a free port by default).
 * Resolves once it is listening.
 */
export async function startSimulator(options: StartSimulatorOptions = {}): Promise<Simulator> {
  const now = options.clock ?? Date.now;
  const host = options.host ?? "127.0.0.1";
  const suppliers = new Map<string, SupplierState>();
  const sockets = new Set<Socket>();
  // Aborted by close(): wakes latency sleeps, hangs and streams so nothing outlives the server.
  const closing = new AbortController();

  const lookup = (name: string): SupplierState => {
    const state = suppliers.get(name);
    if (!state) throw new Error(`simulator: unknown supplier ${JSON.stringify(name)}`);
    return state;
  };

  const control = {
    configure(name: string, o: SimulatorSupplierOptions): void {
      const previous = suppliers.get(name);
      suppliers.set(name, new SupplierState(name, o, now));
      // Requests hanging on the replaced supplier would otherwise wait forever.
      previous?.faults.set({});
    },
    mutate(name: string, m: SimulatorMutation): void {
      lookup(name).catalog.mutate(m);
    },
    setFaults(name: string, faults: SimulatorFaults): void {
      lookup(name).faults.set(faults);
    },
    stats(name: string): SimulatorStats {
      return lookup(name).stats.snapshot();
    },
    resetStats(name: string): void {
      lookup(name).stats.reset();
    },
    has(name: string): boolean {
      return suppliers.has(name);
    },
  };

  for (const [name, o] of Object.entries(options.suppliers ?? {})) control.configure(name, o);

  async function handleOffers(
    req: IncomingMessage,
    res: ServerResponse,
    state: SupplierState,
    url: URL,
    feedFile?: string,
    serve?: () => void,
  ) {
    const stats = state.stats;
    stats.recordRequest(now());
    // Numbered on arrival: requests overlapping a latency sleep keep their own number.
    const requestNumber = stats.requests;
    stats.enter();
    const gone = new AbortController();
    res.once("close", () => {
      stats.leave();
      gone.abort();
    });
    const signal = AbortSignal.any([closing.signal, gone.signal]);
    const latency = state.faults.current.latencyMs;
    if (latency !== undefined && latency > 0) {
      const slept = await delay(latency, true, { signal }).catch(() => false);
      if (!slept) {
        res.destroy();
        return;
      }
    }
    if (!state.admit()) {
      stats.overBudget++;
      sendJson(res, stats, 429, { error: "rate limit exceeded" }, { "retry-after": "1" });
      return;
    }
    const verdict = state.verify(req, url);
    if (verdict !== "ok") {
      if (state.issuer) state.issuer.refuse(res, verdict);
      else sendJson(res, stats, 401, { error: "unauthorized" }, { "www-authenticate": state.auth.type });
      return;
    }
    if (serve) {
      SupplierStats.remember(stats.urls, `${url.pathname}${url.search}`);
      // Profile routes take the status and body-error faults; their "page" is the request's number.
      const fault = state.faults.decide(requestNumber);
      if (fault?.kind === "status")
        sendJson(res, stats, fault.code, { error: `simulated status ${fault.code}` });
      else if (fault?.kind === "bodyError")
        sendJson(res, stats, 200, { status: { code: fault.code, message: fault.message } });
      else serve();
      return;
    }
    if (req.method !== state.method) {
      sendJson(res, stats, 405, { error: "method not allowed" }, { allow: state.method });
      return;
    }
    SupplierStats.remember(stats.urls, `${url.pathname}${url.search}`);
    if (feedFile !== undefined) {
      await serveFeed(state, req, res, feedFile, url, now);
      return;
    }
    if (req.method === "POST") {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      SupplierStats.remember(stats.bodies, {
        contentType: req.headers["content-type"],
        body: Buffer.concat(chunks).toString("utf8"),
      });
    }
    await serveOffers({
      state,
      url,
      res,
      now,
      signal,
      req,
      acceptEncoding: req.headers["accept-encoding"] ?? "",
    });
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://simulator.invalid");
    if (url.pathname === "/_admin" || url.pathname.startsWith("/_admin/")) {
      await handleAdmin(req, res, url, control);
      return;
    }
    const match = SUPPLIER_ROUTE.exec(url.pathname);
    const name = match ? decodeURIComponent(match[1]!) : undefined;
    const state = name === undefined ? undefined : suppliers.get(name);
    const route = match?.[2];
    if (state && route === "/v1/offers") {
      await handleOffers(req, res, state, url);
      return;
    }
    const feed = FEED_ROUTE.exec(url.pathname);
    if (state && feed) {
      await handleOffers(req, res, state, url, feed[2]);
      return;
    }
    if (state && route !== undefined && (EXPORT_CREATE_ROUTE.test(route) || EXPORT_POLL_ROUTE.test(route))) {
      await handleOffers(req, res, state, url, undefined, () => {
        // ETM's own job shapes, its file on the supplier's origin; else the generic job, its file on the file server.
        if (state.profile === "etm") serveEtmJobRoute(state, res, route, url, `${base}/${match?.[1]}`);
        else serveExportRoute(state, req, res, route, url, filesUrl);
      });
      return;
    }
    if (state?.profile === "etm" && route !== undefined && ETM_REPORT_ROUTE.test(route)) {
      await handleOffers(req, res, state, url, undefined, () => {
        serveEtmReport(state, req, res, route, url);
      });
      return;
    }
    if (state?.profile && route !== undefined && route !== "/v1/offers" && !state.issuer?.serves(route)) {
      const profile = state.profile;
      await handleOffers(req, res, state, url, undefined, () => {
        if (WORKBOOK_PROFILES.has(profile)) {
          serveWorkbookProfile(state, req, res, route, now, state.missingDates)
            .then((found) => {
              if (!found) sendJson(res, state.stats, 404, { error: "not found", path: url.pathname });
            })
            .catch(() => res.destroy());
          return;
        }
        if (!serveProfile(profile, state, req, route, url, res))
          sendJson(res, state.stats, 404, { error: "not found", path: url.pathname });
      });
      return;
    }
    if (state?.issuer && route !== undefined && state.issuer.serves(route)) {
      state.stats.recordRequest(now());
      await state.issuer.handle(req, res, url);
      return;
    }
    sendJson(res, undefined, 404, { error: "not found", path: url.pathname });
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendJson(res, undefined, 500, { error: String(err) });
      else res.destroy();
    });
  });
  // Export jobs' files come from a second origin, as pre-signed downloads do.
  const files = createServer((req, res) => {
    serveExportFile((name) => suppliers.get(name), req, res, now).catch(() => res.destroy());
  });
  if (options.keepAliveTimeoutMs !== undefined) server.keepAliveTimeout = options.keepAliveTimeoutMs;
  for (const s of [server, files]) {
    s.on("connection", (socket) => {
      sockets.add(socket);
      socket.once("close", () => sockets.delete(socket));
    });
  }
  let filesUrl = "";
  /** `http://host:port` of this server, once it listens: ETM's export files are on the supplier's own origin. */
  let base = "";

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("simulator: no TCP address");
  const port = address.port;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  const url = `http://${urlHost}:${port}`;
  base = url;
  await new Promise<void>((resolve, reject) => {
    files.once("error", reject);
    files.listen(options.filesPort ?? 0, host, () => {
      files.off("error", reject);
      resolve();
    });
  });
  filesUrl = `http://${urlHost}:${(files.address() as { port: number }).port}`;

  let closed: Promise<void> | undefined;
  return {
    url,
    port,
    baseUrl: (supplier) => `${url}/${encodeURIComponent(supplier)}`,
    configure: control.configure,
    mutate: control.mutate,
    setFaults: control.setFaults,
    stats: control.stats,
    resetStats: control.resetStats,
    offers: (name) => {
      const catalog = lookup(name).catalog;
      return catalog.slice(0, catalog.liveCount);
    },
    liveCount: (name) => lookup(name).catalog.liveCount,
    filesUrl,
    exportJobs: (name) => exportJobs(lookup(name)),
    close() {
      closed ??= new Promise<void>((resolve) => {
        closing.abort();
        let open = 2;
        const done = () => {
          if (--open === 0) resolve();
        };
        server.close(done);
        files.close(done);
        for (const socket of sockets) socket.destroy();
      });
      return closed;
    },
  };
}
