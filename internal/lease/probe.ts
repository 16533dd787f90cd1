/**
 * Does one client's sequence of statements reach one server session? The advisory
 * lease is correct only if it does (docs/operations.md, Choosing the lease); behind a transaction pooler
 * (PgBouncer `pool_mode = transaction`, the pooled endpoints of managed PostgreSQL)
 * it does not, and copies of supplier-sync would each "hold" the lock.
 *
 * How: connection A notes its backend pid and sets a session setting to a random
 * token, outside any transaction. Connection B then opens a transaction and keeps it
 * open. A transaction pooler hands B the server session A just gave back (PgBouncer
 * reuses the most recent idle one), and must give A's next statement another one, as
 * B holds A's. So with session pinning: B's pid differs from A's and B cannot see A's
 * token, and A's next statement has A's pid and A's token. Anything else is pooling.
 * Three rounds, so a pooler that picks servers in another order is caught too. A pool
 * that refuses transaction blocks (statement pooling) fails the probe as well.
 */
import { randomUUID } from "node:crypto";
import type pg from "pg";
import { errorMessage, InfraError } from "../platform/errors.js";

const SETTING = "supplier_sync.session_probe";
const ROUNDS = 3;

export type SessionProbe = { pinned: true } | { pinned: false; evidence: string };

/** Probes with two connections of `pool` (which must allow two). */
export async function probeSessionPinning(pool: pg.Pool): Promise<SessionProbe> {
  const a = await pool.connect();
  let b: pg.PoolClient | undefined;
  try {
    b = await pool.connect();
    for (let round = 1; round <= ROUNDS; round++) {
      const token = randomUUID();
      const first = await a.query<{ pid: number }>(
        `select pg_backend_pid() as pid, set_config('${SETTING}', $1, false) as token`,
        [token],
      );
      const pidA = first.rows[0]?.pid;
      let seenByB: { pid: number; token: string | null } | undefined;
      await b.query("begin");
      try {
        seenByB = (
          await b.query<{ pid: number; token: string | null }>(
            `select pg_backend_pid() as pid, current_setting('${SETTING}', true) as token`,
          )
        ).rows[0];
        const again = (
          await a.query<{ pid: number; token: string | null }>(
            `select pg_backend_pid() as pid, current_setting('${SETTING}', true) as token`,
          )
        ).rows[0];
        if (seenByB?.pid === pidA || seenByB?.token === token) {
          return {
            pinned: false,
            evidence: `two connections reached the same server session (backend pid ${pidA})`,
          };
        }
        if (again?.pid !== pidA || again?.token !== token) {
          return {
            pinned: false,
            evidence:
              `consecutive statements of one connection reached different server sessions ` +
              `(backend pid ${pidA}, then ${again?.pid}${again?.pid === pidA ? " without its session setting" : ""})`,
          };
        }
      } finally {
        await b.query("rollback");
      }
    }
    await a.query(`select set_config('${SETTING}', '', false)`);
    return { pinned: true };
  } catch (err) {
    const message = errorMessage(err);
    if (/transaction blocks not allowed|statement pooling/i.test(message)) {
      return { pinned: false, evidence: `the pool refused a transaction block (${message})` };
    }
    throw err;
  } finally {
    // Probe connections may hold stray session state on a pooled server: never reuse them.
    a.release(true);
    b?.release(true);
  }
}

/** The exit-3 message: the cause and both ways out. */
export function transactionPoolerMessage(evidence: string): string {
  return (
    `SUPPLIER_SYNC_LEASE=advisory needs a direct or session-pooled connection, but DATABASE_URL ` +
    `goes through a transaction pooler (PgBouncer pool_mode = transaction, or a managed service's ` +
    `pooled endpoint): ${evidence}, so a session advisory lock would not belong to this process and ` +
    `copies would walk a supplier at the same time. Either set SUPPLIER_SYNC_LEASE=table (lease rows ` +
    `with fencing tokens, works through any pooler) or point DATABASE_URL at a direct or ` +
    `session-pooled endpoint`
  );
}

/**
 * Refuses to run the advisory lease where it cannot be correct: throws `InfraError`
 * (exit 3) naming the cause and both ways out.
 */
export async function assertSessionPinning(pool: pg.Pool): Promise<void> {
  let probe: SessionProbe;
  try {
    probe = await probeSessionPinning(pool);
  } catch (err) {
    throw new InfraError(`database unreachable: ${errorMessage(err)}`, { cause: err });
  }
  if (!probe.pinned) throw new InfraError(transactionPoolerMessage(probe.evidence));
}
