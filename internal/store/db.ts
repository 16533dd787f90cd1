import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import type { Logger } from "../platform/logger.js";
import { redactUrlCredentials } from "../platform/redact.js";

export interface PoolOptions {
  url: string;
  max: number;
  log?: Logger;
  applicationName?: string;
  /**
   * Idle time before the client socket's first TCP keepalive probe (default 10 s, a
   * third of `SUPPLIER_SYNC_LEASE_DEAD_PEER`'s default).
   */
  keepAliveMs?: number;
}

/**
 * The process's one PostgreSQL pool. Lease connections are checked out for a whole
 * tick, and the pool never recycles a checked-out client (no lifetime limit), so a
 * lease cannot be dropped under a running tick by pool housekeeping.
 */
export function createPool(options: PoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.max,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 10_000,
    maxLifetimeSeconds: 0,
    application_name: options.applicationName ?? "supplier-sync",
    keepAlive: true,
    keepAliveInitialDelayMillis: options.keepAliveMs ?? 10_000,
  });
  // An idle client that dies (server restart, pg_terminate_backend) must not crash the process.
  pool.on("error", (err) => {
    options.log?.warn({ err: redactUrlCredentials(err.message) }, "idle database connection failed");
  });
  return pool;
}

/** The `drizzle/` folder with the generated migrations, found from this file in src or dist. */
export function migrationsFolder(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const candidate = join(dir, "drizzle");
    if (existsSync(join(candidate, "meta", "_journal.json"))) return candidate;
    dir = dirname(dir);
  }
  throw new Error("drizzle/ migrations folder not found next to the installed package");
}
