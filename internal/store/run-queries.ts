/**
 * Read-only queries over `ingestion_runs`: the `runs` command and `/readyz` freshness.
 */
import type { RunOwner, RunState, RunTrigger } from "../ingestion/ports.js";
import { classified } from "./database-error.js";
import { type Queryable, toId } from "./queryable.js";
import { RUN_COUNT_COLUMNS, type RunCountRow, type RunRow, toRunCounts } from "./runs.js";

interface RunDbRow extends RunCountRow {
  id: string;
  supplier: string;
  slot_start: Date;
  trigger: RunTrigger;
  state: RunState;
  error_code: string | null;
  error_message: string | null;
  owner: RunOwner;
  started_at: Date;
  heartbeat_at: Date;
  finished_at: Date | null;
}

/**
 * Recent runs, newest first (by `started_at`, then id), of one supplier or of all.
 * `limit` is clamped to at least 1. Fails with a `DatabaseError`.
 */
export async function listRuns(
  db: Queryable,
  options: { supplier?: string; limit: number },
): Promise<RunRow[]> {
  const limit = Math.max(1, Math.floor(options.limit));
  const { rows } = await classified(() =>
    db.query<RunDbRow>(
      `select id, supplier, slot_start, trigger, state, error_code, error_message, owner,
            started_at, heartbeat_at, finished_at, ${RUN_COUNT_COLUMNS}
       from ingestion_runs
      where $1::text is null or supplier = $1::text
      order by started_at desc, id desc
      limit $2`,
      [options.supplier ?? null, limit],
    ),
  );
  return rows.map((r) => ({
    id: toId(r.id),
    supplier: r.supplier,
    slotStart: r.slot_start,
    trigger: r.trigger,
    state: r.state,
    errorCode: r.error_code,
    errorMessage: r.error_message,
    owner: r.owner,
    startedAt: r.started_at,
    heartbeatAt: r.heartbeat_at,
    finishedAt: r.finished_at,
    counts: toRunCounts(r),
  }));
}

/**
 * `$1`: supplier names. `nulls last` matches the index (`finished_at DESC NULLS
 * LAST`); a plain `desc` would not, and each lookup would read and sort all of the
 * supplier's successes instead of one index entry.
 */
export const LAST_SUCCESSES_SQL = `select s.supplier,
       (select r.finished_at from ingestion_runs r
         where r.supplier = s.supplier and r.state = 'succeeded'
         order by r.finished_at desc nulls last limit 1) as finished_at
  from unnest($1::text[]) as s(supplier)`;

/**
 * `finished_at` of the newest succeeded run of each supplier (null if it never
 * succeeded), in one query: each lookup is a backward scan of the partial index
 * `ingestion_runs_supplier_success`. Every requested supplier is in the result.
 */
export async function lastSuccesses(db: Queryable, suppliers: string[]): Promise<Map<string, Date | null>> {
  const result = new Map<string, Date | null>(suppliers.map((s) => [s, null]));
  if (suppliers.length === 0) return result;
  const { rows } = await db.query<{ supplier: string; finished_at: Date | null }>(LAST_SUCCESSES_SQL, [
    suppliers,
  ]);
  for (const row of rows) result.set(row.supplier, row.finished_at);
  return result;
}
