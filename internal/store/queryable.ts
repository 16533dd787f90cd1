import type pg from "pg";

/** A connection or the pool: what the store's read/one-statement functions accept. */
export type Queryable = pg.ClientBase | pg.Pool;

function isPool(db: Queryable): db is pg.Pool {
  // Duck-typed rather than `instanceof`, so a pool from another copy of `pg` still counts.
  return "totalCount" in db && "idleCount" in db;
}

/**
 * Checks, as the first statement of a transaction, that the caller may still write
 * (the lease's fence); throws `IngestionError('LEASE_LOST')` when it may not.
 */
export type TransactionFence = (tx: pg.ClientBase) => Promise<void>;

/** What a held lease tells the store about its connection. */
export interface LeaseBinding {
  /** Run first in every transaction {@link inTransaction} opens on the connection. */
  fence: TransactionFence;
  /**
   * True when consecutive transactions of the connection may reach different server
   * sessions (the table lease, through any pooler): nothing may be kept in session
   * state (temp tables) from one transaction to the next.
   */
  sessionless: boolean;
}

/**
 * Lease connections and their bindings. Keyed by the client object, set by the lease
 * for exactly the time it holds the connection, so every transaction of a tick is
 * fenced by construction, whichever store function opens it.
 */
const bindings = new WeakMap<pg.ClientBase, LeaseBinding>();

/** Binds (or, with `undefined`, unbinds) a lease to its connection. */
export function bindLease(client: pg.ClientBase, binding: LeaseBinding | undefined): void {
  if (binding) bindings.set(client, binding);
  else bindings.delete(client);
}

/** Whether `db` is a lease connection whose transactions may reach different sessions. */
export function isSessionless(db: Queryable): boolean {
  return !isPool(db) && bindings.get(db)?.sessionless === true;
}

/**
 * Runs `fn` in one transaction on `db` (a client checked out for it when `db` is the
 * pool). On a lease connection the lease's fence runs first. Rolls back on any error; a client whose rollback fails is destroyed rather
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
    await bindings.get(client)?.fence(client);
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
