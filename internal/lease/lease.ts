/**
 * The per-supplier advisory lease (DESIGN §4).
 *
 * Invariants:
 * - The lease is `pg_try_advisory_lock(hashtext('ingestion:' || supplier)::bigint)`, a
 *   session lock held by ONE dedicated connection for the whole tick. PostgreSQL drops
 *   it when that session ends, so a crashed holder (kill -9, lost network) frees it.
 * - Every write of the tick goes through that same connection. If the session dies,
 *   the lock and the ability to write die together: a tick that lost its lease cannot
 *   write (fencing by construction).
 * - Losing the connection aborts `lease.signal` at once (the pg client emits `error` /
 *   `end` when the server terminates the session), so the connector stops fetching.
 *   A silent network loss is caught by the run heartbeat, which also goes through
 *   this connection and fails within `heartbeatTimeoutMs`.
 * - A lost lease connection is destroyed, never returned to the pool.
 * - Busy is a normal outcome (`null`), not an error.
 *
 * Session advisory locks need a direct or session-pooled connection: PgBouncer in
 * transaction pooling mode would hand the lock to a random session.
 */
import type pg from "pg";
import type { Lease } from "../ingestion/ports.js";
import { errorMessage, IngestionError } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";

export const LEASE_KEY_SQL = "hashtext('ingestion:' || $1)::bigint";

/**
 * Tries to take the lease of `supplier`. Returns `null` when another session holds it.
 * Throws when the database cannot be reached.
 */
export async function acquireLease(pool: pg.Pool, supplier: string, log: Logger): Promise<Lease | null> {
  const client = await pool.connect();
  const controller = new AbortController();
  let lost = false;
  let released = false;
  const onLost = (err?: unknown) => {
    if (lost || released) return;
    lost = true;
    log.warn({ supplier, err: err === undefined ? "connection ended" : errorMessage(err) }, "lease lost");
    controller.abort(
      new IngestionError(
        "LEASE_LOST",
        `lease connection of ${supplier} failed: ${err ? errorMessage(err) : "ended"}`,
        {
          cause: err,
        },
      ),
    );
  };
  // A checked-out pg client has no error listener of the pool's: without ours, a
  // terminated session would be an uncaught exception.
  const onError = (err: Error) => onLost(err);
  const onEnd = () => onLost();
  client.on("error", onError);
  client.on("end", onEnd);

  let acquired = false;
  try {
    const { rows } = await client.query<{ ok: boolean }>(
      `select pg_try_advisory_lock(${LEASE_KEY_SQL}) as ok`,
      [supplier],
    );
    acquired = rows[0]?.ok === true;
  } catch (err) {
    client.off("error", onError);
    client.off("end", onEnd);
    client.release(err instanceof Error ? err : true);
    throw err;
  }
  if (!acquired) {
    client.off("error", onError);
    client.off("end", onEnd);
    client.release();
    return null;
  }

  return {
    supplier,
    client,
    signal: controller.signal,
    get lost() {
      return lost;
    },
    async release() {
      if (released) return;
      let destroy: Error | boolean = lost;
      if (!lost) {
        try {
          await client.query(`select pg_advisory_unlock(${LEASE_KEY_SQL})`, [supplier]);
        } catch (err) {
          destroy = err instanceof Error ? err : true;
        }
      }
      released = true;
      client.off("error", onError);
      client.off("end", onEnd);
      if (destroy) client.on("error", () => {});
      // A session that lost its lease, or could not unlock, is closed: closing ends the lock.
      client.release(destroy);
    },
  };
}
