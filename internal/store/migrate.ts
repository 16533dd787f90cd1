import { readMigrationFiles } from "drizzle-orm/migrator";
import type pg from "pg";
import { errorMessage, InfraError } from "../platform/errors.js";
import { migrationsFolder } from "./db.js";

/** Advisory lock key that serialises migrations across every instance starting together. */
export const MIGRATION_LOCK_KEY = "supplier-sync:migrate";

/**
 * Applies the generated migrations in `drizzle/`, recorded in drizzle's own
 * `drizzle.__drizzle_migrations` exactly as drizzle-kit's migrator records them.
 *
 * Everything happens in ONE transaction that first takes a transaction-level advisory
 * lock: several processes starting together take turns, and each later one finds
 * nothing left to apply. A transaction lock (not a session lock) so that this works
 * through any pooler: behind a transaction pooler a session lock would stay with
 * whichever server session took it, and the next instance would wait on it forever.
 */
export async function runMigrations(pool: pg.Pool): Promise<void> {
  const migrations = readMigrationFiles({ migrationsFolder: migrationsFolder() });
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw new InfraError(`database unreachable: ${errorMessage(err)}`, { cause: err });
  }
  let broken = false;
  try {
    await client.query("begin");
    await client.query("select pg_advisory_xact_lock(hashtext($1)::bigint)", [MIGRATION_LOCK_KEY]);
    await client.query("create schema if not exists drizzle");
    await client.query(`create table if not exists drizzle.__drizzle_migrations (
      id serial primary key, hash text not null, created_at bigint)`);
    const { rows } = await client.query<{ created_at: string | null }>(
      "select created_at from drizzle.__drizzle_migrations order by created_at desc limit 1",
    );
    const last = rows[0]?.created_at == null ? undefined : Number(rows[0].created_at);
    for (const migration of migrations) {
      if (last !== undefined && last >= migration.folderMillis) continue;
      for (const statement of migration.sql) {
        if (statement.trim() !== "") await client.query(statement);
      }
      await client.query("insert into drizzle.__drizzle_migrations (hash, created_at) values ($1, $2)", [
        migration.hash,
        migration.folderMillis,
      ]);
    }
    await client.query("commit");
  } catch (err) {
    broken = true;
    await client.query("rollback").catch(() => {});
    throw new InfraError(`migrations failed: ${errorMessage(err)}`, { cause: err });
  } finally {
    client.release(broken);
  }
}
