/**
 * Read-only queries of the operator console (docs/operations.md, Operator console: `GET /`, `GET /runs/<id>`).
 *
 * Invariant: each page costs a fixed number of statements, and each statement is
 * bounded by the page, never by the history. The overview is two statements whose
 * per-supplier lookups are backward scans of `ingestion_runs_supplier_started`
 * (newest runs) and `ingestion_runs_supplier_success` (last success), each stopped
 * by a `limit`; a run page reads its row by primary key and at most
 * {@link MAX_STEPS_SHOWN} steps and {@link MAX_REJECTS_SHOWN} rejects through
 * `ingestion_run_steps_run_seq` and `ingestion_rejects_run`, counting the rest only
 * when there is a rest. `bench/console.ts` and `console-queries.pg.test.ts` hold
 * the plans to that.
 *
 * The `order by … desc nulls last` clauses are not decoration: the indexes are
 * `DESC NULLS LAST`, and a plain `desc` (nulls first) does not match them, so the
 * planner would read a supplier's whole history and sort it instead of stopping
 * after `limit` entries. Runs that start in the same microsecond have no defined
 * order between them (ordering by id too would defeat the index the same way).
 */
import type { RunOwner, RunState, RunTrigger } from "../ingestion/ports.js";
import { type HeldItem, listHeld } from "./held.js";
import { inTransaction, type Queryable, toId } from "./queryable.js";
import { RUN_COUNT_COLUMNS, type RunCountRow, type RunCounts, toRunCounts } from "./runs.js";

/** Runs drawn in each supplier's strip on the overview. */
export const STRIP_RUNS = 30;
/** Steps listed on a run page; the count of the rest is shown. */
export const MAX_STEPS_SHOWN = 1_000;
/** Rejects listed on a run page; the count of the rest is shown. */
export const MAX_REJECTS_SHOWN = 100;
/** Held items listed on a run's page (docs/operations.md, Held data); the rest are counted. */
export const MAX_HELD_SHOWN = 100;
/** A reject's pretty-printed payload is cut at this many UTF-8 bytes (10 KB). */
export const REJECT_RAW_MAX_BYTES = 10 * 1024;

/** One run of a supplier's strip, newest first. */
export interface RunMark {
  id: number;
  state: RunState;
  trigger: RunTrigger;
  errorCode: string | null;
  startedAt: Date;
  finishedAt: Date | null;
}

/** The last run of a supplier with what the overview row shows. */
export interface LastRun extends RunMark {
  errorMessage: string | null;
  counts: RunCounts;
}

/** What the overview row of a supplier shows, but its strip. */
export interface SupplierLatest {
  supplier: string;
  /** `finished_at` of the newest succeeded run, null if none. */
  lastSuccess: Date | null;
  lastRun: LastRun | null;
}

interface LatestDbRow extends Partial<RunCountRow> {
  supplier: string;
  last_success: Date | null;
  id: string | null;
  state: RunState | null;
  trigger: RunTrigger | null;
  error_code: string | null;
  error_message: string | null;
  started_at: Date | null;
  finished_at: Date | null;
}

/**
 * Per supplier (`$1`, text[]): the last success and the last run, two index probes
 * each (`ingestion_runs_supplier_success`, `ingestion_runs_supplier_started`).
 */
export const LATEST_SQL = `select s.supplier, ok.finished_at as last_success, l.*
  from unnest($1::text[]) with ordinality as s(supplier, ord)
  left join lateral (
    select r.finished_at from ingestion_runs r
     where r.supplier = s.supplier and r.state = 'succeeded'
     order by r.finished_at desc nulls last limit 1
  ) ok on true
  left join lateral (
    select r.id, r.state, r.trigger, r.error_code, left(r.error_message, 500) as error_message,
           r.started_at, r.finished_at, ${RUN_COUNT_COLUMNS}
      from ingestion_runs r
     where r.supplier = s.supplier
     order by r.started_at desc nulls last limit 1
  ) l on true
 order by s.ord`;

/**
 * Per supplier (\`$1\`, text[]): its newest \`$2\` ({@link STRIP_RUNS}) runs as one text,
 * fields split by spaces and runs by chr(30), newest first: half the cost of
 * json_agg of timestamps, in PostgreSQL and in the driver. One backward scan of
 * \`ingestion_runs_supplier_started\` per supplier, stopped by the limit.
 */
export const STRIPS_SQL = `select s.supplier, w.recent
  from unnest($1::text[]) as s(supplier)
  cross join lateral (
    select string_agg(x.id || ' ' || x.state || ' ' || x.trigger || ' '
                      || (date_part('epoch', x.started_at) * 1000)::bigint || ' '
                      || coalesce((date_part('epoch', x.finished_at - x.started_at) * 1000)::bigint, -1)
                      || coalesce(' ' || x.error_code, ''),
                      chr(30) order by x.started_at desc) as recent
      from (select r.id, r.state, r.trigger, r.error_code, r.started_at, r.finished_at
              from ingestion_runs r
             where r.supplier = s.supplier
             order by r.started_at desc nulls last limit $2) x
  ) w`;

export interface Overview {
  /** One per supplier asked, in that order. */
  latest: SupplierLatest[];
  /** Newest first, for the suppliers `needStrip` asked for (and that have runs). */
  strips: Map<string, RunMark[]>;
}

/**
 * The overview of each supplier named, in the order given: last success and last
 * run, and the strip of recent runs of those for which `needStrip` says so (the
 * console keeps strips whose newest run has not changed). Two statements in one
 * read-only snapshot, whatever the history's size.
 */
export async function readOverview(
  db: Queryable,
  suppliers: string[],
  needStrip: (latest: SupplierLatest) => boolean = () => true,
): Promise<Overview> {
  if (suppliers.length === 0) return { latest: [], strips: new Map() };
  return inTransaction(db, async (client) => {
    await client.query("set transaction isolation level repeatable read, read only");
    // With 1,000 suppliers the estimated cost passes jit_above_cost, and compiling the
    // statement (30+ ms) costs more than running it: JIT is for long analytic queries.
    await client.query("set local jit = off");
    const { rows } = await client.query<LatestDbRow>(LATEST_SQL, [suppliers]);
    const latest = rows.map(toLatest);
    const wanted = latest.filter((l) => l.lastRun !== null && needStrip(l)).map((l) => l.supplier);
    const strips = new Map<string, RunMark[]>();
    if (wanted.length > 0) {
      const found = await client.query<{ supplier: string; recent: string | null }>(STRIPS_SQL, [
        wanted,
        STRIP_RUNS,
      ]);
      for (const r of found.rows) strips.set(r.supplier, parseMarks(r.recent));
    }
    return { latest, strips };
  });
}

function toLatest(r: LatestDbRow): SupplierLatest {
  return {
    supplier: r.supplier,
    lastSuccess: r.last_success,
    lastRun:
      r.id === null || r.state === null || r.trigger === null || r.started_at === null
        ? null
        : {
            id: toId(r.id),
            state: r.state,
            trigger: r.trigger,
            errorCode: r.error_code,
            errorMessage: r.error_message,
            startedAt: r.started_at,
            finishedAt: r.finished_at,
            counts: toRunCounts(r as RunCountRow),
          },
  };
}

/** The strip's runs from a `recent` text of {@link STRIPS_SQL}, newest first. */
function parseMarks(text: string | null): RunMark[] {
  if (text === null || text === "") return [];
  return text.split("\x1e").map((run) => {
    const [id, state, trigger, startedMs, durationMs, ...code] = run.split(" ");
    const startedAt = new Date(Number(startedMs));
    const duration = Number(durationMs);
    return {
      id: Number(id),
      state: state as RunState,
      trigger: trigger as RunTrigger,
      errorCode: code.length > 0 ? code.join(" ") : null,
      startedAt,
      finishedAt: duration < 0 ? null : new Date(startedAt.getTime() + duration),
    };
  });
}

/** One `ingestion_run_steps` row. */
export interface StepRow {
  seq: number;
  state: "running" | "succeeded" | "failed";
  startedAt: Date;
  finishedAt: Date | null;
  records: number;
  httpAttempts: number;
  errorCode: string | null;
}

/** One `ingestion_rejects` row, its payload pretty-printed and cut. */
export interface RejectRow {
  id: number;
  seq: number;
  reason: string;
  createdAt: Date;
  /** The payload pretty-printed, at most {@link REJECT_RAW_MAX_BYTES}; null when none was kept. */
  raw: string | null;
  /** Bytes of the whole pretty-printed payload, to tell whether it was cut. */
  rawBytes: number;
}

export interface RunDetail {
  /** Every column of the run row, in table order (columns added later show too). */
  columns: { name: string; value: unknown }[];
  supplier: string;
  state: RunState;
  errorCode: string | null;
  owner: RunOwner;
  steps: StepRow[];
  /** All steps of the run (more than `steps.length` when the list was cut). */
  stepsTotal: number;
  rejects: RejectRow[];
  /** All rejects of the run. */
  rejectsTotal: number;
  /** What the run's guards held, decided or not (first `MAX_HELD_SHOWN`). */
  held: HeldItem[];
  /** All held items of the run. */
  heldTotal: number;
}

/** Run ids are `bigserial`: a positive int8. */
const RUN_ID = /^[1-9][0-9]{0,18}$/;
const INT8_MAX = 9_223_372_036_854_775_807n;

/** The id of a `/runs/<id>` path segment, or undefined when it cannot be a run id. */
export function parseRunId(text: string): string | undefined {
  return RUN_ID.test(text) && BigInt(text) <= INT8_MAX ? text : undefined;
}

/** A run page's statements; `$1` is the run id. */
export const RUN_SQL = "select * from ingestion_runs where id = $1";
const HELD_COUNT_SQL = "select count(*)::int as n from ingestion_held where run_id = $1";
/** `$2`: {@link MAX_STEPS_SHOWN} + 1, to know whether there are more. */
export const STEPS_SQL = `select seq, state, started_at, finished_at, records, http_attempts, error_code
  from ingestion_run_steps where run_id = $1 order by seq limit $2`;
export const STEPS_COUNT_SQL = "select count(*)::int as n from ingestion_run_steps where run_id = $1";
/**
 * `$2`: {@link MAX_REJECTS_SHOWN} + 1; `$3`: characters kept of each pretty-printed
 * payload (at least as many as the bytes shown). jsonb_pretty runs on those rows only,
 * and only the head of each payload crosses the wire.
 */
export const REJECTS_SQL = `select id, seq, reason, created_at,
       left(jsonb_pretty(raw), $3) as raw, octet_length(jsonb_pretty(raw)) as raw_bytes
  from ingestion_rejects where run_id = $1 order by seq, id limit $2`;
export const REJECTS_COUNT_SQL = "select count(*)::int as n from ingestion_rejects where run_id = $1";

/**
 * One run with its steps and rejects, or undefined when no run has that id. At most
 * five statements, each bounded by the limits above.
 */
export async function readRunDetail(db: Queryable, id: string): Promise<RunDetail | undefined> {
  const run = await db.query(RUN_SQL, [id]);
  const row = run.rows[0] as Record<string, unknown> | undefined;
  if (!row) return undefined;
  const columns = run.fields.map((f) => ({ name: f.name, value: row[f.name] }));

  const steps = await db.query<{
    seq: number;
    state: StepRow["state"];
    started_at: Date;
    finished_at: Date | null;
    records: number;
    http_attempts: number;
    error_code: string | null;
  }>(STEPS_SQL, [id, MAX_STEPS_SHOWN + 1]);
  let stepsTotal = steps.rows.length;
  if (stepsTotal > MAX_STEPS_SHOWN) {
    const c = await db.query<{ n: number }>(STEPS_COUNT_SQL, [id]);
    stepsTotal = c.rows[0]?.n ?? stepsTotal;
  }

  const rejects = await db.query<{
    id: string;
    seq: number;
    reason: string;
    created_at: Date;
    raw: string | null;
    raw_bytes: number | null;
  }>(REJECTS_SQL, [id, MAX_REJECTS_SHOWN + 1, REJECT_RAW_MAX_BYTES + 1]);
  let rejectsTotal = rejects.rows.length;
  if (rejectsTotal > MAX_REJECTS_SHOWN) {
    const c = await db.query<{ n: number }>(REJECTS_COUNT_SQL, [id]);
    rejectsTotal = c.rows[0]?.n ?? rejectsTotal;
  }

  const held = await listHeld(db, { runId: Number(id), all: true, limit: MAX_HELD_SHOWN + 1 });
  let heldTotal = held.length;
  if (heldTotal > MAX_HELD_SHOWN) {
    const c = await db.query<{ n: number }>(HELD_COUNT_SQL, [id]);
    heldTotal = c.rows[0]?.n ?? heldTotal;
  }

  return {
    columns,
    supplier: String(row["supplier"]),
    state: row["state"] as RunState,
    errorCode: (row["error_code"] as string | null) ?? null,
    owner: row["owner"] as RunOwner,
    steps: steps.rows.slice(0, MAX_STEPS_SHOWN).map((s) => ({
      seq: s.seq,
      state: s.state,
      startedAt: s.started_at,
      finishedAt: s.finished_at,
      records: s.records,
      httpAttempts: s.http_attempts,
      errorCode: s.error_code,
    })),
    stepsTotal,
    rejects: rejects.rows.slice(0, MAX_REJECTS_SHOWN).map((r) => ({
      id: toId(r.id),
      seq: r.seq,
      reason: r.reason,
      createdAt: r.created_at,
      raw: r.raw === null ? null : cutUtf8(r.raw, REJECT_RAW_MAX_BYTES),
      rawBytes: r.raw_bytes ?? 0,
    })),
    rejectsTotal,
    held: held.slice(0, MAX_HELD_SHOWN),
    heldTotal,
  };
}

/** The longest prefix of `text` that fits in `maxBytes` of UTF-8, never splitting a character. */
export function cutUtf8(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text, "utf8") <= maxBytes) return text;
  let bytes = 0;
  let end = 0;
  for (const ch of text) {
    const size = Buffer.byteLength(ch, "utf8");
    if (bytes + size > maxBytes) break;
    bytes += size;
    end += ch.length;
  }
  return text.slice(0, end);
}
