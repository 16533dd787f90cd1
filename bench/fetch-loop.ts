#!/usr/bin/env node
/**
 * The fetch baseline's process: the bare loop a user would write to read a supplier
 * catalog, and nothing more. It walks the simulator's pages (`?page=N&limit=L`,
 * until an empty page) one request at a time with undici, the HTTP client the
 * connectors use, and `JSON.parse`s each body; no validation, no database. Run as a
 * child like the worker (bench/worker.ts), so it pays the same process and socket
 * costs. Prints one JSON line: `{ ms, records, pages }`.
 *
 * Usage: node dist/bench/fetch-loop.js <supplier base URL> <page size>
 */
import { Pool } from "undici";
import { runMain } from "./child-main.js";

/** The line the loop prints on stdout. */
export interface FetchLoopReport {
  ms: number;
  records: number;
  pages: number;
}

async function main(): Promise<FetchLoopReport> {
  const base = new URL(process.argv[2] ?? "");
  const limit = Number.parseInt(process.argv[3] ?? "", 10);
  if (!Number.isSafeInteger(limit) || limit <= 0) throw new Error(`page size must be a positive integer`);
  const pool = new Pool(base.origin, { connections: 1 });
  const start = process.hrtime.bigint();
  let records = 0;
  let pages = 0;
  for (let page = 1; ; page++) {
    const res = await pool.request({
      method: "GET",
      path: `${base.pathname}/v1/offers?page=${page}&limit=${limit}`,
    });
    if (res.statusCode !== 200) throw new Error(`page ${page}: HTTP ${res.statusCode}`);
    const body = JSON.parse(await res.body.text()) as { data: { items: unknown[] } };
    const count = body.data.items.length;
    if (count === 0) break;
    records += count;
    pages++;
  }
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  await pool.close();
  return { ms, records, pages };
}

runMain(main);
