/**
 * The benchmark's PostgreSQL: `BENCH_DATABASE_URL` (passed in by bench/run.ts), else
 * an embedded PostgreSQL started for this run only (as test/run.mjs does), plus the
 * probes every case reads before and after: WAL position and table statistics.
 */
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import pg from "pg";
import { runMigrations } from "../internal/store/migrate.js";
import type * as PgRuntime from "../test/support/pg-runtime.mjs";
import { PROJECT_ROOT } from "./child.js";

/**
 * The runners' shared helper (test/support/pg-runtime.mjs, plain JavaScript): loaded
 * from the project root at run time, since the bench runs from dist and the helper is
 * not compiled.
 */
async function pgRuntime(): Promise<typeof PgRuntime> {
  return import(pathToFileURL(join(PROJECT_ROOT, "test/support/pg-runtime.mjs")).href);
}

export interface BenchDatabase {
  /** URL of the migrated benchmark database. */
  readonly url: string;
  /** `select version()` and the settings that decide write speed. */
  readonly server: Record<string, string>;
  stop(): Promise<void>;
}

/**
 * Starts (or connects to) PostgreSQL and creates a fresh database `supplier_sync_bench_<pid>`,
 * migrated unless `migrate` is false.
 */
export async function openBenchDatabase(
  externalUrl: string | undefined,
  options: { migrate?: boolean } = {},
): Promise<BenchDatabase> {
  const runtime = await pgRuntime();
  const embedded = externalUrl
    ? undefined
    : // Defaults otherwise (fsync on): the figures are those of a stock server.
      await runtime.startEmbeddedPostgres({
        prefix: "supplier-sync-bench-pg-",
        flags: ["max_connections=1200"],
      });
  const adminUrl = externalUrl ?? embedded?.url ?? "";
  const name = `supplier_sync_bench_${process.pid}`;
  const url = await runtime.createDatabase(
    adminUrl,
    name,
    options.migrate === false ? undefined : runMigrations,
  );
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  const { rows } = await pool.query<{ name: string; setting: string }>(
    `select 'version' as name, version() as setting
     union all
     select name, setting || coalesce(unit, '') from pg_settings
      where name in ('shared_buffers', 'fsync', 'synchronous_commit', 'wal_level', 'max_wal_size',
                     'work_mem', 'full_page_writes', 'checkpoint_timeout')`,
  );
  await pool.end();
  return {
    url,
    server: Object.fromEntries(rows.map((r) => [r.name, r.setting])),
    async stop() {
      await runtime.dropDatabase(adminUrl, name);
      await embedded?.stop();
    },
  };
}

/** What a case reads before and after itself to report its cost in the database. */
export interface DbProbe {
  walLsn: string;
  /** `supplier_offers` cumulative stats (reads them after the writers' sessions ended or flushed). */
  offersDead: number;
  offersUpdated: number;
  observations: number;
}

export async function probeDatabase(db: pg.ClientBase | pg.Pool): Promise<DbProbe> {
  const { rows } = await db.query<{ lsn: string; dead: string; upd: string; obs: string }>(
    `select pg_current_wal_lsn()::text as lsn,
            coalesce((select n_dead_tup from pg_stat_user_tables where relname = 'supplier_offers'), 0) as dead,
            coalesce((select n_tup_upd from pg_stat_user_tables where relname = 'supplier_offers'), 0) as upd,
            (select count(*) from supplier_offer_observations) as obs`,
  );
  const row = rows[0];
  if (!row) throw new Error("probe returned no row");
  return {
    walLsn: row.lsn,
    offersDead: Number(row.dead),
    offersUpdated: Number(row.upd),
    observations: Number(row.obs),
  };
}

/** WAL bytes between two probes (`pg_wal_lsn_diff`). */
export async function walBytesBetween(
  db: pg.ClientBase | pg.Pool,
  before: DbProbe,
  after: DbProbe,
): Promise<number> {
  const { rows } = await db.query<{ bytes: string }>("select pg_wal_lsn_diff($1, $2)::text as bytes", [
    after.walLsn,
    before.walLsn,
  ]);
  return Number(rows[0]?.bytes ?? 0);
}

/**
 * Statistics are flushed by each backend lazily (PostgreSQL 15+: at the end of a
 * transaction at most once a second, else after 10 s idle, and when the session
 * ends). Forces the flush of `writer` (the session that did the work, if still
 * open) and of `db`'s session, so a probe after a case sees that case's dead tuples.
 */
export async function settleStats(db: pg.Pool, writer?: pg.ClientBase): Promise<void> {
  await writer?.query("select pg_stat_force_next_flush()");
  await writer?.query("select 1");
  await db.query("select pg_stat_force_next_flush()");
  await db.query("select pg_stat_clear_snapshot()");
}

/** Empties every table the cases write, so each repetition starts from the same state. */
export async function resetTables(db: pg.Pool): Promise<void> {
  const client = await db.connect();
  try {
    await client.query(
      `truncate supplier_offers, supplier_offer_observations, supplier_offer_feed_transactions, ingestion_rejects, ingestion_run_steps,
         ingestion_held_skus, ingestion_held, ingestion_runs`,
    );
    // Dead tuples are part of what is measured: autovacuum must not remove them mid-case.
    await client.query("alter table supplier_offers set (autovacuum_enabled = off)");
    await client.query("checkpoint").catch(() => {});
    // The truncation zeroes n_dead_tup only once this session flushes its statistics:
    // without this, the next "before" probe could still see the previous case's dead
    // tuples, and a first load would show a negative count.
    await settleStats(db, client);
  } finally {
    client.release();
  }
}

/**
 * Waits (bounded) until no session of `applicationName` is left on the server: a
 * child process has exited, but its backends flush their statistics as they end.
 */
export async function waitForSessionsToEnd(
  db: pg.Pool,
  applicationName: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await db.query<{ n: number }>(
      "select count(*)::int as n from pg_stat_activity where application_name = $1",
      [applicationName],
    );
    if (rows[0]?.n === 0) break;
    if (Date.now() > deadline)
      throw new Error(`sessions of ${applicationName} still open after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await db.query("select pg_stat_clear_snapshot()");
}
