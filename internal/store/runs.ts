/**
 * Durable run lifecycle (docs/architecture.md, The store): start, heartbeat, close by compare-and-set,
 * recovery of runs whose holder lost the lease. A run's outcome is always derived
 * in SQL from its committed steps, never from what the process believes.
 */
import type { RunOwner, RunState, RunTrigger } from "../ingestion/ports.js";
import { inTransaction, type Queryable, toId } from "./queryable.js";
import { applyDelisting, discardSeenSet, discardSeenSets, isSeenSetComplete } from "./seen-set.js";

/** The counters of a run, named after their columns (`ingestion_runs.pages`, `records_*`). */
export interface RunCounts {
  pages: number;
  recordsSeen: number;
  recordsInserted: number;
  recordsUpdated: number;
  recordsUnchanged: number;
  recordsRejected: number;
  recordsDelisted: number;
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
}

/** Longest `error_message` kept; longer messages are cut (they are for humans, not parsing). */
export const ERROR_MESSAGE_MAX_CHARS = 2000;

/** Counter columns as `RunCounts`, for every query that returns a run. */
export const RUN_COUNT_COLUMNS = `pages, records_seen, records_inserted, records_updated,
  records_unchanged, records_rejected, records_delisted`;

export interface RunCountRow {
  pages: number;
  records_seen: number;
  records_inserted: number;
  records_updated: number;
  records_unchanged: number;
  records_rejected: number;
  records_delisted: number;
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
  await discardSeenSets(
    db,
    closed.map((r) => r.id),
  );
  return closed;
}

/** True if a succeeded run (any trigger, forced included) of the supplier has this `slot_start`. */
export async function hasSuccessInSlot(db: Queryable, supplier: string, slotStart: Date): Promise<boolean> {
  const { rows } = await db.query<{ found: boolean }>(
    `select exists (
       select 1 from ingestion_runs where supplier = $1 and slot_start = $2 and state = 'succeeded'
     ) as found`,
    [supplier, slotStart],
  );
  return rows[0]?.found === true;
}

/** Inserts the run row `running` with its owner, slot and trigger, before the first request. Returns its id. */
export async function startRun(
  db: Queryable,
  input: { supplier: string; slotStart: Date; trigger: RunTrigger; owner: RunOwner },
): Promise<number> {
  const owner = { hostname: input.owner.hostname, pid: input.owner.pid, bootId: input.owner.bootId };
  const { rows } = await inTransaction(db, (tx) =>
    tx.query<{ id: string }>(
      `insert into ingestion_runs (supplier, slot_start, trigger, state, owner)
     values ($1, $2, $3, 'running', $4::jsonb)
     returning id`,
      [input.supplier, input.slotStart, input.trigger, JSON.stringify(owner)],
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
 * the outcome derived in SQL from its steps: `succeeded` only if the walk completed,
 * no error code is given, no step failed and at least one step succeeded; `partial`
 * if some step succeeded; `failed` otherwise. `error_message` is cut to
 * {@link ERROR_MESSAGE_MAX_CHARS}.
 *
 * When the result is `succeeded`, the same transaction delists the supplier's
 * offers the run did not see and clears `delisted_at` of those it saw again; this
 * needs the run's seen set, staged on the lease connection by `commitPage`, so call
 * it with the lease client. Elsewhere (or if the set does not cover every
 * succeeded step) delisting is skipped and `records_delisted` stays 0.
 *
 * Returns null when the CAS matched nothing: the run was already closed (by recovery).
 */
export async function closeRun(
  db: Queryable,
  input: { runId: number; walkComplete: boolean; errorCode: string | null; errorMessage: string | null },
): Promise<{ state: RunState; counts: RunCounts } | null> {
  const message = input.errorMessage === null ? null : input.errorMessage.slice(0, ERROR_MESSAGE_MAX_CHARS);
  return inTransaction(db, async (client) => {
    const { rows } = await client.query<RunCountRow & { state: RunState; supplier: string; ok: number }>(
      `with steps as (
         select count(*) filter (where state = 'succeeded')::int as ok,
                count(*) filter (where state = 'failed')::int as failed
           from ingestion_run_steps where run_id = $1
       )
       update ingestion_runs r
          set state = case
                when $2::boolean and $3::text is null and steps.failed = 0 and steps.ok > 0 then 'succeeded'
                when steps.ok > 0 then 'partial'
                else 'failed'
              end,
              error_code = $3::text,
              error_message = $4::text,
              finished_at = now(),
              heartbeat_at = now()
         from steps
        where r.id = $1 and r.state = 'running'
       returning r.state, r.supplier, steps.ok, ${RUN_COUNT_COLUMNS}`,
      [input.runId, input.walkComplete, input.errorCode, message],
    );
    const closed = rows[0];
    if (!closed) return null;
    const counts = toRunCounts(closed);
    if (closed.state === "succeeded" && (await isSeenSetComplete(client, input.runId, closed.ok))) {
      counts.recordsDelisted = await applyDelisting(client, input.runId, closed.supplier);
      await client.query("update ingestion_runs set records_delisted = $2 where id = $1", [
        input.runId,
        counts.recordsDelisted,
      ]);
    }
    await discardSeenSet(client, input.runId);
    return { state: closed.state, counts };
  });
}
