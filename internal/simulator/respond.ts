import type { ServerResponse } from "node:http";
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from "node:zlib";
import type { SupplierStats } from "./stats.js";

/** Writes a complete response and counts its status (when `stats` is given). */
export function sendBody(
  res: ServerResponse,
  stats: SupplierStats | undefined,
  status: number,
  body: string,
  headers: Record<string, string>,
): void {
  stats?.recordStatus(status);
  res.writeHead(status, { ...headers, "content-length": String(Buffer.byteLength(body)) });
  res.end(body);
}

export function sendJson(
  res: ServerResponse,
  stats: SupplierStats | undefined,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  sendBody(res, stats, status, JSON.stringify(body), { "content-type": "application/json", ...headers });
}

/**
 * Announces a Content-Length larger than what is sent, then destroys the
 * socket: the client sees a premature close in the middle of the body.
 */
export function sendTruncated(res: ServerResponse, body: string): void {
  const bytes = Buffer.from(body);
  res.writeHead(200, {
    "content-type": "application/json",
    "content-length": String(bytes.length + Math.max(1024, bytes.length)),
  });
  res.write(bytes.subarray(0, Math.ceil(bytes.length / 2)), () => res.destroy());
}

/** Resolves when `res` can take more data, or false when it closed (or `signal` aborted) first. */
function waitForDrain(res: ServerResponse, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted || res.destroyed) {
      resolve(false);
      return;
    }
    const done = (ok: boolean) => {
      res.off("drain", onDrain);
      res.off("close", onClose);
      signal.removeEventListener("abort", onClose);
      resolve(ok);
    };
    const onDrain = () => done(true);
    const onClose = () => done(false);
    res.on("drain", onDrain);
    res.on("close", onClose);
    signal.addEventListener("abort", onClose, { once: true });
  });
}

const CHUNK = Buffer.alloc(64 * 1024, "x");

/**
 * Streams a syntactically valid JSON page of exactly `bytes` bytes (at least
 * the envelope) without buffering it: one record whose title is a huge string,
 * sent in 64 KiB chunks, waiting for `drain` whenever the socket is full. No
 * Content-Length, so a client must count what it reads to enforce its cap.
 */
export async function streamOversized(
  res: ServerResponse,
  stats: SupplierStats,
  bytes: number,
  signal: AbortSignal,
): Promise<void> {
  const prefix = '{"data":{"items":[{"article":"OVERSIZED","title":"';
  const suffix = '","price":{"value":"1.00","currency":"EUR"},"stock":{"total":0}}]}}';
  let remaining = Math.max(0, bytes - prefix.length - suffix.length);
  stats.recordStatus(200);
  res.writeHead(200, { "content-type": "application/json" });
  res.write(prefix);
  while (remaining > 0) {
    if (signal.aborted || res.destroyed) {
      res.destroy();
      return;
    }
    const piece = remaining >= CHUNK.length ? CHUNK : CHUNK.subarray(0, remaining);
    remaining -= piece.length;
    if (!res.write(piece) && !(await waitForDrain(res, signal))) {
      res.destroy();
      return;
    }
  }
  res.end(suffix);
}

export const HTML_BODY =
  "<!doctype html><html><head><title>Maintenance</title></head><body><h1>Back soon</h1></body></html>";

/**
 * Like {@link sendBody}, compressed with `compression` when the client's
 * Accept-Encoding lists it (`deflate-raw` is sent as `deflate`, as some
 * servers wrongly do).
 */
export function sendCompressed(
  res: ServerResponse,
  stats: SupplierStats,
  status: number,
  body: string,
  compression: "gzip" | "deflate" | "deflate-raw" | "br" | undefined,
  acceptEncoding: string,
  headers: Record<string, string>,
): void {
  const token = compression === "deflate-raw" ? "deflate" : compression;
  const accepted = acceptEncoding.split(",").map((t) => t.split(";")[0]?.trim().toLowerCase());
  if (compression === undefined || token === undefined || !accepted.includes(token)) {
    sendBody(res, stats, status, body, headers);
    return;
  }
  const raw = Buffer.from(body);
  const packed =
    compression === "gzip"
      ? gzipSync(raw)
      : compression === "deflate"
        ? deflateSync(raw)
        : compression === "deflate-raw"
          ? deflateRawSync(raw)
          : brotliCompressSync(raw);
  stats.recordStatus(status);
  res.writeHead(status, { ...headers, "content-encoding": token, "content-length": String(packed.length) });
  res.end(packed);
}

let bomb: Buffer | undefined;

/**
 * A gzip decompression bomb: valid JSON of 16 MiB (one record whose title is
 * spaces) in about 16 KiB, a ratio near 1000:1. Built once, on first use.
 */
export function sendBomb(res: ServerResponse, stats: SupplierStats): void {
  if (!bomb) {
    const prefix = Buffer.from('{"data":{"items":[{"article":"BOMB","title":"');
    const suffix = Buffer.from('","price":{"value":"1.00","currency":"EUR"},"stock":{"total":0}}]}}');
    const filler = Buffer.alloc(16 * 1024 * 1024 - prefix.length - suffix.length, 0x20);
    bomb = gzipSync(Buffer.concat([prefix, filler, suffix]), { level: 9 });
  }
  stats.recordStatus(200);
  res.writeHead(200, {
    "content-type": "application/json",
    "content-encoding": "gzip",
    "content-length": String(bomb.length),
  });
  res.end(bomb);
}
