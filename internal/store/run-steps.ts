/**
 * The steps of listed runs, for `supplier-sync runs --json`: each step's start (its first
 * request), its end (its commit, or its failure recorded) and the time between.
 */
import { classified } from "./database-error.js";
import type { Queryable } from "./queryable.js";

export interface RunStepRow {
  seq: number;
  state: string;
  startedAt: Date;
  finishedAt: Date | null;
  /** `finishedAt - startedAt`; null while the step runs. */
  durationMs: number | null;
  records: number;
  httpAttempts: number;
  errorCode: string | null;
}

/**
 * The steps of these runs by run id, in order. One index range scan of
 * `ingestion_run_steps` (primary key `(run_id, seq)`) per run; `runIds` are the runs a
 * `runs` listing printed (its `--limit`), so the query stays bounded.
 */
export async function listRunSteps(db: Queryable, runIds: number[]): Promise<Map<number, RunStepRow[]>> {
  const byRun = new Map<number, RunStepRow[]>(runIds.map((id) => [id, []]));
  if (runIds.length === 0) return byRun;
  const { rows } = await classified(() =>
    db.query<{
      run_id: string;
      seq: number;
      state: string;
      started_at: Date;
      finished_at: Date | null;
      records: number;
      http_attempts: number;
      error_code: string | null;
    }>(
      `select run_id, seq, state, started_at, finished_at, records, http_attempts, error_code
         from ingestion_run_steps
        where run_id = any($1::bigint[])
        order by run_id, seq`,
      [runIds],
    ),
  );
  for (const r of rows) {
    byRun.get(Number(r.run_id))?.push({
      seq: r.seq,
      state: r.state,
      startedAt: r.started_at,
      finishedAt: r.finished_at,
      durationMs:
        r.finished_at === null ? null : Math.max(0, r.finished_at.getTime() - r.started_at.getTime()),
      records: r.records,
      httpAttempts: r.http_attempts,
      errorCode: r.error_code,
    });
  }
  return byRun;
}
