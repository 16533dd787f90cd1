/**
 * The table lease (docs/operations.md, Choosing the lease; `SUPPLIER_SYNC_LEASE=table`): one row per supplier in
 * `ingestion_leases`, for deployments behind a transaction pooler, where no session
 * state survives from one transaction to the next.
 *
 * Invariants:
 * - Every statement stands alone, so it works through any pooler. Acquire is ONE
 *   statement: insert the row, or take it over only if `expires_at < now()`,
 *   incrementing `token` (the fencing token) and setting `expires_at = now() + TTL`.
 *   No row back means another holder's lease is still live: `null` (busy).
 * - The run heartbeat renews it every third of the TTL (`where token = $t`): 0 rows
 *   means another holder took it over, and the lease is lost (`signal` aborts).
 * - Fencing: every transaction on the lease connection first locks the row
 *   `where supplier = $s and token = $t and expires_at > now()` (FOR SHARE) and rolls
 *   back as `LEASE_LOST` when it is gone. A takeover is an UPDATE of that row, so it
 *   waits for an open step transaction to end, and a step that starts after the
 *   takeover finds no row: a holder paused past its TTL (GC pause, frozen VM,
 *   SIGSTOP) never writes after another took over.
 * - The fenced transaction also sets `idle_in_transaction_session_timeout` to the TTL
 *   (locally): a holder paused inside a step transaction would otherwise hold the row
 *   lock, and block the takeover, for as long as it stays paused.
 * - A holder cut off from the network (deadlines.ts, `SUPPLIER_SYNC_LEASE_DEAD_PEER` = D):
 *   every statement on the lease connection has a deadline of D/3, and so does each
 *   renewal (through the pool); a missed deadline on the lease connection loses the
 *   lease at once (`signal` aborts). The fenced transaction also sets the server's TCP
 *   keepalive and user timeout (locally) so that a silent peer inside a step is dropped,
 *   and its row lock released, within D even while the server waits to send.
 * - Time is PostgreSQL's `now()` throughout: hosts with skewed clocks agree.
 * - Release sets `expires_at = now()` (where the token is still ours), so the next
 *   tick anywhere takes it at once; also after the lease connection failed. A holder
 *   killed with SIGKILL is replaced after at most the TTL: a busy acquire returns the
 *   row's `expires_at`, and the scheduler checks again just after it.
 * - The connection is held for the whole tick like the advisory lease's (so the tick's
 *   code is the same), but is "sessionless": the store keeps nothing in session state.
 */
import type pg from "pg";
import type { LeaseBusy, RunOwner } from "../ingestion/ports.js";
import type { Clock } from "../platform/clock.js";
import { errorMessage, IngestionError } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";
import { watchStatements, withPooledDeadline } from "../store/deadline.js";
import { bindLease } from "../store/queryable.js";
import type { Lease } from "../store/run-session.js";
import {
  DEADLINE_WHAT,
  type LeaseDeadlines,
  leaseDeadlines,
  serverSettingParams,
  serverSettingsSql,
} from "./deadlines.js";

export interface TableLeaseOptions {
  /** `SUPPLIER_SYNC_LEASE_TTL`. */
  ttlMs: number;
  owner: RunOwner;
  clock: Clock;
  log: Logger;
  /** From `SUPPLIER_SYNC_LEASE_DEAD_PEER` (default 30 s). */
  deadlines?: LeaseDeadlines;
}

// One statement. When busy, the outer select reads the live row as it was before the
// statement (same snapshot): when it expires unless its holder renews it.
const ACQUIRE = `
with taken as (
  insert into ingestion_leases as l (supplier, holder, token, acquired_at, expires_at)
  values ($1, $2, 1, now(), now() + $3 * interval '1 millisecond')
  on conflict (supplier) do update
     set holder = excluded.holder, token = l.token + 1, acquired_at = now(), expires_at = excluded.expires_at
   where l.expires_at < now()
  returning token::text as token
)
select (select token from taken) as token,
       (select (extract(epoch from expires_at) * 1000)::float8 from ingestion_leases where supplier = $1) as expires`;

const FENCE = `
select set_config('idle_in_transaction_session_timeout', $3, true) as idle_timeout,
       ${serverSettingsSql(4, true)} as dead_peer
  from ingestion_leases
 where supplier = $1 and token = $2 and expires_at > now()
   for share`;

const RENEW = `
update ingestion_leases set expires_at = now() + $3 * interval '1 millisecond'
 where supplier = $1 and token = $2`;

const RELEASE = "update ingestion_leases set expires_at = now() where supplier = $1 and token = $2";

/** `hostname/pid/boot id`: who holds a table lease (`ingestion_leases.holder`). */
export function holderOf(owner: RunOwner): string {
  return `${owner.hostname}/${owner.pid}/${owner.bootId}`;
}

/**
 * Tries to take the table lease of `supplier`. Returns `null` when another holder's
 * lease is live. Throws when the database cannot be reached.
 */
export async function acquireTableLease(
  pool: pg.Pool,
  supplier: string,
  options: TableLeaseOptions,
): Promise<Lease | null> {
  const got = await tryTableLease(pool, supplier, options);
  return "busyUntilMs" in got ? null : got;
}

/**
 * {@link acquireTableLease}, telling when a busy lease expires unless renewed: a
 * holder that was killed is replaced only by a tick after that, so the scheduler
 * checks again then (a live holder will have renewed it, and it is busy again).
 */
export async function tryTableLease(
  pool: pg.Pool,
  supplier: string,
  options: TableLeaseOptions,
): Promise<Lease | LeaseBusy> {
  const { ttlMs, clock, log } = options;
  const deadlines = options.deadlines ?? leaseDeadlines();
  const client = await pool.connect();
  const controller = new AbortController();
  let lost = false;
  let released = false;
  const onLost = (err: unknown) => {
    if (lost || released) return;
    lost = true;
    log.warn({ supplier, err: errorMessage(err) }, "lease lost");
    controller.abort(
      err instanceof IngestionError && err.code === "LEASE_LOST"
        ? err
        : new IngestionError("LEASE_LOST", `lease of ${supplier} lost: ${errorMessage(err)}`, { cause: err }),
    );
  };
  const onError = (err: Error) => onLost(err);
  const onEnd = () => onLost(new Error("lease connection ended"));
  client.on("error", onError);
  client.on("end", onEnd);
  let taken = false;
  let missed: Error | undefined;
  const unwatch = watchStatements(client, deadlines.statementMs, DEADLINE_WHAT, (err) => {
    missed = err;
    if (taken) onLost(err);
  });
  const detach = () => {
    unwatch();
    client.off("error", onError);
    client.off("end", onEnd);
  };

  let token: string | null | undefined;
  let expires: number | null | undefined;
  const askedAt = clock.now();
  try {
    const { rows } = await client.query<{ token: string | null; expires: number | null }>(ACQUIRE, [
      supplier,
      holderOf(options.owner),
      ttlMs,
    ]);
    token = rows[0]?.token;
    expires = rows[0]?.expires;
  } catch (err) {
    detach();
    client.on("error", () => {});
    client.release(err instanceof Error ? err : true);
    throw missed ?? err;
  }
  if (token == null) {
    detach();
    client.release();
    return { busyUntilMs: expires ?? askedAt + ttlMs };
  }
  const held = token;
  taken = true;
  /** Local bound of the lease's life: renewals that fail past it mean it is gone. */
  let validUntil = askedAt + ttlMs;
  const gone = (why: string) =>
    new IngestionError(
      "LEASE_LOST",
      `table lease of ${supplier} (token ${held}) ${why}: another holder may have taken it over`,
    );

  bindLease(client, {
    sessionless: true,
    async fence(tx) {
      const { rowCount } = await tx.query(FENCE, [
        supplier,
        held,
        String(ttlMs),
        ...serverSettingParams(deadlines),
      ]);
      if (rowCount === 1) return;
      const err = gone("expired or taken over");
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
    renewEveryMs: Math.max(1, Math.floor(ttlMs / 3)),
    async renew() {
      if (lost || released) return;
      const startedAt = clock.now();
      try {
        // Through the pool, not the lease connection: a renewal there would run inside
        // whatever page transaction is open, and be rolled back with it.
        // Under the statement deadline: a renewal stuck on a dead network would stop the heartbeat.
        const { rowCount } = await withPooledDeadline(pool, deadlines.statementMs, DEADLINE_WHAT, (c) =>
          c.query(RENEW, [supplier, held, ttlMs]),
        );
        if (rowCount === 1) {
          validUntil = startedAt + ttlMs;
          return;
        }
        onLost(gone("was taken over"));
      } catch (err) {
        if (clock.now() >= validUntil)
          onLost(gone(`could not be renewed within its TTL: ${errorMessage(err)}`));
        else log.warn({ supplier, err: errorMessage(err) }, "lease renewal failed; retrying");
      }
    },
    async release() {
      if (released) return;
      bindLease(client, undefined);
      let destroy: Error | boolean = lost;
      try {
        // Conditioned on the token, so it is safe even when lost: after a takeover it
        // changes nothing, and after a connection failure it frees the lease at once
        // instead of after the TTL. Through the pool when the lease connection is gone.
        if (lost) {
          await withPooledDeadline(pool, deadlines.statementMs, DEADLINE_WHAT, (c) =>
            c.query(RELEASE, [supplier, held]),
          );
        } else await client.query(RELEASE, [supplier, held]);
      } catch (err) {
        // The row expires on its own within the TTL.
        if (!lost) destroy = err instanceof Error ? err : true;
      }
      released = true;
      detach();
      if (destroy) client.on("error", () => {});
      client.release(destroy);
    },
  };
}
