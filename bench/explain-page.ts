#!/usr/bin/env node
/**
 * The database's view of one page: `EXPLAIN (ANALYZE, WAL, BUFFERS)` of the page
 * statement (`WRITE_PAGE` in internal/store/offers.ts) as `commitPage` runs it, for a
 * first-load page (5,000 new offers) and an unchanged page (5,000 stored offers), on
 * a catalog of `--skus` offers already written through `commitPage`. Each explained
 * statement runs inside a transaction that is rolled back, so it writes nothing.
 *
 * Usage: node dist/bench/explain-page.js [--skus N] [--page-size N]
 * Uses `BENCH_DATABASE_URL` if set, else an embedded PostgreSQL started for this run.
 */
import pg from "pg";
import { commitPage, WRITE_PAGE, writePageParameters } from "../internal/store/offers.js";
import { startRun } from "../internal/store/runs.js";
import { SeenSetPreparation } from "../internal/store/seen-set.js";
import { runMain } from "./child-main.js";
import { openBenchDatabase } from "./database.js";
import { BENCH_SUPPLIER, BenchCatalog } from "./dataset.js";

function intOption(argv: string[], flag: string, fallback: number): number {
  const i = argv.indexOf(flag);
  const raw = i >= 0 ? argv[i + 1] : undefined;
  const n = raw === undefined ? fallback : Number.parseInt(raw, 10);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`${flag} needs a positive integer, got ${raw}`);
  return n;
}

async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const skus = intOption(argv, "--skus", 200_000);
  const pageSize = intOption(argv, "--page-size", 5_000);
  const database = await openBenchDatabase(env.BENCH_DATABASE_URL);
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  try {
    // One page more than the stored catalog: the last one is the first-load page.
    const pages = new BenchCatalog(BENCH_SUPPLIER, skus + pageSize, pageSize).pages();
    const fresh = pages.pop();
    const stored = pages[Math.floor(pages.length / 2)];
    if (!fresh || !stored) throw new Error("--skus must be at least one page");
    const runId = await startRun(client, {
      supplier: BENCH_SUPPLIER,
      slotStart: new Date(),
      trigger: "forced",
      owner: { hostname: "bench", pid: process.pid, bootId: "explain" },
    });
    process.stderr.write(`explain: writing ${skus} offers through commitPage\n`);
    for (const page of pages) await commitPage(client, { runId, supplier: BENCH_SUPPLIER, page });
    await client.query("vacuum analyze supplier_offers");
    await client.query("checkpoint").catch(() => {});

    let seq = pages.length + 1;
    const explain = async (label: string, page: typeof fresh): Promise<void> => {
      await client.query("begin");
      try {
        await new SeenSetPreparation().prepare(client, runId);
        const { rows } = await client.query<{ "QUERY PLAN": string }>(
          `explain (analyze, wal, buffers) ${WRITE_PAGE}`,
          writePageParameters(runId, BENCH_SUPPLIER, { ...page, seq: seq++, rejects: [] }),
        );
        if (label) process.stdout.write(`== ${label}\n${rows.map((r) => r["QUERY PLAN"]).join("\n")}\n\n`);
      } finally {
        await client.query("rollback");
      }
    };
    // Warm the caches and the plan once, unreported.
    await explain("", stored);
    await explain(`first-load page: ${fresh.offers.length} new offers, ${skus} stored`, fresh);
    await explain(`unchanged page: ${stored.offers.length} stored offers, ${skus} stored`, stored);
  } finally {
    await client.end().catch(() => {});
    await database.stop();
  }
}

runMain(() => main(process.argv.slice(2), process.env));
