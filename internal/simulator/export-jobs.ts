import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { serveFeed } from "./feeds.js";
import { sendJson } from "./respond.js";
import type { SupplierState } from "./supplier.js";
import type { SimExportJob } from "./types.js";

/**
 * ETM-like export jobs (docs/feeds.md, Export jobs; docs/cookbook.md, ETM): the catalog is
 * built as a file on request.
 *
 * - `POST /<supplier>/api/v1/job/create/<template>` → `{status:{code:200}, data:{id}}`;
 * - `GET /<supplier>/api/v1/job/<id>` → `{status, data:{id, state, urls}}`: `state` 0 while
 *   building, 1 when ready (`urls: [{url}]`), -1 when it failed;
 * - the file is served from a **second loopback origin** (the simulator's file server,
 *   `Simulator.filesUrl`): `GET <filesUrl>/<supplier>/export/<id>/<file>`, generated from
 *   the catalog by the feed routes (`feeds.ts`), with the job's feed options.
 *
 * Both job routes go through the supplier's auth, rate budget and faults like any
 * route. Options, as query parameters of the create request:
 * - `readyAfter=N`: ready at the N-th poll (default 1: the first poll);
 * - `fail=N`: the N-th poll answers `state: -1` (a failed job);
 * - `never=1`: never ready;
 * - `file=feed.json|feed.yml|offers.xml|feed.csv|feed.jsonl` (default `feed.json`);
 * - any feed option (`compress`, `encoding`, `truncate`, …), passed to the file.
 *
 * Every download records whether credentials arrived with it (`SimExportJob.downloads`):
 * an `Authorization`, `Cookie` or the supplier's auth header, or a query parameter that
 * is not a feed option (a session id, an access code).
 */

export const EXPORT_CREATE_ROUTE = /^\/api\/v1\/job\/create\/([^/]+)$/;
export const EXPORT_POLL_ROUTE = /^\/api\/v1\/job\/([^/]+)$/;
export const EXPORT_FILE_ROUTE =
  /^\/([^/]+)\/export\/([^/]+)\/(feed\.yml|offers\.xml|feed\.csv|feed\.jsonl|feed\.json)$/;

const FEED_OPTIONS = new Set([
  "encoding",
  "declare",
  "compress",
  "zipExtra",
  "truncate",
  "cut",
  "bomb",
  "attack",
  "malformed",
  "price",
]);
const FILES = new Set(["feed.yml", "offers.xml", "feed.csv", "feed.jsonl", "feed.json"]);

export interface Job extends SimExportJob {
  readyAfter: number;
  failAt: number | undefined;
  never: boolean;
  file: string;
  feedQuery: URLSearchParams;
}

const jobsOf = new WeakMap<SupplierState, Map<string, Job>>();

export function jobs(state: SupplierState): Map<string, Job> {
  let map = jobsOf.get(state);
  if (!map) {
    map = new Map();
    jobsOf.set(state, map);
  }
  return map;
}

/** The supplier's export jobs, oldest first (what the tests look at). */
export function exportJobs(state: SupplierState): SimExportJob[] {
  return [...jobs(state).values()].map((j) => ({
    id: j.id,
    template: j.template,
    polls: j.polls,
    downloads: j.downloads.map((d) => ({ ...d })),
  }));
}

function positive(params: URLSearchParams, name: string): number | undefined {
  const v = params.get(name);
  if (v === null) return undefined;
  if (!/^[1-9]\d*$/.test(v)) throw new Error(`${name} must be a positive integer`);
  return Number(v);
}

/** A job from the create request's options (see above); throws for a bad option. */
export function newJob(template: string, params: URLSearchParams): Job {
  const file = params.get("file") ?? "feed.json";
  if (!FILES.has(file)) throw new Error(`file must be one of ${[...FILES].join(", ")}`);
  const feedQuery = new URLSearchParams();
  for (const [k, v] of params) if (FEED_OPTIONS.has(k)) feedQuery.append(k, v);
  return {
    id: randomUUID(),
    template,
    polls: 0,
    downloads: [],
    readyAfter: positive(params, "readyAfter") ?? 1,
    failAt: positive(params, "fail"),
    never: params.get("never") === "1",
    file,
    feedQuery,
  };
}

/**
 * Answers an admitted, authorised job route (`route` is the path under the
 * supplier). False when `route` is not one.
 */
export function serveExportRoute(
  state: SupplierState,
  req: IncomingMessage,
  res: ServerResponse,
  route: string,
  url: URL,
  filesUrl: string,
): boolean {
  const stats = state.stats;
  const create = EXPORT_CREATE_ROUTE.exec(route);
  if (create) {
    if (req.method !== "POST") {
      sendJson(res, stats, 405, { error: "method not allowed" }, { allow: "POST" });
      return true;
    }
    let job: Job;
    try {
      job = newJob(decodeURIComponent(create[1] as string), url.searchParams);
    } catch (err) {
      sendJson(res, stats, 400, { status: { code: 400, message: (err as Error).message } });
      return true;
    }
    jobs(state).set(job.id, job);
    sendJson(res, stats, 200, { status: { code: 200, message: "ok" }, data: { id: job.id } });
    return true;
  }
  const poll = EXPORT_POLL_ROUTE.exec(route);
  if (poll) {
    if (req.method !== "GET") {
      sendJson(res, stats, 405, { error: "method not allowed" }, { allow: "GET" });
      return true;
    }
    const id = decodeURIComponent(poll[1] as string);
    const job = jobs(state).get(id);
    if (!job) {
      sendJson(res, stats, 200, { status: { code: 404, message: `job ${id} not found` } });
      return true;
    }
    job.polls++;
    const failed = job.failAt !== undefined && job.polls >= job.failAt;
    const ready = !failed && !job.never && job.polls >= job.readyAfter;
    const query = job.feedQuery.toString();
    const fileUrl = `${filesUrl}/${encodeURIComponent(state.name)}/export/${job.id}/${job.file}${query ? `?${query}` : ""}`;
    sendJson(res, stats, 200, {
      status: { code: 200, message: "ok" },
      data: { id: job.id, state: failed ? -1 : ready ? 1 : 0, urls: ready ? [{ url: fileUrl }] : [] },
    });
    return true;
  }
  return false;
}

/** Names of what would carry credentials on a request to the file server. */
export function credentialsOn(state: SupplierState, req: IncomingMessage, url: URL): string[] {
  const found: string[] = [];
  for (const name of ["authorization", "cookie", "proxy-authorization"]) {
    if (req.headers[name] !== undefined) found.push(`header ${name}`);
  }
  const auth = state.auth;
  if (auth.type === "header" && req.headers[auth.name.toLowerCase()] !== undefined) {
    found.push(`header ${auth.name.toLowerCase()}`);
  }
  if (auth.type === "session" && auth.sendAs && "header" in auth.sendAs) {
    const name = auth.sendAs.header.toLowerCase();
    if (req.headers[name] !== undefined && !found.includes(`header ${name}`)) found.push(`header ${name}`);
  }
  for (const k of url.searchParams.keys()) if (!FEED_OPTIONS.has(k)) found.push(`query ${k}`);
  return found;
}

/**
 * The file server's handler (the second origin): an export's file, or 404.
 * It checks no credentials (a pre-signed download URL) and records any that arrive.
 */
export async function serveExportFile(
  lookup: (name: string) => SupplierState | undefined,
  req: IncomingMessage,
  res: ServerResponse,
  now: () => number,
): Promise<void> {
  const url = new URL(req.url ?? "/", "http://files.invalid");
  const match = EXPORT_FILE_ROUTE.exec(url.pathname);
  const state = match ? lookup(decodeURIComponent(match[1] as string)) : undefined;
  const job = state && match ? jobs(state).get(match[2] as string) : undefined;
  if (!state || !job || !match || match[3] !== job.file || req.method !== "GET") {
    sendJson(res, undefined, 404, { error: "not found", path: url.pathname });
    return;
  }
  state.stats.recordRequest(now());
  job.downloads.push({ credentials: credentialsOn(state, req, url) });
  await serveFeed(state, req, res, job.file, url, now);
}
