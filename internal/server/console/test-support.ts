/**
 * Helpers of the console's tests: runs, steps and rejects written straight into a
 * real database, and one scene with a supplier of each readiness status.
 */
import type pg from "pg";
import type { SupplierConfig } from "../../config/types.js";
import type { RunState, RunTrigger } from "../../ingestion/ports.js";

const HOUR = 3_600_000;

export interface RunInput {
  supplier: string;
  state: RunState;
  trigger?: RunTrigger;
  startedAt: Date;
  /** Defaults to `startedAt`. */
  slotStart?: Date;
  /** Null for a running run. */
  durationMs: number | null;
  errorCode?: string | null;
  errorMessage?: string | null;
  pages?: number;
  seen?: number;
  inserted?: number;
  updated?: number;
  unchanged?: number;
  rejected?: number;
  delisted?: number;
}

/** Writes one run row and returns its id. */
export async function insertRun(db: pg.Pool, run: RunInput): Promise<number> {
  const finishedAt = run.durationMs === null ? null : new Date(run.startedAt.getTime() + run.durationMs);
  const { rows } = await db.query<{ id: string }>(
    `insert into ingestion_runs (supplier, slot_start, trigger, state, error_code, error_message, owner,
                                 started_at, heartbeat_at, finished_at, pages, records_seen, records_inserted,
                                 records_updated, records_unchanged, records_rejected, records_delisted)
     values ($1, coalesce($15::timestamptz, $2::timestamptz), $3, $4, $5, $6, '{"hostname":"worker-a","pid":4242,"bootId":"b00t"}'::jsonb,
             $2::timestamptz, coalesce($7::timestamptz, $2::timestamptz), $7::timestamptz, $8, $9, $10, $11, $12, $13, $14)
     returning id`,
    [
      run.supplier,
      run.startedAt,
      run.trigger ?? "schedule",
      run.state,
      run.errorCode ?? null,
      run.errorMessage ?? null,
      finishedAt,
      run.pages ?? 0,
      run.seen ?? 0,
      run.inserted ?? 0,
      run.updated ?? 0,
      run.unchanged ?? 0,
      run.rejected ?? 0,
      run.delisted ?? 0,
      run.slotStart ?? null,
    ],
  );
  return Number(rows[0]?.id);
}

export async function insertStep(
  db: pg.Pool,
  runId: number,
  step: {
    seq: number;
    state: "running" | "succeeded" | "failed";
    startedAt: Date;
    durationMs: number;
    records: number;
    httpAttempts: number;
    errorCode?: string | null;
  },
): Promise<void> {
  await db.query(
    `insert into ingestion_run_steps (run_id, seq, state, started_at, finished_at, records, http_attempts, error_code)
     values ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      runId,
      step.seq,
      step.state,
      step.startedAt,
      new Date(step.startedAt.getTime() + step.durationMs),
      step.records,
      step.httpAttempts,
      step.errorCode ?? null,
    ],
  );
}

export async function insertReject(
  db: pg.Pool,
  runId: number,
  supplier: string,
  seq: number,
  reason: string,
  raw: unknown,
): Promise<void> {
  await db.query(
    "insert into ingestion_rejects (run_id, supplier, seq, reason, raw) values ($1, $2, $3, $4, $5::jsonb)",
    [runId, supplier, seq, reason, raw === null ? null : JSON.stringify(raw)],
  );
}

/**
 * Markup a hostile supplier could send inside a record. No double quote in it, so it
 * stays runnable after JSON encoding: were it ever emitted unescaped, it would run.
 */
export const HOSTILE_NAME =
  "<script>window.__pwned='script'</script><img src=x onerror=window.__pwned='img'>";

export interface Scene {
  suppliers: SupplierConfig[];
  /** etm's last run: succeeded, with steps and rejects (one hostile). */
  etmLastRun: number;
  /** iek's last run: failed HTTP_503. */
  iekFailedRun: number;
  /** How many runs etm has in all (more than the strip shows). */
  etmRuns: number;
}

/**
 * `etm` ok (succeeded an hour before `now`, 40 runs, the last with steps and
 * rejects), `iek` stale (last success 30 h ago, last run failed `HTTP_503`),
 * `systeme` none (never ran), `yml` disabled (never shown).
 */
export async function seedScene(db: pg.Pool, nowMs: number): Promise<Scene> {
  const suppliers: SupplierConfig[] = [
    { name: "etm", intervalMs: 6 * HOUR, enabled: true },
    { name: "iek", intervalMs: 12 * HOUR, enabled: true },
    { name: "systeme", intervalMs: 6 * HOUR, enabled: true },
    { name: "yml", intervalMs: 6 * HOUR, enabled: false },
  ];
  const etmRuns = 40;
  let etmLastRun = 0;
  for (let i = etmRuns - 1; i >= 0; i--) {
    const startedAt = new Date(nowMs - HOUR - i * 6 * HOUR);
    const state: RunState = i % 7 === 3 ? "failed" : i % 11 === 5 ? "partial" : "succeeded";
    etmLastRun = await insertRun(db, {
      supplier: "etm",
      state,
      trigger: state === "succeeded" ? "schedule" : "retry",
      startedAt,
      durationMs: 420,
      errorCode: state === "succeeded" ? null : "NETWORK",
      errorMessage: state === "succeeded" ? null : "socket hang up",
      pages: 3,
      seen: 250,
      inserted: i === etmRuns - 1 ? 250 : 2,
      updated: 5,
      unchanged: 241,
      rejected: 2,
      delisted: 0,
    });
  }
  const started = new Date(nowMs - HOUR);
  for (let seq = 1; seq <= 3; seq++) {
    await insertStep(db, etmLastRun, {
      seq,
      state: "succeeded",
      startedAt: new Date(started.getTime() + (seq - 1) * 140),
      durationMs: 130,
      records: seq === 3 ? 50 : 100,
      httpAttempts: seq === 2 ? 2 : 1,
    });
  }
  await insertReject(db, etmLastRun, "etm", 2, "price: not a number", {
    article: "A-1",
    title: HOSTILE_NAME,
    price: { value: "12,5O", currency: "RUB" },
  });
  await insertReject(db, etmLastRun, "etm", 3, "sku: missing", { title: "no sku here", stock: { total: 3 } });

  const iekOld = new Date(nowMs - 30 * HOUR);
  await insertRun(db, {
    supplier: "iek",
    state: "succeeded",
    startedAt: iekOld,
    durationMs: 65_000,
    pages: 12,
    seen: 1200,
    inserted: 1200,
  });
  const iekFailedRun = await insertRun(db, {
    supplier: "iek",
    state: "failed",
    trigger: "retry",
    startedAt: new Date(nowMs - 2 * HOUR),
    durationMs: 1_800,
    errorCode: "HTTP_503",
    errorMessage: "GET /api/v1/groups answered 503 after 5 attempts",
  });
  await insertStep(db, iekFailedRun, {
    seq: 1,
    state: "failed",
    startedAt: new Date(nowMs - 2 * HOUR),
    durationMs: 1_700,
    records: 0,
    httpAttempts: 5,
    errorCode: "HTTP_503",
  });
  // A disabled supplier's runs stay in the history but not on the overview.
  await insertRun(db, { supplier: "yml", state: "succeeded", startedAt: iekOld, durationMs: 1000 });
  return { suppliers, etmLastRun, iekFailedRun, etmRuns };
}
