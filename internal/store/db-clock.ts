/**
 * The database's clock (docs/architecture.md, Scheduler: slots follow the database's clock, not the host's).
 */
import type { Queryable } from "./queryable.js";

/**
 * PostgreSQL's `now()` in ms since the Unix epoch: the start of the current
 * transaction, or of this statement when it runs outside one. Read under the
 * lease, it is the instant that decides the tick's slot.
 */
export async function databaseNow(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ ms: number }>("select extract(epoch from now())::float8 * 1000 as ms");
  const ms = rows[0]?.ms;
  if (typeof ms !== "number" || !Number.isFinite(ms)) throw new Error("now() returned no time");
  return ms;
}

/**
 * `clock_timestamp()` in ms: the server's clock at the moment the statement runs,
 * for measuring this host's offset to it.
 */
export async function databaseClockTimestamp(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ ms: number }>(
    "select extract(epoch from clock_timestamp())::float8 * 1000 as ms",
  );
  const ms = rows[0]?.ms;
  if (typeof ms !== "number" || !Number.isFinite(ms)) throw new Error("clock_timestamp() returned no time");
  return ms;
}
