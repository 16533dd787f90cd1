import type { IncomingMessage, ServerResponse } from "node:http";
import { credentialsOn, EXPORT_CREATE_ROUTE, EXPORT_POLL_ROUTE, jobs, newJob } from "./export-jobs.js";
import { etmProduct } from "./profile-etm.js";
import { sendBody, sendJson } from "./respond.js";
import type { SupplierState } from "./supplier.js";

/**
 * ETM's catalog export job as public clients see it (../shared/SUPPLIER-APIS.md, ETM),
 * served for a supplier with the `etm` profile instead of the generic job shape:
 *
 * - `POST` (or `GET`) `/api/v1/job/create/<template>` → `{status, data: {uuid}}`;
 * - `GET /api/v1/job/<uuid>` → `{status, data: {page, rows: [{uuid, state, state_desc,
 *   completed, urls: [{type, url}]}], total, records}}`: `state` 0 while building, 1 ready,
 *   2 failed; written as a string (`"1"`) on odd polls and a number on even ones, as ETM
 *   sends both; `completed` is `"true"` / `"false"`;
 * - the file, at `rows[0].urls[0].url`, is on the supplier's **own origin**:
 *   `GET /<supplier>/report/<uuid>/goods_report.json`, behind the supplier's auth like any
 *   of its routes (a download without the session is refused): a top-level JSON array of
 *   products (`etmProduct`) without prices.
 *
 * The create request's options (`readyAfter`, `fail`, `never`) work as for generic jobs;
 * every download records what credentials came with it (`SimExportJob.downloads`).
 */

export const ETM_REPORT_ROUTE = /^\/report\/([^/]+)\/goods_report\.json$/;

const OK = { code: 200, message: "OK" };
const STATE_DESC = ["В очереди", "Готово", "Ошибка"];

/** Answers an ETM job route (`route` under the supplier); false when it is not one. */
export function serveEtmJobRoute(
  state: SupplierState,
  res: ServerResponse,
  route: string,
  url: URL,
  supplierUrl: string,
): boolean {
  const stats = state.stats;
  const create = EXPORT_CREATE_ROUTE.exec(route);
  if (create) {
    try {
      const job = newJob(decodeURIComponent(create[1] as string), url.searchParams);
      jobs(state).set(job.id, job);
      sendJson(res, stats, 200, { status: OK, data: { uuid: job.id } });
    } catch (err) {
      sendJson(res, stats, 400, { status: { code: 400, message: (err as Error).message } });
    }
    return true;
  }
  const poll = EXPORT_POLL_ROUTE.exec(route);
  if (!poll) return false;
  const uuid = decodeURIComponent(poll[1] as string);
  const job = jobs(state).get(uuid);
  if (!job) {
    sendJson(res, stats, 200, { status: { code: 404, message: `job ${uuid} not found` } });
    return true;
  }
  job.polls++;
  const failed = job.failAt !== undefined && job.polls >= job.failAt;
  const ready = !failed && !job.never && job.polls >= job.readyAfter;
  const code = failed ? 2 : ready ? 1 : 0;
  const file = `${supplierUrl}/report/${encodeURIComponent(job.id)}/goods_report.json`;
  const row = {
    uuid: job.id,
    state: job.polls % 2 === 1 ? String(code) : code,
    state_desc: STATE_DESC[code],
    completed: ready ? "true" : "false",
    urls: ready ? [{ type: "json", url: file }] : [],
  };
  sendJson(res, stats, 200, { status: OK, data: { page: 1, rows: [row], total: 1, records: 1 } });
  return true;
}

/** Answers an admitted, authorised `report/<uuid>/goods_report.json`; false when `route` is not one. */
export function serveEtmReport(
  state: SupplierState,
  req: IncomingMessage,
  res: ServerResponse,
  route: string,
  url: URL,
): boolean {
  const match = ETM_REPORT_ROUTE.exec(route);
  if (!match) return false;
  const job = jobs(state).get(decodeURIComponent(match[1] as string));
  const ready = job !== undefined && job.polls >= job.readyAfter && !job.never;
  if (!job || !ready) {
    sendJson(res, state.stats, 404, { status: { code: 404, message: "report not found" } });
    return true;
  }
  job.downloads.push({ credentials: credentialsOn(state, req, url) });
  const products = state.catalog.slice(0, state.catalog.liveCount).map(etmProduct);
  sendBody(res, state.stats, 200, JSON.stringify(products), { "content-type": "application/json" });
  return true;
}
