#!/usr/bin/env node
/**
 * `npm run bench:migration`: how long a migration holds its lock on a big
 * `supplier_offers` (docs/architecture.md, The store: never longer than a catalog page would). In a fresh
 * database: the migrations before `--migration` (default the newest), 1M offers and
 * their observations, then that migration in one transaction (as drizzle applies
 * it), while a second session reads and writes `supplier_offers` every 2 ms and
 * inserts an observation every 2 ms, and records its longest wait. A migration's
 * `CREATE INDEX CONCURRENTLY` and `DROP INDEX CONCURRENTLY` statements run after its
 * commit, timed apart.
 *
 * Usage: node dist/bench/migration-lock.js [--offers N] [--migration 0001_offer_attributes]
 * Database: `BENCH_DATABASE_URL` (a database is created and dropped there), else an
 * embedded PostgreSQL started here.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import { migrationsFolder } from "../internal/store/db.js";
import { concurrentDrop, concurrentIndex } from "../internal/store/migrate.js";
import { runMain } from "./child-main.js";
import { openBenchDatabase } from "./database.js";

function option(argv: string[], flag: string): string | undefined {
  const i = argv.indexOf(flag);
  return i >= 0 ? argv[i + 1] : undefined;
}

function statements(file: string): string[] {
  return readFileSync(join(migrationsFolder(), file), "utf8")
    .split("--> statement-breakpoint")
    .map((s) => s.trim())
    .filter(Boolean);
}

interface MigrationLockReport {
  offers: number;
  migration: string;
  /** Wall time of the migration's transaction: its locks are held until its commit. */
  migrationMs: number;
  /** Wall time of the migration's CREATE INDEX CONCURRENTLY statements, run after its commit (writes go on meanwhile). */
  concurrentIndexMs: number;
  /** The longest a concurrent read + update of one offer + insert of one observation waited while it ran. */
  longestConcurrentWaitMs: number;
  concurrentStatements: number;
}

async function main(): Promise<MigrationLockReport> {
  const argv = process.argv.slice(2);
  const offers = Number(option(argv, "--offers") ?? 1_000_000);
  const files = readdirSync(migrationsFolder())
    .filter((f) => f.endsWith(".sql"))
    .sort();
  const migration = option(argv, "--migration") ?? files.at(-1)?.replace(/\.sql$/, "");
  const index = files.indexOf(`${migration}.sql`);
  if (index < 1)
    throw new Error(`--migration ${migration}: not a migration after the first in ${migrationsFolder()}`);

  const server = await openBenchDatabase(process.env.BENCH_DATABASE_URL, { migrate: false });
  const db = new pg.Client({ connectionString: server.url });
  const probe = new pg.Client({ connectionString: server.url });
  try {
    await db.connect();
    await probe.connect();
    for (const file of files.slice(0, index)) for (const s of statements(file)) await db.query(s);
    process.stderr.write(`bench: ${offers} offers before ${migration}\n`);
    await db.query(
      `insert into supplier_offers (supplier, sku, name, price, currency, stock, content_hash, last_run_id)
       select 'bench', 'SKU-' || lpad(i::text, 8, '0'), 'Offer ' || i, (i % 100000) / 100.0, 'EUR', i % 1000, md5(i::text), 1
         from generate_series(1, $1) as i`,
      [offers],
    );
    await db.query(
      `insert into supplier_offer_observations (supplier, sku, run_id, price, currency, stock, content_hash)
       select supplier, sku, 1, price, currency, stock, content_hash from supplier_offers`,
    );
    await db.query("vacuum analyze supplier_offers");
    await db.query("vacuum analyze supplier_offer_observations");

    let running = true;
    let longest = 0;
    let concurrent = 0;
    const loop = (async () => {
      for (let i = 0; running; i++) {
        const start = performance.now();
        await probe.query("select price from supplier_offers where supplier = 'bench' and sku = $1", [
          `SKU-${String((i % offers) + 1).padStart(8, "0")}`,
        ]);
        await probe.query("update supplier_offers set stock = stock where supplier = 'bench' and sku = $1", [
          `SKU-${String((i % offers) + 1).padStart(8, "0")}`,
        ]);
        // A page's observation write: the table the change-feed migration (0006) alters and indexes.
        await probe.query(
          `insert into supplier_offer_observations (supplier, sku, run_id, price, currency, stock, content_hash)
           values ('bench', $1, $2, 1, 'EUR', 1, 'h')`,
          [`SKU-${String((i % offers) + 1).padStart(8, "0")}`, 1_000_000 + i],
        );
        longest = Math.max(longest, performance.now() - start);
        concurrent += 3;
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    await new Promise((r) => setTimeout(r, 200));
    const start = performance.now();
    const all = statements(`${migration}.sql`);
    await db.query("begin");
    const online = (s: string) => concurrentIndex(s) !== null || concurrentDrop(s) !== null;
    for (const s of all) if (!online(s)) await db.query(s);
    await db.query("commit");
    const migrationMs = performance.now() - start;
    // Online indexes are built (and dropped) after the transaction, as runMigrations does (migrate.ts).
    const concurrentStart = performance.now();
    for (const s of all) if (online(s)) await db.query(s);
    const concurrentIndexMs = performance.now() - concurrentStart;
    await new Promise((r) => setTimeout(r, 200));
    running = false;
    await loop;
    return {
      offers,
      migration: migration ?? "",
      migrationMs,
      concurrentIndexMs,
      longestConcurrentWaitMs: longest,
      concurrentStatements: concurrent,
    };
  } finally {
    await db.end().catch(() => {});
    await probe.end().catch(() => {});
    await server.stop();
  }
}

runMain(main);
