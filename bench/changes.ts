#!/usr/bin/env node
/**
 * `npm run bench:changes`: the rate of `supplier-sync changes` against a bare
 * `COPY supplier_offer_observations TO STDOUT` of the same rows, both measured in the
 * same run on the same table (issue 31: at least 0.5× of the bare COPY).
 *
 * In a fresh database: `--rows` (default 1,000,000) observations written as pages
 * would (txid and id set), then, alternating, `--reps` (default 3) repetitions of:
 * bare COPY of the table; the feed streamed as `--json` lines and as text lines
 * (streamChanges, as the CLI runs it: `COPY (SELECT …) TO STDOUT` with the cursor
 * predicate, the snapshot bound, the order by (txid, id) and one line built per row).
 * Every stream is read to the end into a byte counter. Medians and ratios are printed.
 *
 * Usage: node dist/bench/changes.js [--rows N] [--reps N] [--page-rows N (default 1,000)]
 * Database: `BENCH_DATABASE_URL` (a database is created and dropped there), else an
 * embedded PostgreSQL started here.
 */
import { Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import pg from "pg";
import { to as copyTo } from "pg-copy-streams";
import { FEED_START, streamChanges } from "../internal/changes/feed.js";
import { runMain } from "./child-main.js";
import { openBenchDatabase } from "./database.js";

function option(argv: string[], flag: string): string | undefined {
  const i = argv.indexOf(flag);
  return i >= 0 ? argv[i + 1] : undefined;
}

class Counter extends Writable {
  bytes = 0;
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void) {
    this.bytes += chunk.length;
    done();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

interface ChangesReport {
  rows: number;
  pageRows: number;
  reps: number;
  bareCopyRowsPerSecond: number;
  changesJsonRowsPerSecond: number;
  changesTextRowsPerSecond: number;
  jsonRatio: number;
  textRatio: number;
  bytes: { bare: number; json: number; text: number };
}

async function main(): Promise<ChangesReport> {
  const argv = process.argv.slice(2);
  const rows = Number(option(argv, "--rows") ?? 1_000_000);
  const reps = Number(option(argv, "--reps") ?? 3);
  const pageRows = Number(option(argv, "--page-rows") ?? 1_000);
  const server = await openBenchDatabase(process.env.BENCH_DATABASE_URL);
  const db = new pg.Client({ connectionString: server.url });
  try {
    await db.connect();
    process.stderr.write(`bench: writing ${rows} observations\n`);
    // Pages of `--page-rows` per transaction, as the page statement writes them (one txid per
    // page): the feed reads transaction by transaction, so their size is part of what is measured.
    for (let start = 1; start <= rows; start += pageRows) {
      await db.query(
        `insert into supplier_offer_observations
                (supplier, sku, run_id, observed_at, price, currency, stock, content_hash, kind, txid)
         select 'bench', 'SKU-' || lpad(i::text, 8, '0'), 1 + i / 1000, now(), (i % 100000) / 100.0, 'EUR',
                i % 1000, md5(i::text), case when i % 10 = 0 then 'changed' else 'listed' end, pg_current_xact_id()
           from generate_series($1::int, $2::int) as i`,
        [start, Math.min(rows, start + pageRows - 1)],
      );
    }
    await db.query("vacuum analyze supplier_offer_observations");
    // The feed stops at the oldest transaction running on the server (an autovacuum's
    // analyze, say): wait until every row written is behind that horizon.
    for (let waited = 0; ; waited += 100) {
      const { rows: open } = await db.query<{ behind: boolean }>(
        `select coalesce(max(txid) < pg_snapshot_xmin(pg_current_snapshot()), true) as behind
           from supplier_offer_feed_transactions`,
      );
      if (open[0]?.behind) break;
      if (waited > 60_000) throw new Error("the feed's horizon did not pass the rows written within 60 s");
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    // The position of the last row: a read that skipped or repeated rows ends elsewhere.
    const { rows: end } = await db.query<{ cursor: string }>(
      "select txid::text || ':' || id as cursor from supplier_offer_observations order by txid desc, id desc limit 1",
    );
    const lastCursor = end[0]?.cursor;
    const check = (form: string, r: { count: number; cursor: { txid: bigint; id: bigint } }) => {
      const cursor = `${r.cursor.txid}:${r.cursor.id}`;
      if (r.count !== rows || cursor !== lastCursor)
        throw new Error(
          `changes ${form} returned ${r.count} of ${rows} rows, ending at ${cursor}, not ${lastCursor}`,
        );
    };
    const bare: number[] = [];
    const json: number[] = [];
    const text: number[] = [];
    const bytes = { bare: 0, json: 0, text: 0 };
    for (let r = 0; r < reps; r++) {
      let sink = new Counter();
      let t0 = performance.now();
      await pipeline(db.query(copyTo("copy supplier_offer_observations to stdout")), sink);
      bare.push(performance.now() - t0);
      bytes.bare = sink.bytes;

      sink = new Counter();
      t0 = performance.now();
      const a = await streamChanges(db, { since: FEED_START, limit: rows }, sink, { json: true });
      json.push(performance.now() - t0);
      bytes.json = sink.bytes;
      check("--json", a);

      sink = new Counter();
      t0 = performance.now();
      const b = await streamChanges(db, { since: FEED_START, limit: rows }, sink, { json: false });
      text.push(performance.now() - t0);
      bytes.text = sink.bytes;
      check("(text)", b);
      process.stderr.write(
        `rep ${r + 1}: bare ${bare.at(-1)?.toFixed(0)} ms, json ${json.at(-1)?.toFixed(0)} ms, text ${text.at(-1)?.toFixed(0)} ms\n`,
      );
    }
    const rate = (ms: number) => Math.round(rows / (ms / 1000));
    return {
      rows,
      pageRows,
      reps,
      bareCopyRowsPerSecond: rate(median(bare)),
      changesJsonRowsPerSecond: rate(median(json)),
      changesTextRowsPerSecond: rate(median(text)),
      jsonRatio: Number((median(bare) / median(json)).toFixed(2)),
      textRatio: Number((median(bare) / median(text)).toFixed(2)),
      bytes,
    };
  } finally {
    await db.end().catch(() => {});
    await server.stop();
  }
}

runMain(main);
