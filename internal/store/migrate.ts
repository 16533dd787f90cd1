import { drizzle } from "drizzle-orm/node-postgres";
import { migrate } from "drizzle-orm/node-postgres/migrator";
import type pg from "pg";
import { errorMessage, InfraError } from "../platform/errors.js";
import { migrationsFolder } from "./db.js";

/** Advisory lock key that serialises migrations across every instance starting together. */
export const MIGRATION_LOCK_KEY = "supplier-sync:migrate";

/**
 * Applies the generated migrations in `drizzle/`. Several processes may call this at
 * once: a session advisory lock on one connection makes them take turns, and each
 * later one finds nothing left to apply.
 */
export async function runMigrations(pool: pg.Pool): Promise<void> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw new InfraError(`database unreachable: ${errorMessage(err)}`, { cause: err });
  }
  let broken = false;
  try {
    await client.query("select pg_advisory_lock(hashtext($1)::bigint)", [MIGRATION_LOCK_KEY]);
    try {
      await migrate(drizzle({ client }), { migrationsFolder: migrationsFolder() });
    } finally {
      await client.query("select pg_advisory_unlock(hashtext($1)::bigint)", [MIGRATION_LOCK_KEY]);
    }
  } catch (err) {
    broken = true;
    throw new InfraError(`migrations failed: ${errorMessage(err)}`, { cause: err });
  } finally {
    client.release(broken);
  }
}
