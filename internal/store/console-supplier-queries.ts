/**
 * Read-only queries of the console's supplier page (`GET /suppliers/<name>`) and of a
 * run page's previous/next links (docs/operations.md, Operator console).
 *
 * Invariant: every statement is bounded by the page, never by the history.
 * - A supplier's runs are listed newest first **by id** and paged by keyset on the id:
 *   runs of one supplier are serialised by its lease, so id order is start order, and
 *   the id is unique (timestamps can tie). Each page is one statement of at most
 *   |states| × |triggers| (≤ 4 × 5) backward probes of
 *   `ingestion_runs_supplier_state_trigger_id (supplier, state, trigger, id)`, each
 *   stopped by the page's limit, merged and cut to the page; a filter only narrows the
 *   lists. So a filter that matches one run in a million costs what the unfiltered
 *   page costs, and no page reads more than 20 × ({@link PAGE_RUNS} + 1) index entries.
 * - The charts read the last {@link CHART_RUNS} runs through
 *   `ingestion_runs_supplier_started` and the last success before them through
 *   `ingestion_runs_supplier_success`; held items through `ingestion_held_undecided`,
 *   their count capped at {@link HELD_COUNT_CAP}; pause state by primary key; pending
 *   triggers through `ingestion_triggers_pending`.
 * `bench/console.ts` checks the plans over 1,000,000 runs.
 */
import { inTransaction, type Queryable, toId } from "./queryable.js";
import { RUN_COUNT_COLUMNS, type RunCountRow, type RunCounts, toRunCounts } from "./runs.js";

/** Values of `ingestion_runs.state` (its check constraint). */
export const RUN_STATES = ["running", "succeeded", "partial", "failed"] as const;
/** Values of `ingestion_runs.trigger` (its check constraint). */
export const RUN_TRIGGERS = ["schedule", "retry", "tick_once", "forced", "manual"] as const;
export type RunStateName = (typeof RUN_STATES)[number];
export type RunTriggerName = (typeof RUN_TRIGGERS)[number];

/** Runs listed per page of the supplier page. */
export const PAGE_RUNS = 50;
/** Runs drawn in the supplier page's charts. */
export const CHART_RUNS = 100;
/** Held items listed on the supplier page; the count of the rest is shown. */
export const MAX_HELD_SHOWN = 50;
/** Held items are counted up to this many ("10,000 or more" past it). */
export const HELD_COUNT_CAP = 10_000;
/** Pending triggers listed. */
export const MAX_TRIGGERS_SHOWN = 10;

const INT8_MAX = "9223372036854775807";

/**
 * Ids of a supplier's runs of the given states and triggers, older than `$4` (an id),
 * newest first, at most `$5`. `$1` supplier, `$2` states text[], `$3` triggers text[].
 */
export const OLDER_IDS_SQL = `select k.id
  from unnest($2::text[]) as s(state) cross join unnest($3::text[]) as t(trigger)
  cross join lateral (
    select x.id from ingestion_runs x
     where x.supplier = $1 and x.state = s.state and x.trigger = t.trigger and x.id < $4::bigint
     order by x.id desc limit $5
  ) k
 order by k.id desc limit $5`;

/** As {@link OLDER_IDS_SQL}, newer than `$4`, oldest first. */
export const NEWER_IDS_SQL = `select k.id
  from unnest($2::text[]) as s(state) cross join unnest($3::text[]) as t(trigger)
  cross join lateral (
    select x.id from ingestion_runs x
     where x.supplier = $1 and x.state = s.state and x.trigger = t.trigger and x.id > $4::bigint
     order by x.id limit $5
  ) k
 order by k.id limit $5`;

/** The listed runs' rows by primary key (`$1` bigint[]), newest first. */
export const RUNS_BY_ID_SQL = `select id, state, trigger, error_code, left(error_message, 300) as error_message,
       started_at, finished_at, ${RUN_COUNT_COLUMNS}
  from ingestion_runs where id = any($1::bigint[]) order by id desc`;

/** The last `$2` runs of supplier `$1` for the charts, newest first. */
export const CHART_SQL = `select id, state, started_at, finished_at,
       records_inserted + records_updated + records_delisted as changed
  from ingestion_runs where supplier = $1
 order by started_at desc nulls last limit $2`;

/** The last success of `$1` that finished before `$2`. */
export const SUCCESS_BEFORE_SQL = `select finished_at from ingestion_runs
 where supplier = $1 and state = 'succeeded' and finished_at < $2
 order by finished_at desc nulls last limit 1`;

export const HELD_SQL = `select id, run_id, sku, kind, field, reason, stored, proposed, created_at
  from ingestion_held where supplier = $1 and state = 'held'
 order by sku limit $2`;
export const HELD_COUNT_SQL = `select count(*)::int as n from (
  select 1 from ingestion_held where supplier = $1 and state = 'held' limit $2) h`;
export const CONTROL_SQL =
  "select paused_at, paused_by, pause_reason from ingestion_controls where supplier = $1";
export const TRIGGERS_SQL = `select requested_at, requested_by from ingestion_triggers
 where supplier = $1 and taken_at is null order by requested_at limit $2`;

export interface RunListFilter {
  /** Empty: every state. */
  states: readonly RunStateName[];
  /** Empty: every trigger. */
  triggers: readonly RunTriggerName[];
}

/** Where a page of runs starts: the newest, or just older / newer than a run id. */
export type RunCursor = { kind: "newest" } | { kind: "before"; id: string } | { kind: "after"; id: string };

export interface ListedRun {
  id: number;
  state: RunStateName;
  trigger: string;
  errorCode: string | null;
  errorMessage: string | null;
  startedAt: Date;
  finishedAt: Date | null;
  counts: RunCounts;
}

export interface RunPage {
  /** Newest first, at most {@link PAGE_RUNS}. */
  runs: ListedRun[];
  /** The cursor of the next older page (`before`), null when none. */
  older: number | null;
  /** The cursor of the next newer page (`after`), null when this is the newest. */
  newer: number | null;
}

export interface ChartRun {
  id: number;
  state: RunStateName;
  startedAt: Date;
  finishedAt: Date | null;
  /** Inserted + updated + delisted. */
  changed: number;
}

export interface HeldItem {
  id: number;
  runId: number;
  sku: string | null;
  kind: string;
  field: string | null;
  reason: string;
  stored: unknown;
  proposed: unknown;
  createdAt: Date;
}

export interface SupplierControl {
  pausedAt: Date | null;
  pausedBy: string | null;
  pauseReason: string | null;
}

export interface SupplierDetail {
  page: RunPage;
  /** The last {@link CHART_RUNS} runs, newest first. */
  chart: ChartRun[];
  /** `finished_at` of the last success before the oldest chart run, null if none. */
  successBeforeChart: Date | null;
  held: HeldItem[];
  /** Undecided held items, at most {@link HELD_COUNT_CAP}. */
  heldTotal: number;
  control: SupplierControl | null;
  pendingTriggers: { requestedAt: Date; requestedBy: string }[];
}

const all = <T>(chosen: readonly T[], every: readonly T[]): T[] => [...(chosen.length > 0 ? chosen : every)];

interface RunDbRow extends RunCountRow {
  id: string;
  state: RunStateName;
  trigger: string;
  error_code: string | null;
  error_message: string | null;
  started_at: Date;
  finished_at: Date | null;
}

/** One page of a supplier's runs and its neighbours' cursors: three statements. */
export async function readRunPage(
  db: Queryable,
  supplier: string,
  filter: RunListFilter,
  cursor: RunCursor,
): Promise<RunPage> {
  const states = all(filter.states, RUN_STATES);
  const triggers = all(filter.triggers, RUN_TRIGGERS);
  const ids = async (sql: string, from: string, limit: number) =>
    (await db.query<{ id: string }>(sql, [supplier, states, triggers, from, limit])).rows.map((r) => r.id);

  let pageIds: string[];
  let hasOlder: boolean;
  let hasNewer: boolean;
  if (cursor.kind === "after") {
    const found = await ids(NEWER_IDS_SQL, cursor.id, PAGE_RUNS + 1);
    // Fewer newer runs than a page: the newest page, which starts at the head.
    if (found.length <= PAGE_RUNS) return readRunPage(db, supplier, filter, { kind: "newest" });
    pageIds = found.slice(0, PAGE_RUNS).reverse();
    hasNewer = true;
    hasOlder = (await ids(OLDER_IDS_SQL, pageIds.at(-1) as string, 1)).length > 0;
  } else {
    const found = await ids(OLDER_IDS_SQL, cursor.kind === "before" ? cursor.id : INT8_MAX, PAGE_RUNS + 1);
    pageIds = found.slice(0, PAGE_RUNS);
    hasOlder = found.length > PAGE_RUNS;
    // Below the head there may be newer runs: the page starts after the newest of them.
    const top = pageIds[0] ?? (cursor.kind === "before" ? String(BigInt(cursor.id) - 1n) : undefined);
    hasNewer = top !== undefined && (await ids(NEWER_IDS_SQL, top, 1)).length > 0;
  }
  const first = pageIds[0];
  const last = pageIds.at(-1);
  const older = hasOlder && last !== undefined ? toId(last) : null;
  const newer = hasNewer
    ? first !== undefined
      ? toId(first)
      : cursor.kind === "before"
        ? toId(cursor.id) - 1
        : null
    : null;
  const rows =
    pageIds.length === 0 ? [] : (await db.query<RunDbRow>(RUNS_BY_ID_SQL, [pageIds])).rows.map(toListed);
  return { runs: rows, older, newer };
}

function toListed(r: RunDbRow): ListedRun {
  return {
    id: toId(r.id),
    state: r.state,
    trigger: r.trigger,
    errorCode: r.error_code,
    errorMessage: r.error_message,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    counts: toRunCounts(r),
  };
}

/** Everything the supplier page shows, in one read-only snapshot: at most nine statements. */
export async function readSupplierDetail(
  db: Queryable,
  supplier: string,
  filter: RunListFilter,
  cursor: RunCursor,
): Promise<SupplierDetail> {
  return inTransaction(db, async (client) => {
    await client.query("set transaction isolation level repeatable read, read only");
    await client.query("set local jit = off");
    const page = await readRunPage(client, supplier, filter, cursor);
    const chartRows = await client.query<{
      id: string;
      state: RunStateName;
      started_at: Date;
      finished_at: Date | null;
      changed: number;
    }>(CHART_SQL, [supplier, CHART_RUNS]);
    const chart = chartRows.rows.map((r) => ({
      id: toId(r.id),
      state: r.state,
      startedAt: r.started_at,
      finishedAt: r.finished_at,
      changed: r.changed,
    }));
    const oldest = chart.at(-1);
    let successBeforeChart: Date | null = null;
    if (oldest) {
      const before = await client.query<{ finished_at: Date }>(SUCCESS_BEFORE_SQL, [
        supplier,
        oldest.startedAt,
      ]);
      successBeforeChart = before.rows[0]?.finished_at ?? null;
    }
    const heldRows = await client.query<{
      id: string;
      run_id: string;
      sku: string | null;
      kind: string;
      field: string | null;
      reason: string;
      stored: unknown;
      proposed: unknown;
      created_at: Date;
    }>(HELD_SQL, [supplier, MAX_HELD_SHOWN + 1]);
    let heldTotal = heldRows.rows.length;
    if (heldTotal > MAX_HELD_SHOWN) {
      const c = await client.query<{ n: number }>(HELD_COUNT_SQL, [supplier, HELD_COUNT_CAP]);
      heldTotal = c.rows[0]?.n ?? heldTotal;
    }
    const control = await client.query<{
      paused_at: Date | null;
      paused_by: string | null;
      pause_reason: string | null;
    }>(CONTROL_SQL, [supplier]);
    const triggers = await client.query<{ requested_at: Date; requested_by: string }>(TRIGGERS_SQL, [
      supplier,
      MAX_TRIGGERS_SHOWN,
    ]);
    const c = control.rows[0];
    return {
      page,
      chart,
      successBeforeChart,
      held: heldRows.rows.slice(0, MAX_HELD_SHOWN).map((h) => ({
        id: toId(h.id),
        runId: toId(h.run_id),
        sku: h.sku,
        kind: h.kind,
        field: h.field,
        reason: h.reason,
        stored: h.stored,
        proposed: h.proposed,
        createdAt: h.created_at,
      })),
      heldTotal,
      control: c ? { pausedAt: c.paused_at, pausedBy: c.paused_by, pauseReason: c.pause_reason } : null,
      pendingTriggers: triggers.rows.map((r) => ({
        requestedAt: r.requested_at,
        requestedBy: r.requested_by,
      })),
    };
  });
}

/** The ids of the run just before and just after run `id` of `supplier`: two probes each bounded by 20. */
export async function readNeighbours(
  db: Queryable,
  supplier: string,
  id: string,
): Promise<{ previous: number | null; next: number | null }> {
  const params = (from: string) => [supplier, [...RUN_STATES], [...RUN_TRIGGERS], from, 1];
  const prev = await db.query<{ id: string }>(OLDER_IDS_SQL, params(id));
  const next = await db.query<{ id: string }>(NEWER_IDS_SQL, params(id));
  return {
    previous: prev.rows[0] ? toId(prev.rows[0].id) : null,
    next: next.rows[0] ? toId(next.rows[0].id) : null,
  };
}
