import { randomBytes } from "node:crypto";
import pg from "pg";

/** Minimal view of a tap test used by the helpers: only its teardown hook. */
export interface Teardown {
  teardown(fn: () => unknown): void;
}

export function adminUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error("TEST_DATABASE_URL is not set: run the suite with `npm test`");
  return url;
}

export function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function adminQuery(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

/**
 * A fresh database for one test file (or test), cloned from the migrated template
 * that `npm test` prepared, dropped on teardown. Pass `{ migrated: false }` for an
 * empty database.
 */
export async function createTestDatabase(t: Teardown, options: { migrated?: boolean } = {}): Promise<string> {
  const name = `ss_t_${randomBytes(6).toString("hex")}`;
  const template = options.migrated === false ? "template0" : process.env.SUPPLIER_SYNC_TEST_TEMPLATE;
  if (!template) throw new Error("SUPPLIER_SYNC_TEST_TEMPLATE is not set: run the suite with `npm test`");
  for (let attempt = 1; ; attempt++) {
    try {
      await adminQuery(`create database ${name} template ${template}`);
      break;
    } catch (err) {
      // Two clones of one template at the same instant can collide; take turns.
      if (attempt >= 20 || !/being accessed by other users/.test(String(err))) throw err;
      await new Promise((r) => setTimeout(r, 50 * attempt));
    }
  }
  t.teardown(() => dropTestDatabase(name));
  return withDatabase(adminUrl(), name);
}

/** How long a drop waits for the database's sessions to close on their own before it cuts them. */
const DROP_GRACE_MS = 2_000;

/**
 * Drops a test database once its sessions have left, cutting only those still there
 * after DROP_GRACE_MS. A pool's end() resolves before its backends have read the
 * Terminate message; a forced drop at that moment makes each of them answer FATAL
 * 57P01, which pg delivers to the idle client's pool as an 'error' event (seen in CI:
 * a console test's pool, ended in teardown, threw "terminating connection due to
 * administrator command" into the next test).
 */
async function dropTestDatabase(name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    const deadline = Date.now() + DROP_GRACE_MS;
    for (;;) {
      const { rows } = await client.query<{ n: number }>(
        "select count(*)::int as n from pg_stat_activity where datname = $1",
        [name],
      );
      if (rows[0]?.n === 0 || Date.now() >= deadline) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    await client.query(`drop database if exists ${name} with (force)`);
  } finally {
    await client.end();
  }
}

/** A pool on `url`, ended on teardown. */
export function testPool(t: Teardown, url: string, max = 4): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on("error", () => {});
  t.teardown(() => pool.end());
  return pool;
}
