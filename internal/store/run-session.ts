/**
 * The run session (the `RunSession` port of internal/ingestion/ports.ts): the store
 * opened on a held lease, so that the tick never touches a connection.
 *
 * Invariants:
 * - Every read and write of a tick goes through the lease connection, and every
 *   transaction there runs the lease's fence first (queryable.ts `bindLease`): a
 *   session whose lease is gone cannot write. The tick gets no connection to bypass
 *   it with.
 * - One session, one run: `start` once, then the pages and failed steps of that run,
 *   then `close` once. Anything out of that order is a programming error and throws.
 * - The session is the one owner of the run's seen set on its connection (seen-set.ts)
 *   and of the run heartbeat, which renews a lease that needs it (the table lease,
 *   every third of its TTL at least) and refreshes `heartbeat_at` through the lease
 *   connection. The heartbeat runs from `start` until `close`, `release` or the loss
 *   of the lease.
 * - After a lost lease nothing more goes through the session: the run's one close is
 *   `closeAfterLostLease`, a compare-and-set from a fresh connection (not a pooled one,
 *   which may be as dead as the lease's), connect and statements under a deadline; if
 *   that fails too, the next holder's recovery closes the run INTERRUPTED.
 * - What it throws is an `IngestionError` with its code: PostgreSQL's failures are
 *   classified here, where they are born (database-error.ts).
 */
import type pg from "pg";
import { claimTrigger, hasPendingTrigger, isPaused } from "../control/controls.js";
import type {
  ClosedRun,
  CloseInput,
  GuardSettings,
  HolderRun,
  LeaseBusy,
  Page,
  PageCounts,
  RecoveredRun,
  Reject,
  ResponseValidators,
  RunOwner,
  RunSession,
  RunSessions,
  RunTrigger,
} from "../ingestion/ports.js";
import type { Clock } from "../platform/clock.js";
import { errorMessage } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";
import { BinaryArrays } from "./binary-arrays.js";
import { classified } from "./database-error.js";
import { databaseNow } from "./db-clock.js";
import { withFreshConnection } from "./deadline.js";
import { RunFieldState } from "./field-guard.js";
import { commitPage, EarlierHolds, recordFailedStep } from "./offers.js";
import { closeRun, hasCompleteWalkInSlot, heartbeatRun, recoverAbandonedRuns, startRun } from "./runs.js";
import { SeenSetPreparation } from "./seen-set.js";
import {
  closeRunNotModified,
  lastRunValidators,
  saveRunSourceDate,
  saveRunValidators,
} from "./validators.js";

/**
 * A held lease (advisory or table, docs/operations.md, Choosing the lease), as the store needs it: the dedicated
 * connection the lease bound its fence to, and how the lease tells it is gone.
 */
export interface Lease {
  readonly supplier: string;
  /** The dedicated connection of the tick (for the advisory lease, the one holding the lock). */
  readonly client: pg.PoolClient;
  /** Aborts (reason: `IngestionError('LEASE_LOST')`) when the lease is lost. */
  readonly signal: AbortSignal;
  readonly lost: boolean;
  /** How often the run heartbeat must call {@link renew}; absent when the lease needs no renewal. */
  readonly renewEveryMs?: number;
  /** Extends the lease; when it is gone, marks it lost and aborts `signal`. Never throws. */
  renew?(): Promise<void>;
  /** Gives the lease up and returns the connection to the pool (destroys it when lost). Idempotent. */
  release(): Promise<void>;
}

export interface RunSessionOptions {
  clock: Clock;
  log: Logger;
  /** How often the run heartbeat is written through the lease connection (default 10 s). */
  heartbeatMs?: number;
  /**
   * Deadline of the lost-lease close from a fresh connection (connect and each statement;
   * default 10 s, a third of the default `SUPPLIER_SYNC_LEASE_DEAD_PEER`).
   */
  statementDeadlineMs?: number;
}

const DEFAULT_HEARTBEAT_MS = 10_000;
const DEFAULT_STATEMENT_DEADLINE_MS = 10_000;

/** Opens the run session of a held lease. The session owns the lease from now on. */
export function openRunSession(lease: Lease, options: RunSessionOptions): RunSession {
  const db = lease.client;
  const supplier = lease.supplier;
  const seen = new SeenSetPreparation();
  const fields = new RunFieldState();
  const earlier = new EarlierHolds();
  // The scratch buffer of the run's page columns (binary-arrays.ts), reused page after page.
  const arrays = new BinaryArrays();
  let guards: GuardSettings | null = null;
  let log = options.log;
  let runId: number | undefined;
  let closed = false;
  let heartbeat: { stop(): Promise<void> } | undefined;

  const openRun = (what: string): number => {
    if (runId === undefined) throw new Error(`${what} before the run session started a run`);
    if (closed) throw new Error(`${what} after run ${runId} was closed`);
    return runId;
  };
  const stopHeartbeat = async () => {
    const running = heartbeat;
    heartbeat = undefined;
    await running?.stop();
  };

  const session: RunSession = {
    supplier,
    signal: lease.signal,
    get lost() {
      return lease.lost;
    },
    databaseNow: () => classified(() => databaseNow(db)),
    recoverAbandoned: (): Promise<RecoveredRun[]> => classified(() => recoverAbandonedRuns(db, supplier)),
    isPaused: () => classified(() => isPaused(db, supplier)),
    hasPendingTrigger: () => classified(() => hasPendingTrigger(db, supplier)),
    claimTrigger: () => classified(() => claimTrigger(db, supplier, openRun("claimTrigger"))),
    isDue: async (slotStart) => !(await classified(() => hasCompleteWalkInSlot(db, supplier, slotStart))),
    async start(input: {
      slotStart: Date;
      startedAt?: Date;
      trigger: RunTrigger;
      owner: RunOwner;
      guards: GuardSettings | null;
    }) {
      if (runId !== undefined) throw new Error(`the run session already started run ${runId}`);
      guards = input.guards;
      const { slotStart, startedAt, trigger, owner } = input;
      const id = await classified(() => startRun(db, { supplier, slotStart, startedAt, trigger, owner }));
      runId = id;
      log = log.child({ run_id: id });
      heartbeat = startHeartbeat(session, lease, options);
      return id;
    },
    async commitPage(page: Page): Promise<PageCounts> {
      const id = openRun("commitPage");
      return classified(() =>
        commitPage(db, { runId: id, supplier, page, guards }, seen, fields, earlier, arrays),
      );
    },
    async failStep(input: {
      seq: number;
      errorCode: string;
      httpAttempts: number;
      rejects?: Reject[];
      startedAt?: Date;
    }) {
      const id = openRun("failStep");
      return classified(() => recordFailedStep(db, { runId: id, supplier, ...input }));
    },
    previousValidators: () => classified(() => lastRunValidators(db, supplier)),
    async close({ validators, sourceDate, ...input }: CloseInput): Promise<ClosedRun | null> {
      const id = openRun("close");
      closed = true;
      await stopHeartbeat();
      if (validators) await classified(() => saveRunValidators(db, id, validators));
      if (sourceDate) await classified(() => saveRunSourceDate(db, id, sourceDate));
      const done = await classified(() => closeRun(db, { runId: id, ...input, guards }));
      return (
        done && {
          state: done.state,
          errorCode: done.errorCode,
          delisted: done.counts.recordsDelisted,
          delistHeld: done.delistHeld,
          heldFields: done.heldFields,
        }
      );
    },
    async closeNotModified(validators: ResponseValidators, sourceDate?: string | null) {
      const id = openRun("closeNotModified");
      closed = true;
      await stopHeartbeat();
      if (sourceDate) await classified(() => saveRunSourceDate(db, id, sourceDate));
      const done = await classified(() => closeRunNotModified(db, { runId: id, validators }));
      return done && { state: done.state, unchanged: done.counts.recordsUnchanged };
    },
    async heartbeat() {
      await lease.renew?.();
      if (lease.lost || runId === undefined || closed) return;
      try {
        await heartbeatRun(db, runId);
      } catch (err) {
        log.warn({ err: errorMessage(err) }, "run heartbeat failed");
      }
    },
    async release() {
      await stopHeartbeat();
      await lease.release();
    },
  };
  return session;
}

function startHeartbeat(
  session: RunSession,
  lease: Lease,
  options: RunSessionOptions,
): { stop(): Promise<void> } {
  const stop = new AbortController();
  const both = AbortSignal.any([lease.signal, stop.signal]);
  const every = Math.min(
    options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS,
    lease.renewEveryMs ?? Number.POSITIVE_INFINITY,
  );
  const loop = (async () => {
    for (;;) {
      try {
        await options.clock.sleep(every, both);
      } catch {
        return;
      }
      await session.heartbeat();
      if (lease.lost) return;
    }
  })();
  return {
    async stop() {
      stop.abort();
      await loop;
    },
  };
}

/**
 * The `RunSessions` port on a pool: `acquire` takes the lease (advisory or table; it
 * throws when the database cannot be reached), and the lost-lease close goes through
 * `pool`, never through the lease connection.
 */
export function runSessions(
  pool: pg.Pool,
  acquire: (supplier: string, log: Logger) => Promise<Lease | LeaseBusy | null>,
  options: Omit<RunSessionOptions, "log">,
): RunSessions {
  return {
    async open(supplier, log) {
      const got = await classified(() => acquire(supplier, log));
      if (got === null) return classified(() => holderRun(pool, supplier));
      if ("busyUntilMs" in got) return got;
      return openRunSession(got, { ...options, log });
    },
    async closeAfterLostLease(runId, message) {
      const deadline = options.statementDeadlineMs ?? DEFAULT_STATEMENT_DEADLINE_MS;
      const closed = await classified(() =>
        withFreshConnection(pool, deadline, "the close of a run that lost its lease", (client) =>
          closeRun(client, { runId, walkComplete: false, errorCode: "LEASE_LOST", errorMessage: message }),
        ),
      );
      return closed?.state ?? null;
    },
  };
}

/**
 * The slot of the run an advisory lease's holder is walking, with the database's clock,
 * or null when it has none `running` (it is at its due gate, or its run just closed).
 */
async function holderRun(pool: pg.Pool, supplier: string): Promise<HolderRun | null> {
  const { rows } = await pool.query<{ slot: number | null; now: number }>(
    `select (extract(epoch from min(slot_start)) * 1000)::float8 as slot,
            (extract(epoch from now()) * 1000)::float8 as now
       from ingestion_runs where supplier = $1 and state = 'running'`,
    [supplier],
  );
  const row = rows[0];
  return row?.slot == null ? null : { holderSlotStartMs: row.slot, databaseNowMs: row.now };
}
