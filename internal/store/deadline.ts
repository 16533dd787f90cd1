/**
 * Statement deadlines for long-held connections (docs/failure-modes.md, A holder cut
 * off from the network).
 *
 * Why client-side: when the network between this process and PostgreSQL is gone, the
 * server never sees the statement, so `statement_timeout` never starts, and the
 * socket stays open until the operating system's TCP retransmission or keepalive gives
 * up (15 minutes to two hours on Linux defaults). A pg query then waits that long. So
 * a watched connection gets a timer instead: when a statement makes no progress for
 * the deadline, the connection is declared dead (`onMiss`) and destroyed, which fails
 * every statement pending on it at once.
 *
 * Invariants:
 * - "Progress": the deadline runs from the moment a first statement is pending, and
 *   restarts each time one completes; statements queued behind a slow one do not
 *   shorten it, and an idle connection has no deadline at all (the run heartbeat is
 *   what probes an idle lease connection).
 * - A connection that missed its deadline is destroyed (its socket, not a polite
 *   `Terminate` that would wait on the dead network) and must never go back to a pool.
 * - Watching is undone by the returned function; the client's own `query` is restored.
 */
import pg from "pg";
import { errorMessage } from "../platform/errors.js";

/** What a missed deadline is reported with (the message names the connection and the bound). */
export class StatementDeadlineError extends Error {
  override readonly name = "StatementDeadlineError";
}

type QueryFn = (...args: unknown[]) => unknown;

/**
 * Closes the connection's socket at once, without waiting on the network. The client
 * then reports "Connection terminated": a listener is added first, as a checked-out
 * pool client has none and the report would be an uncaught exception.
 */
export function destroyConnection(client: pg.ClientBase): void {
  client.on("error", () => {});
  const stream = (client as unknown as { connection?: { stream?: { destroy?: () => void } } }).connection
    ?.stream;
  if (typeof stream?.destroy === "function") stream.destroy();
  else (client as pg.Client).end().catch(() => {});
}

/**
 * Watches every statement sent through `client` from now on: when one is pending for
 * `ms` without any statement completing, calls `onMiss` (once) with a
 * {@link StatementDeadlineError} naming `what`, then destroys the connection. Returns
 * the function that stops watching.
 */
export function watchStatements(
  client: pg.ClientBase,
  ms: number,
  what: string,
  onMiss: (err: StatementDeadlineError) => void = () => {},
): () => void {
  const target = client as unknown as { query: QueryFn };
  const hadOwn = Object.hasOwn(target, "query");
  const original = target.query;
  let pending = 0;
  let missed = false;
  let timer: NodeJS.Timeout | undefined;
  const fire = () => {
    timer = undefined;
    if (pending === 0 || missed) return;
    missed = true;
    onMiss(
      new StatementDeadlineError(
        `${what}: no answer to a statement within ${ms} ms (the database is unreachable or stalled); ` +
          "connection closed",
      ),
    );
    destroyConnection(client);
  };
  const arm = () => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(fire, ms);
    timer.unref();
  };
  const settled = () => {
    pending--;
    if (pending > 0) arm();
    else if (timer) {
      clearTimeout(timer);
      timer = undefined;
    }
  };
  target.query = function watchedQuery(this: unknown, ...args: unknown[]) {
    const result = original.apply(client, args);
    // Callback-style and submittable queries (not used by the store) go through unwatched.
    if (!(result instanceof Promise)) return result;
    if (pending++ === 0) arm();
    result.then(settled, settled);
    return result;
  };
  let unwatched = false;
  return () => {
    if (unwatched) return;
    unwatched = true;
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (hadOwn) target.query = original;
    else delete (target as { query?: QueryFn }).query;
  };
}

/**
 * Runs `fn` with every statement on `client` under a deadline of `ms` (see
 * {@link watchStatements}). When one misses it, the connection is destroyed and the
 * call rejects with the {@link StatementDeadlineError} (not with the pg error of the
 * destroyed connection).
 */
export async function withStatementDeadline<T>(
  client: pg.ClientBase,
  ms: number,
  what: string,
  fn: () => Promise<T>,
): Promise<T> {
  let missed: StatementDeadlineError | undefined;
  const unwatch = watchStatements(client, ms, what, (err) => {
    missed = err;
  });
  try {
    return await fn();
  } catch (err) {
    throw missed ?? err;
  } finally {
    unwatch();
  }
}

/**
 * Runs `fn` on a FRESH connection (not one of the pool's idle ones, which may be as
 * dead as the connection that just failed) made with `pool`'s settings, connecting
 * and every statement under the deadline `ms`; the connection is closed afterwards.
 * For the one close of a run whose lease connection died.
 */
export async function withFreshConnection<T>(
  pool: pg.Pool,
  ms: number,
  what: string,
  fn: (client: pg.Client) => Promise<T>,
): Promise<T> {
  const client = new pg.Client({ ...pool.options, connectionTimeoutMillis: ms });
  client.on("error", () => {});
  try {
    await client.connect();
  } catch (err) {
    destroyConnection(client);
    throw new Error(`${what}: could not connect within ${ms} ms: ${errorMessage(err)}`, { cause: err });
  }
  let ok = false;
  try {
    const result = await withStatementDeadline(client, ms, what, () => fn(client));
    ok = true;
    return result;
  } finally {
    // Not awaited: a polite end must not hold the caller on a network that just went away.
    if (ok) client.end().catch(() => destroyConnection(client));
    else destroyConnection(client);
  }
}

/**
 * Runs `fn` on a connection of `pool`, waiting for one and every statement under the
 * deadline `ms`. A connection that missed it, or failed, is destroyed rather than
 * returned. For the short statements of long-lived work (the table lease's renewals).
 */
export async function withPooledDeadline<T>(
  pool: pg.Pool,
  ms: number,
  what: string,
  fn: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const connecting = pool.connect();
  const client = await Promise.race([
    connecting,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        // The connection that comes too late is not used, and not kept.
        connecting.then((c) => c.release(true)).catch(() => {});
        reject(new StatementDeadlineError(`${what}: no connection within ${ms} ms`));
      }, ms);
      timer.unref();
    }),
  ]).finally(() => clearTimeout(timer));
  let failed: Error | undefined;
  try {
    return await withStatementDeadline(client, ms, what, () => fn(client));
  } catch (err) {
    failed = err instanceof Error ? err : new Error(String(err));
    throw err;
  } finally {
    client.release(failed);
  }
}
