/**
 * The per-supplier advisory lease (docs/operations.md, Choosing the lease).
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
 * - A silent network loss (deadlines.ts, from `SUPPLIER_SYNC_LEASE_DEAD_PEER` = D):
 *   every statement on this connection, from the acquire on, has a deadline of D/3
 *   (store/deadline.ts `watchStatements`); one that misses it marks the lease lost,
 *   aborts `lease.signal` and destroys the socket. The run heartbeat goes through this
 *   connection every min(10 s, D/3), so an idle cut-off holder notices within that
 *   period plus the deadline. On the server's side, the session is told to drop a peer
 *   it cannot reach within D (TCP keepalive and user timeout, set when the lock is
 *   taken), which ends the session and frees the lock for another replica.
 * - A lost lease connection is destroyed, never returned to the pool.
 * - Busy is a normal outcome (`null`), not an error.
 *
 * - Session advisory locks need a direct or session-pooled connection: behind a
 *   transaction pooler (PgBouncer `pool_mode = transaction`) the lock belongs to
 *   whichever server session ran the statement. Every command probes for that at
 *   start (probe.ts) and refuses to run; as a second line, the lease remembers the
 *   backend pid and a random token it set as a session setting when it took the lock,
 *   and every transaction on the lease connection first checks both (the fence,
 *   bound through `bindLease`): a transaction that reached another session is rolled
 *   back as `LEASE_LOST` before it writes anything.
 */
import { randomUUID } from "node:crypto";
import type pg from "pg";
import { errorMessage, IngestionError } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";
import { watchStatements } from "../store/deadline.js";
import { bindLease } from "../store/queryable.js";
import type { Lease } from "../store/run-session.js";
import {
  DEADLINE_WHAT,
  type LeaseDeadlines,
  leaseDeadlines,
  serverSettingParams,
  serverSettingsSql,
} from "./deadlines.js";

export const LEASE_KEY_SQL = "hashtext('ingestion:' || $1)::bigint";

/** The session setting that marks the session holding a lease (custom settings need a dot). */
export const LEASE_SESSION_SETTING = "supplier_sync.lease_session";

/**
 * Tries to take the lease of `supplier`. Returns `null` when another session holds it.
 * Throws when the database cannot be reached.
 */
export async function acquireLease(
  pool: pg.Pool,
  supplier: string,
  log: Logger,
  deadlines: LeaseDeadlines = leaseDeadlines(),
): Promise<Lease | null> {
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
  // Before the first statement: a pooled connection may already be on a dead network.
  let acquired = false;
  let missed: Error | undefined;
  const unwatch = watchStatements(client, deadlines.statementMs, DEADLINE_WHAT, (err) => {
    missed = err;
    if (acquired) onLost(err);
  });

  let pid = 0;
  const token = randomUUID();
  try {
    const { rows } = await client.query<{ ok: boolean; pid: number }>(
      `with l as (select pg_try_advisory_lock(${LEASE_KEY_SQL}) as ok)
       select ok, pg_backend_pid() as pid,
              case when ok then set_config('${LEASE_SESSION_SETTING}', $2, false) end as token,
              case when ok then ${serverSettingsSql(3, false)} end as dead_peer
         from l`,
      [supplier, token, ...serverSettingParams(deadlines)],
    );
    acquired = rows[0]?.ok === true;
    pid = rows[0]?.pid ?? 0;
  } catch (err) {
    unwatch();
    client.off("error", onError);
    client.off("end", onEnd);
    client.on("error", () => {});
    client.release(err instanceof Error ? err : true);
    throw missed ?? err;
  }
  if (!acquired) {
    unwatch();
    client.off("error", onError);
    client.off("end", onEnd);
    client.release();
    return null;
  }

  bindLease(client, {
    sessionless: false,
    async fence(tx) {
      const { rows } = await tx.query<{ pid: number; token: string | null }>(
        `select pg_backend_pid() as pid, current_setting('${LEASE_SESSION_SETTING}', true) as token`,
      );
      const now = rows[0];
      if (now?.pid === pid && now.token === token) return;
      const err = new IngestionError(
        "LEASE_LOST",
        `the lease connection of ${supplier} no longer reaches the session that took the lock ` +
          `(backend pid ${pid}, now ${now?.pid}${now?.pid === pid ? ", its session setting gone" : ""}): ` +
          "is a transaction pooler between supplier-sync and PostgreSQL? Use SUPPLIER_SYNC_LEASE=table " +
          "or a direct or session-pooled DATABASE_URL",
      );
      onLost(err);
      throw err;
    },
  });

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
      bindLease(client, undefined);
      if (!lost) {
        try {
          await client.query(
            `select pg_advisory_unlock(${LEASE_KEY_SQL}), set_config('${LEASE_SESSION_SETTING}', '', false)`,
            [supplier],
          );
        } catch (err) {
          destroy = err instanceof Error ? err : true;
        }
      }
      released = true;
      unwatch();
      client.off("error", onError);
      client.off("end", onEnd);
      if (destroy) client.on("error", () => {});
      // A session that lost its lease, or could not unlock, is closed: closing ends the lock.
      client.release(destroy);
    },
  };
}
