/**
 * Durable run lifecycle (docs/architecture.md, The store): start, heartbeat, close by compare-and-set,
 * recovery of runs whose holder lost the lease. A run's outcome is always derived
 * in SQL from its committed steps, never from what the process believes.
 */
import type pg from "pg";
import { recordEvent, recordRunsClosed } from "../events/outbox.js";
import type { GuardSettings, RunOwner, RunState, RunTrigger } from "../ingestion/ports.js";
import {
  appendSeenToEarlierDelists,
  delistUnlessHeld,
  holdDelisting,
  updateEarlierHolds,
} from "./delisting.js";
import { inTransaction, type Queryable, toId } from "./queryable.js";
import { discardSeenSet, discardSeenSets, isSeenSetComplete } from "./seen-set.js";

/** The counters of a run, named after their columns (`ingestion_runs.pages`, `records_*`). */
export interface RunCounts {
  pages: number;
  recordsSeen: number;
  recordsInserted: number;
  recordsUpdated: number;
  recordsUnchanged: number;
  recordsRejected: number;
  recordsDelisted: number;
  /** Items the run's guards held (docs/connectors.md, Guards). */
  recordsHeld: number;
}

/** One `ingestion_runs` row as read back by `listRuns`. */
export interface RunRow {
  id: number;
  supplier: string;
  slotStart: Date;
  trigger: RunTrigger;
  state: RunState;
  errorCode: string | null;
  errorMessage: string | null;
  owner: RunOwner;
  startedAt: Date;
  heartbeatAt: Date;
  finishedAt: Date | null;
  counts: RunCounts;
  /**
   * Per mapped field, how many of the run's records carried a value
   * (docs/connectors.md, Guards); null when the connector counted none.
   */
  fieldCoverage: Record<string, { source: string; records: number; withValue: number }> | null;
}

/** Longest `error_message` kept; longer messages are cut (they are for humans, not parsing). */
export const ERROR_MESSAGE_MAX_CHARS = 2000;

/** Counter columns as `RunCounts`, for every query that returns a run. */
export const RUN_COUNT_COLUMNS = `pages, records_seen, records_inserted, records_updated,
  records_unchanged, records_rejected, records_delisted, records_held`;

export interface RunCountRow {
  pages: number;
  records_seen: number;
  records_inserted: number;
  records_updated: number;
  records_unchanged: number;
  records_rejected: number;
  records_delisted: number;
  records_held: number;
}

export function toRunCounts(row: RunCountRow): RunCounts {
  return {
    pages: row.pages,
    recordsSeen: row.records_seen,
    recordsInserted: row.records_inserted,
    recordsUpdated: row.records_updated,
    recordsUnchanged: row.records_unchanged,
    recordsRejected: row.records_rejected,
    recordsDelisted: row.records_delisted,
    recordsHeld: row.records_held,
  };
}

/**
 * Closes every `running` run of the supplier: its holder lost the lock, so it is
 * abandoned by definition. State derived from its committed steps, capped at
 * `partial` (partial if at least one step succeeded, else failed), `error_code`
 * `INTERRUPTED`. Call under the supplier's lease. Returns what it closed.
 *
 * Like every write of a tick, it runs in a transaction, so on a lease connection the
 * lease's fence comes first: a holder that lost its lease cannot close the new
 * holder's run.
 */
export async function recoverAbandonedRuns(
  db: Queryable,
  supplier: string,
): Promise<{ id: number; state: "partial" | "failed"; pages: number }[]> {
  return inTransaction(db, (tx) => recoverInTransaction(tx, supplier));
}

async function recoverInTransaction(
  db: Queryable,
  supplier: string,
): Promise<{ id: number; state: "partial" | "failed"; pages: number }[]> {
  const { rows } = await db.query<{ id: string; state: "partial" | "failed"; pages: number }>(
    `with steps as (
       select s.run_id, count(*)::int as ok
         from ingestion_run_steps s
         join ingestion_runs r on r.id = s.run_id
        where r.supplier = $1 and r.state = 'running' and s.state = 'succeeded'
        group by s.run_id
     )
     update ingestion_runs r
        set state = case when coalesce(steps.ok, 0) > 0 then 'partial' else 'failed' end,
            error_code = 'INTERRUPTED',
            error_message = 'run abandoned: its process lost the lease before closing it',
            finished_at = now()
       from (select id from ingestion_runs where supplier = $1 and state = 'running') todo
       left join steps on steps.run_id = todo.id
      where r.id = todo.id and r.state = 'running'
     returning r.id, r.state, coalesce(steps.ok, 0) as pages`,
    [supplier],
  );
  const closed = rows.map((r) => ({ id: toId(r.id), state: r.state, pages: r.pages }));
  await recordRunsClosed(
    db,
    closed.map((r) => r.id),
  );
  // What the abandoned runs saw (kept durably only under the table lease) still counts as
  // "seen since" for the supplier's held delistings (docs/connectors.md, Guards).
  await appendSeenToEarlierDelists(
    db,
    supplier,
    closed.map((r) => r.id),
  );
  await discardSeenSets(
    db,
    closed.map((r) => r.id),
  );
  return closed;
}

/**
 * True if the supplier walked this slot already (the due gate, docs/operations.md, Due gate): a
 * succeeded run (any trigger, forced included, but `manual`), or a complete walk closed `partial` with
 * `GUARD` (docs/connectors.md, Guards: the verdict is about the data, so it is not walked again in the slot).
 * A `manual` run (a trigger, docs/operations.md, Triggering) is an extra walk: the slot's
 * scheduled walk still happens.
 */
// `finished_at >= slot_start` always holds; it bounds the scan of the complete-walk index to the slot.
export async function hasCompleteWalkInSlot(
  db: Queryable,
  supplier: string,
  slotStart: Date,
): Promise<boolean> {
  const { rows } = await db.query<{ found: boolean }>(
    `select exists (
       select 1 from ingestion_runs
        where supplier = $1 and slot_start = $2 and finished_at >= $2
          and (state = 'succeeded' or (state = 'partial' and error_code = 'GUARD'))
          and trigger <> 'manual'
     ) as found`,
    [supplier, slotStart],
  );
  return rows[0]?.found === true;
}

/**
 * Inserts the run row `running` with its owner, slot and trigger, before the first request.
 * `started_at` is `startedAt` when given (the database time the tick read its slot at, so
 * a run decided just before a slot boundary does not start after its slot ends), else now().
 * Returns its id.
 */
export async function startRun(
  db: Queryable,
  input: {
    supplier: string;
    slotStart: Date;
    startedAt?: Date | undefined;
    trigger: RunTrigger;
    owner: RunOwner;
  },
): Promise<number> {
  const owner = { hostname: input.owner.hostname, pid: input.owner.pid, bootId: input.owner.bootId };
  const { rows } = await inTransaction(db, (tx) =>
    tx.query<{ id: string }>(
      `insert into ingestion_runs (supplier, slot_start, trigger, state, owner, started_at)
     values ($1, $2, $3, 'running', $4::jsonb, coalesce($5::timestamptz, now()))
     returning id`,
      [input.supplier, input.slotStart, input.trigger, JSON.stringify(owner), input.startedAt ?? null],
    ),
  );
  const row = rows[0];
  if (!row) throw new Error("insert into ingestion_runs returned no id");
  return toId(row.id);
}

/** Refreshes `heartbeat_at` of a running run; a closed run is left as it is. */
export async function heartbeatRun(db: Queryable, runId: number): Promise<void> {
  // One statement, never a transaction: it runs beside the page transactions on the
  // lease connection, and a `begin`/`commit` of its own would split theirs.
  await db.query("update ingestion_runs set heartbeat_at = now() where id = $1 and state = 'running'", [
    runId,
  ]);
}

/**
 * Closes the run with one compare-and-set `WHERE id = runId AND state = 'running'`,
 * the outcome derived in SQL from its steps: a complete walk (the walk completed, no
 * error code is given, no step failed and at least one step succeeded) is `succeeded`,
 * or `partial` with `GUARD` when its guards held anything (docs/connectors.md, Guards);
 * `partial` if some step succeeded; `failed` otherwise. `error_message` is cut to
 * {@link ERROR_MESSAGE_MAX_CHARS}.
 *
 * A complete walk delists, in the same transaction, the supplier's offers it did not
 * see and clears `delisted_at` of those it saw again, unless the mass-delisting guard
 * holds the delisting (delisting.ts). This needs the run's seen set, staged on the
 * lease connection by `commitPage`, so call it with the lease client. Elsewhere (or if
 * the set does not cover every succeeded step) delisting is skipped and
 * `records_delisted` stays 0.
 *
 * The same transaction writes the run's `run.closed` event (and `guard.held` when its
 * guards held anything) to the outbox (events/outbox.ts).
 *
 * Returns null when the CAS matched nothing: the run was already closed (by recovery).
 */
export async function closeRun(
  db: Queryable,
  input: {
    runId: number;
    walkComplete: boolean;
    errorCode: string | null;
    errorMessage: string | null;
    /** The run's guards; absent or null: off. */
    guards?: GuardSettings | null;
  },
): Promise<ClosedRunRow | null> {
  const guards = input.guards ?? null;
  return inTransaction(db, async (client) => {
    const { rows } = await client.query<
      RunCountRow & { supplier: string; ok: number; failed: number; field_coverage: CoverageJson | null }
    >(
      `select r.supplier, r.field_coverage, steps.ok, steps.failed, ${RUN_COUNT_COLUMNS}
         from ingestion_runs r,
              lateral (select count(*) filter (where state = 'succeeded')::int as ok,
                              count(*) filter (where state = 'failed')::int as failed
                         from ingestion_run_steps where run_id = r.id) steps
        where r.id = $1 and r.state = 'running'
          for update of r`,
      [input.runId],
    );
    const run = rows[0];
    if (!run) return null;
    const counts = toRunCounts(run);
    const complete = input.walkComplete && input.errorCode === null && run.failed === 0 && run.ok > 0;
    let delistHeld = 0;
    let decidedDelisting = false;
    if (complete && (await isSeenSetComplete(client, input.runId, run.ok))) {
      const verdict = await delistUnlessHeld(client, {
        runId: input.runId,
        supplier: run.supplier,
        insertedByRun: run.records_inserted,
        guards,
      });
      decidedDelisting = true;
      counts.recordsDelisted = verdict.delisted;
      if (!verdict.applied && guards) {
        delistHeld = verdict.missing;
        await holdDelisting(client, { runId: input.runId, supplier: run.supplier, verdict, guards });
      }
    }
    await updateEarlierHolds(client, {
      runId: input.runId,
      supplier: run.supplier,
      decidedDelisting,
      fieldsWithValues: Object.entries(run.field_coverage ?? {})
        .filter(([, c]) => c.withValue > 0)
        .map(([field]) => field),
    });
    const held = await heldSummary(client, input.runId);
    counts.recordsHeld = held.items;
    let state: RunState = complete ? "succeeded" : run.ok > 0 ? "partial" : "failed";
    let errorCode = input.errorCode;
    let message = input.errorMessage;
    if (complete && held.items > 0) {
      state = "partial";
      errorCode = "GUARD";
      message = `held: ${held.summary}`;
    }
    await client.query(
      `update ingestion_runs
          set state = $2, error_code = $3, error_message = $4, finished_at = now(), heartbeat_at = now(),
              records_delisted = $5, records_held = $6
        where id = $1`,
      [
        input.runId,
        state,
        errorCode,
        message === null ? null : message.slice(0, ERROR_MESSAGE_MAX_CHARS),
        counts.recordsDelisted,
        counts.recordsHeld,
      ],
    );
    if (held.items > 0) {
      await recordEvent(client, {
        type: "guard.held",
        supplier: run.supplier,
        payload: { run_id: input.runId, items: held.items, kinds: held.byKind, summary: held.summary },
      });
    }
    await recordRunsClosed(client, [input.runId]);
    await discardSeenSet(client, input.runId);
    return { state, errorCode, counts, delistHeld, heldFields: held.byKind.field ?? 0 };
  });
}

/** A closed run as {@link closeRun} returns it. */
export interface ClosedRunRow {
  state: RunState;
  errorCode: string | null;
  counts: RunCounts;
  /** Offers whose delisting the guard held (0 when it passed or did not run). */
  delistHeld: number;
  /** The run's `field` items. */
  heldFields: number;
}

type CoverageJson = Record<string, { source: string; records: number; withValue: number }>;

const KIND_NAMES: Record<string, [string, string]> = {
  price_jump: ["price jump", "price jumps"],
  currency: ["currency switch", "currency switches"],
  field: ["vanished field", "vanished fields"],
};

/**
 * The run's held items, counted, and a one-line summary for `error_message`:
 * `3 price jumps (first: A-1 price 12.50 -> 1250.00 (x100)); delist: 9,412 of 10,000 listed (94 %) > 25 % and > 20`.
 */
async function heldSummary(
  db: pg.ClientBase,
  runId: number,
): Promise<{ items: number; byKind: Record<string, number>; summary: string }> {
  const { rows } = await db.query<{ kind: string; n: number; first: string }>(
    `select kind, count(*)::int as n,
            (array_agg(coalesce(sku || ' ', '') || reason order by id))[1] as first
       from ingestion_held where run_id = $1 group by kind order by min(id)`,
    [runId],
  );
  let items = 0;
  const byKind: Record<string, number> = {};
  const parts: string[] = [];
  for (const row of rows) {
    items += row.n;
    byKind[row.kind] = row.n;
    const names = KIND_NAMES[row.kind];
    if (!names) parts.push(row.first);
    else if (row.kind === "field")
      parts.push(row.n === 1 ? row.first : `${row.n} ${names[1]} (first: ${row.first})`);
    else
      parts.push(row.n === 1 ? `1 ${names[0]}: ${row.first}` : `${row.n} ${names[1]} (first: ${row.first})`);
  }
  return { items, byKind, summary: parts.join("; ") };
}
