import { readMigrationFiles } from "drizzle-orm/migrator";
import type pg from "pg";
import { errorMessage, InfraError } from "../platform/errors.js";
import { migrationsFolder } from "./db.js";
import { watchStatements } from "./deadline.js";

/** A long-held connection's protection against a silent network loss (internal/lease/deadlines.ts). */
export interface MigrationDeadlines {
  /** Client-side deadline of the short statements around the migrations. */
  statementMs: number;
  /** Server-side settings (`tcp_keepalives_*`, `tcp_user_timeout`), set for the transaction. */
  server: Record<string, string>;
}

/** Advisory lock key that serialises migrations across every instance starting together. */
export const MIGRATION_LOCK_KEY = "supplier-sync:migrate";

/** Client-side deadline of one migration statement (with `deadlines`): 5 minutes. */
export const MIGRATION_STATEMENT_MS = 5 * 60_000;
/** Pause between two tries of the migration lock while another instance migrates. */
const LOCK_POLL_MS = 250;

/**
 * Applies the generated migrations in `drizzle/`, recorded in drizzle's own
 * `drizzle.__drizzle_migrations` exactly as drizzle-kit's migrator records them.
 *
 * Everything happens in ONE transaction that first takes a transaction-level advisory
 * lock: several processes starting together take turns, and each later one finds
 * nothing left to apply. A transaction lock (not a session lock) so that this works
 * through any pooler: behind a transaction pooler a session lock would stay with
 * whichever server session took it, and the next instance would wait on it forever.
 *
 * With `deadlines`, the transaction first asks the server to drop this session within
 * `SUPPLIER_SYNC_LEASE_DEAD_PEER` when it can no longer reach it (so a migrator cut off
 * from the network does not hold the lock, and every other instance's start, for
 * hours), and every statement has a client-side deadline: the short ones around the
 * migrations `statementMs`; the wait for another instance's migrations is a poll of
 * `pg_try_advisory_xact_lock` (each try under that deadline, so the wait may last as long
 * as the other migrator needs, yet a lost network is noticed); the migrations' own
 * statements {@link MIGRATION_STATEMENT_MS} (they are online by design: a long one is
 * waiting on a lock or on a dead network, not working).
 */
export async function runMigrations(pool: pg.Pool, deadlines?: MigrationDeadlines): Promise<void> {
  const migrations = readMigrationFiles({ migrationsFolder: migrationsFolder() });
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw new InfraError(`database unreachable: ${errorMessage(err)}`, { cause: err });
  }
  let broken = false;
  let unwatch = () => {};
  const watch = (ms = deadlines?.statementMs) => {
    unwatch();
    if (deadlines && ms !== undefined)
      unwatch = watchStatements(client, ms, "migrations: statement deadline");
  };
  try {
    watch();
    await client.query("begin");
    for (const [name, value] of Object.entries(deadlines?.server ?? {})) {
      await client.query("select set_config($1, $2, true)", [name, value]);
    }
    if (deadlines) {
      for (;;) {
        const { rows: lock } = await client.query<{ locked: boolean }>(
          "select pg_try_advisory_xact_lock(hashtext($1)::bigint) as locked",
          [MIGRATION_LOCK_KEY],
        );
        if (lock[0]?.locked) break;
        await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
      }
    } else {
      await client.query("select pg_advisory_xact_lock(hashtext($1)::bigint)", [MIGRATION_LOCK_KEY]);
    }
    await client.query("create schema if not exists drizzle");
    await client.query(`create table if not exists drizzle.__drizzle_migrations (
      id serial primary key, hash text not null, created_at bigint)`);
    const { rows } = await client.query<{ created_at: string | null }>(
      "select created_at from drizzle.__drizzle_migrations order by created_at desc limit 1",
    );
    const last = rows[0]?.created_at == null ? undefined : Number(rows[0].created_at);
    watch(deadlines ? Math.max(deadlines.statementMs, MIGRATION_STATEMENT_MS) : undefined);
    for (const migration of migrations) {
      if (last !== undefined && last >= migration.folderMillis) continue;
      for (const statement of migration.sql) {
        if (
          statement.trim() !== "" &&
          concurrentIndex(statement) === null &&
          concurrentDrop(statement) === null
        )
          await client.query(statement);
      }
      await client.query("insert into drizzle.__drizzle_migrations (hash, created_at) values ($1, $2)", [
        migration.hash,
        migration.folderMillis,
      ]);
    }
    watch();
    await client.query("commit");
  } catch (err) {
    broken = true;
    unwatch();
    await client.query("rollback").catch(() => {});
    throw new InfraError(`migrations failed: ${errorMessage(err)}`, { cause: err });
  } finally {
    unwatch();
    client.release(broken);
  }
  await buildConcurrentIndexes(
    pool,
    migrations.flatMap((m) => m.sql),
  );
}

/**
 * The name of the index a `CREATE INDEX CONCURRENTLY IF NOT EXISTS "name"` statement
 * builds, or null for any other statement.
 */
export function concurrentIndex(statement: string): string | null {
  const match = /^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+"([^"]+)"/i.exec(
    statement,
  );
  return match?.[1] ?? null;
}

/**
 * The name of the index a `DROP INDEX CONCURRENTLY IF EXISTS "name"` statement drops, or
 * null for any other statement.
 */
export function concurrentDrop(statement: string): string | null {
  const match = /^\s*DROP\s+INDEX\s+CONCURRENTLY\s+IF\s+EXISTS\s+"([^"]+)"/i.exec(statement);
  return match?.[1] ?? null;
}

/**
 * Online indexes: a migration's `CREATE INDEX CONCURRENTLY IF NOT EXISTS` statements
 * cannot run in the migration's transaction (PostgreSQL refuses), and a plain
 * `CREATE INDEX` would block writes to a table of millions of rows while it builds.
 * So they run after the commit, each on its own, on every start: a missing index is
 * built, an invalid one (a build that died half-way) is dropped and built again, a
 * valid one costs one catalog query. Several instances starting together: the first
 * build registers the name at once and the others' `IF NOT EXISTS` skips it (a build
 * that raced another one at the catalog looks again, {@link racedAnotherBuild}); an index
 * another session is still building is left to it (its build shows in
 * `pg_stat_progress_create_index`). Until the index exists queries are slower, never wrong.
 *
 * Dropped indexes alike: a `DROP INDEX CONCURRENTLY IF EXISTS` runs here, in its place
 * among the builds (a plain `DROP INDEX` in the transaction would lock the table against
 * reads and writes until the commit, and wait behind every reader first), and an index
 * that a later migration drops is not built at all.
 */
async function buildConcurrentIndexes(pool: pg.Pool, statements: string[]): Promise<void> {
  for (const [i, statement] of statements.entries()) {
    const dropped = concurrentDrop(statement);
    const name = dropped ?? concurrentIndex(statement);
    if (name === null) continue;
    if (dropped === null && statements.slice(i + 1).some((later) => concurrentDrop(later) === name)) continue;
    // Two instances building two different indexes at once can deadlock (each build waits
    // for the other's transaction); PostgreSQL cancels one, leaving its index invalid. The
    // cancelled side looks again: a valid or building index is left, an invalid one rebuilt.
    for (let attempt = 1; ; attempt++) {
      try {
        if (dropped === null) await buildConcurrentIndex(pool, name, statement);
        else await dropConcurrentIndex(pool, name, statement);
        break;
      } catch (err) {
        const code = (err as { code?: string }).code;
        // 42P07: another instance registered the same index between our check and our build.
        if (code === "42P07") break;
        if (racedAnotherBuild(err) && attempt < CONCURRENT_INDEX_ATTEMPTS) {
          await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 200 * attempt));
          continue;
        }
        const doing = dropped === null ? "building" : "dropping";
        throw new InfraError(`migrations failed: ${doing} index ${name}: ${errorMessage(err)}`, {
          cause: err,
        });
      }
    }
  }
}

/** Builds of one index tried when another instance's build got in the way. */
const CONCURRENT_INDEX_ATTEMPTS = 5;

/**
 * Whether a build failed because another instance was building at the same moment, so a
 * fresh look decides what is left to do: a deadlock between two builds (40P01), the same
 * name registered twice at once (23505 on the catalog's unique index), or two sessions
 * updating the same catalog row (PostgreSQL's internal error "tuple concurrently
 * updated", XX000, seen with three `migrate` processes on an empty database).
 */
function racedAnotherBuild(err: unknown): boolean {
  const { code, message } = err as { code?: string; message?: string };
  if (code === "40P01" || code === "23505") return true;
  return code === "XX000" && /tuple concurrently (updated|deleted)/.test(message ?? "");
}

async function buildConcurrentIndex(pool: pg.Pool, name: string, statement: string): Promise<void> {
  const { rows } = await pool.query<{ valid: boolean; building: boolean }>(
    `select i.indisvalid as valid,
            exists (select 1 from pg_stat_progress_create_index p where p.index_relid = c.oid) as building
       from pg_class c join pg_index i on i.indexrelid = c.oid
      where c.relname = $1 and c.relnamespace = 'public'::regnamespace`,
    [name],
  );
  const found = rows[0];
  if (found?.valid || found?.building) return;
  if (found) await pool.query(`drop index concurrently if exists "${name}"`);
  await pool.query(statement);
}

/** Drops the index when it exists (one catalog query when it does not). */
async function dropConcurrentIndex(pool: pg.Pool, name: string, statement: string): Promise<void> {
  const { rowCount } = await pool.query(
    "select 1 from pg_class where relname = $1 and relnamespace = 'public'::regnamespace and relkind = 'i'",
    [name],
  );
  if (rowCount !== 0) await pool.query(statement);
}
