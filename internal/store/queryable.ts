import type pg from "pg";

/** A connection or the pool: what the store's read/one-statement functions accept. */
export type Queryable = pg.ClientBase | pg.Pool;

function isPool(db: Queryable): db is pg.Pool {
  // Duck-typed rather than `instanceof`, so a pool from another copy of `pg` still counts.
  return "totalCount" in db && "idleCount" in db;
}

/**
 * Runs `fn` in one transaction on `db` (a client checked out for it when `db` is the
 * pool). Rolls back on any error; a client whose rollback fails is destroyed rather
 * than returned to the pool in an unknown state.
 */
export async function inTransaction<T>(db: Queryable, fn: (client: pg.ClientBase) => Promise<T>): Promise<T> {
  if (!isPool(db)) return runInTransaction(db, fn);
  const client = await db.connect();
  let broken = false;
  try {
    return await runInTransaction(client, fn, () => {
      broken = true;
    });
  } finally {
    client.release(broken);
  }
}

async function runInTransaction<T>(
  client: pg.ClientBase,
  fn: (client: pg.ClientBase) => Promise<T>,
  markBroken?: () => void,
): Promise<T> {
  await client.query("begin");
  let result: T;
  try {
    result = await fn(client);
  } catch (err) {
    await client.query("rollback").catch(() => markBroken?.());
    throw err;
  }
  try {
    await client.query("commit");
  } catch (err) {
    // An ambiguous commit: the session is in an unknown state, never reuse it.
    markBroken?.();
    throw err;
  }
  return result;
}

/** Numeric id of a `bigint` column (pg returns int8 as text); ids stay far below 2^53. */
export function toId(value: string | number): number {
  return typeof value === "number" ? value : Number.parseInt(value, 10);
}
