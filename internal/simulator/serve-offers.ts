import type { IncomingMessage, ServerResponse } from "node:http";
import { contentTag, notModified, validators } from "./feeds.js";
import { BadRequest, buildPage, isFirstPage, type PageRequest, parsePageRequest } from "./pages.js";
import {
  HTML_BODY,
  sendBody,
  sendBomb,
  sendCompressed,
  sendJson,
  sendTruncated,
  streamOversized,
} from "./respond.js";
import { pageText, type SupplierState } from "./supplier.js";

export interface ServeOffersContext {
  state: SupplierState;
  url: URL;
  res: ServerResponse;
  now: () => number;
  /** Aborts when the client goes away or the simulator closes. */
  signal: AbortSignal;
  /** The request's Accept-Encoding, for `compression`. */
  acceptEncoding?: string;
  /** The request itself, for its conditional headers (`pagination: "none"` only). */
  req?: IncomingMessage;
}

/**
 * Answers an admitted, authorised catalog request: the page it asks for, or
 * the fault configured for that page. Walk accounting happens here: a walk
 * starts when its first page is served and completes when its terminal page is.
 */
export async function serveOffers(ctx: ServeOffersContext): Promise<void> {
  const { state, url, res, now, signal } = ctx;
  const stats = state.stats;
  const arrivedAt = now();
  let req: PageRequest;
  try {
    req = parsePageRequest(state, url.searchParams);
  } catch (err) {
    if (!(err instanceof BadRequest)) throw err;
    sendJson(res, stats, 400, { error: err.message });
    return;
  }

  for (;;) {
    const fault = state.faults.decide(req.page);
    if (fault === null) break;
    switch (fault.kind) {
      case "redirect":
        sendBody(res, stats, 302, "", { location: fault.location });
        return;
      case "reset":
        res.socket?.destroy();
        return;
      case "hang":
        if (!(await state.faults.waitWhileHanging(req.page, signal))) {
          res.destroy();
          return;
        }
        continue; // released: decide again, the page may now be served
      case "status":
        sendJson(res, stats, fault.code, { error: `simulated status ${fault.code}` });
        return;
      case "retryAfter": {
        const value = fault.httpDate
          ? new Date(now() + fault.seconds * 1000).toUTCString()
          : String(fault.seconds);
        sendJson(res, stats, 429, { error: "slow down" }, { "retry-after": value });
        return;
      }
      case "truncate":
        sendTruncated(res, pageText(state, buildPage(state, req, state.faults.current).body));
        return;
      case "invalidJson":
        sendBody(res, stats, 200, '{"data":{"items":[{"article":"BROKEN",', {
          "content-type": "application/json",
        });
        return;
      case "missingRecords":
        sendJson(res, stats, 200, { oops: [] });
        return;
      case "oversized":
        await streamOversized(res, stats, fault.bytes, signal);
        return;
      case "bodyError":
        sendJson(res, stats, 200, { status: { code: fault.code, message: fault.message } });
        return;
      case "bomb":
        sendBomb(res, stats);
        return;
    }
  }

  const contentType = state.faults.current.contentType;
  if (contentType?.includes("html")) {
    sendBody(res, stats, 200, HTML_BODY, { "content-type": contentType });
    return;
  }
  // A whole catalog in one response carries validators like a feed file does (docs/conditional-requests.md);
  // matching If-None-Match / If-Modified-Since answer 304.
  const conditional: Record<string, string> = {};
  if (state.pagination === "none") {
    const key = `v1/offers?${url.searchParams.toString()}`;
    const v = validators(state, key, contentTag(state, key), arrivedAt);
    conditional.etag = v.etag;
    conditional["last-modified"] = new Date(v.lastModified).toUTCString();
    if (ctx.req && notModified(ctx.req, v.etag, v.lastModified)) {
      stats.recordStatus(304);
      res.writeHead(304, conditional);
      res.end();
      return;
    }
  }
  const page = buildPage(state, req, state.faults.current);
  const body = state.envelope
    ? { status: { code: 200, message: "OK" }, ...(page.body as Record<string, unknown>) }
    : page.body;
  sendCompressed(res, stats, 200, pageText(state, body), state.compression, ctx.acceptEncoding ?? "", {
    "content-type": contentType ?? "application/json",
    ...page.headers,
    ...conditional,
  });
  if (isFirstPage(req)) stats.startWalk(arrivedAt);
  if (page.terminal) stats.completeWalk(now());
}
