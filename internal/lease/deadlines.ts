/**
 * Everything the lease derives from `SUPPLIER_SYNC_LEASE_DEAD_PEER` (D; docs/operations.md,
 * Choosing the lease; docs/failure-modes.md, A holder cut off from the network).
 *
 * - Server side: the lease session asks PostgreSQL to drop a peer it cannot reach
 *   within D (`tcp_keepalives_idle` + `tcp_keepalives_count` x `tcp_keepalives_interval`
 *   <= D while the session is idle, `tcp_user_timeout` = D while the server has data
 *   unacknowledged). The session ends, and the advisory lock (or the table lease's row
 *   lock) with it: another replica takes the supplier over within D plus one tick.
 * - Client side: every statement on the lease connection has a deadline of D/3
 *   (internal/store/deadline.ts); the run heartbeat probes the connection every
 *   min(10 s, D/3), so a cut-off holder notices within D/3 + D/3, aborts its walk and
 *   ends the tick `lease_lost`. The socket's own keepalive starts after D/3 too.
 */

/** How a missed statement deadline on a lease connection is named: after the setting that tunes it. */
export const DEADLINE_WHAT = "statement deadline (SUPPLIER_SYNC_LEASE_DEAD_PEER / 3)";

/** The timings of one D. */
export interface LeaseDeadlines {
  deadPeerMs: number;
  /** Deadline of every statement on a lease connection (and the other long-held ones). */
  statementMs: number;
  /** How often the run heartbeat goes through the lease connection. */
  heartbeatMs: number;
  /** The server-side session settings, as `set_config` takes them (text). */
  server: {
    tcp_keepalives_idle: string;
    tcp_keepalives_interval: string;
    tcp_keepalives_count: string;
    tcp_user_timeout: string;
  };
  /** pg's `keepAliveInitialDelayMillis` for the client socket. */
  clientKeepAliveMs: number;
}

export const DEFAULT_DEAD_PEER_MS = 30_000;
const MAX_HEARTBEAT_MS = 10_000;

export function leaseDeadlines(deadPeerMs: number = DEFAULT_DEAD_PEER_MS): LeaseDeadlines {
  const seconds = Math.max(3, Math.floor(deadPeerMs / 1000));
  const idle = Math.max(1, Math.floor(seconds / 3));
  let count = 4;
  let interval = Math.floor((seconds - idle) / count);
  if (interval < 1) {
    interval = 1;
    count = Math.max(1, seconds - idle);
  }
  const statementMs = Math.max(1_000, Math.floor(deadPeerMs / 3));
  return {
    deadPeerMs,
    statementMs,
    heartbeatMs: Math.min(MAX_HEARTBEAT_MS, statementMs),
    server: {
      tcp_keepalives_idle: String(idle),
      tcp_keepalives_interval: String(interval),
      tcp_keepalives_count: String(count),
      tcp_user_timeout: String(seconds * 1000),
    },
    clientKeepAliveMs: statementMs,
  };
}

/**
 * SQL that applies {@link LeaseDeadlines.server} to the session (`local` false) or to the
 * current transaction (`local` true), as one text column; parameters from `$first`
 * on, in the order of {@link serverSettingParams}.
 */
export function serverSettingsSql(first: number, local: boolean): string {
  return ["tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count", "tcp_user_timeout"]
    .map((name, i) => `set_config('${name}', $${first + i}, ${local})`)
    .join(" || ',' || ");
}

export function serverSettingParams(d: LeaseDeadlines): string[] {
  const s = d.server;
  return [s.tcp_keepalives_idle, s.tcp_keepalives_interval, s.tcp_keepalives_count, s.tcp_user_timeout];
}
