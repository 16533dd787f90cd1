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
  field_coverage: RunRow["fieldCoverage"];
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
            started_at, heartbeat_at, finished_at, field_coverage, ${RUN_COUNT_COLUMNS}
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
    fieldCoverage: r.field_coverage,
  }));
}

/** A complete walk (docs/connectors.md, Guards): succeeded, or held by a guard. Matches `ingestion_runs_complete_walk`. */
const COMPLETE_WALK = `(r.state = 'succeeded' or (r.state = 'partial' and r.error_code = 'GUARD'))`;

/**
 * `$1`: supplier names. The newest complete walk of each: a backward scan of the
 * partial index `ingestion_runs_complete_walk`, one entry each. `nulls last` matches
 * the index (`finished_at DESC NULLS LAST`); a plain `desc` would not, and each lookup
 * would read and sort all of the supplier's walks instead of one index entry.
 */
export const LAST_SUCCESSES_SQL = `select s.supplier,
       (select r.finished_at from ingestion_runs r
         where r.supplier = s.supplier and ${COMPLETE_WALK}
         order by r.finished_at desc nulls last limit 1) as finished_at
  from unnest($1::text[]) as s(supplier)`;

/**
 * `finished_at` of the newest complete walk of each supplier (null if it never
 * completed one), in one query. Every requested supplier is in the result. A walk
 * held by a guard counts: it is the supplier's freshest data, and the slot's walk.
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

/**
 * Freshness with the guards' state, for `/readyz`, `/metrics` and the console: per
 * supplier the newest complete walk, whether it is held (closed `GUARD` with items
 * still undecided), and how many items of the supplier are undecided in all. Index
 * lookups only: the complete-walk index, `ingestion_held`'s run key and its partial
 * index of undecided items.
 */
export const FRESHNESS_SQL = `select s.supplier, w.finished_at, w.id as walk_id,
       coalesce(w.guarded and exists (select 1 from ingestion_held h where h.run_id = w.id and h.state = 'held'),
                false) as walk_held,
       (select count(*) from ingestion_held h where h.supplier = s.supplier and h.state = 'held')::int as held_items,
       (select c.paused_at from ingestion_controls c where c.supplier = s.supplier) as paused_at
  from unnest($1::text[]) as s(supplier)
  left join lateral (
    select r.id, r.finished_at, r.state = 'partial' as guarded from ingestion_runs r
     where r.supplier = s.supplier and ${COMPLETE_WALK}
     order by r.finished_at desc nulls last limit 1
  ) w on true`;

/** What the guards hold of one supplier, as health and the console show it. */
export interface SupplierHold {
  /** The newest complete walk, when a guard holds it (items undecided); else null. */
  runId: number | null;
  /** Undecided held items of the supplier, over all its runs. */
  items: number;
}

export interface FreshnessRows {
  lastSuccess: Map<string, Date | null>;
  held: Map<string, SupplierHold>;
  /** When an operator paused the supplier (`ingestion_controls`), or null (docs/operations.md, Pausing). */
  paused: Map<string, Date | null>;
}

/** {@link FRESHNESS_SQL} as maps; every requested supplier is in both. */
export async function readFreshness(db: Queryable, suppliers: string[]): Promise<FreshnessRows> {
  const lastSuccess = new Map<string, Date | null>(suppliers.map((s) => [s, null]));
  const held = new Map<string, SupplierHold>(suppliers.map((s) => [s, { runId: null, items: 0 }]));
  const paused = new Map<string, Date | null>(suppliers.map((s) => [s, null]));
  if (suppliers.length === 0) return { lastSuccess, held, paused };
  const { rows } = await db.query<{
    supplier: string;
    finished_at: Date | null;
    walk_id: string | null;
    walk_held: boolean;
    held_items: number;
    paused_at: Date | null;
  }>(FRESHNESS_SQL, [suppliers]);
  for (const row of rows) {
    lastSuccess.set(row.supplier, row.finished_at);
    held.set(row.supplier, {
      runId: row.walk_held && row.walk_id !== null ? toId(row.walk_id) : null,
      items: row.held_items,
    });
    paused.set(row.supplier, row.paused_at);
  }
  return { lastSuccess, held, paused };
}
