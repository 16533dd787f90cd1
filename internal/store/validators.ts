/**
 * Conditional requests in the run table (docs/conditional-requests.md): the validators a run's one
 * response carried (`ingestion_runs.etag`, `last_modified`) and the close of a run the
 * supplier answered `304 Not Modified`.
 *
 * Invariants:
 * - Only a `succeeded` run's validators are ever read back: a failed, partial or
 *   interrupted run may have stopped half-way through the response they describe.
 * - A 304 run is closed `succeeded` with no step, no offer or observation written and
 *   nothing delisted; `records_unchanged` is the supplier's listed offers (the catalog
 *   the supplier says is still current).
 */

import { recordRunsClosed } from "../events/outbox.js";
import type { ResponseValidators, RunState } from "../ingestion/ports.js";
import { inTransaction, type Queryable } from "./queryable.js";
import { RUN_COUNT_COLUMNS, type RunCountRow, type RunCounts, toRunCounts } from "./runs.js";
import { discardSeenSet } from "./seen-set.js";

/** The validators of the supplier's last `succeeded` run, or null when it has none (or no such run). */
export async function lastRunValidators(db: Queryable, supplier: string): Promise<ResponseValidators | null> {
  const { rows } = await db.query<{ etag: string | null; last_modified: string | null }>(
    `select etag, last_modified from ingestion_runs
      where supplier = $1 and state = 'succeeded'
      order by finished_at desc, id desc
      limit 1`,
    [supplier],
  );
  const row = rows[0];
  if (!row || (row.etag === null && row.last_modified === null)) return null;
  return { etag: row.etag, lastModified: row.last_modified };
}

/** Records the date a running run's dated file was read for (docs/feeds.md, Dated files). */
export async function saveRunSourceDate(db: Queryable, runId: number, sourceDate: string): Promise<void> {
  await inTransaction(db, (tx) =>
    tx.query("update ingestion_runs set source_date = $2 where id = $1 and state = 'running'", [
      runId,
      sourceDate,
    ]),
  );
}

/**
 * Records the validators of a running run's response. Written before the run is
 * closed; the close decides whether they are ever reused (only if it succeeds).
 */
export async function saveRunValidators(
  db: Queryable,
  runId: number,
  validators: ResponseValidators,
): Promise<void> {
  await inTransaction(db, (tx) =>
    tx.query(
      `update ingestion_runs set etag = $2, last_modified = $3
        where id = $1 and state = 'running'`,
      [runId, validators.etag, validators.lastModified],
    ),
  );
}

/**
 * Closes a run the supplier answered 304 with one compare-and-set
 * `WHERE state = 'running'`: `succeeded`, `pages = 0`, `records_unchanged` = the
 * supplier's listed offers (`delisted_at is null`). The validators kept are the 304's,
 * each falling back to the previous run's when the 304 omits it, so the next run can
 * ask again. Call under the lease, only for a walk that committed no step.
 *
 * Returns null when the CAS matched nothing (the run was already closed by recovery).
 */
export async function closeRunNotModified(
  db: Queryable,
  input: { runId: number; validators: ResponseValidators },
): Promise<{ state: RunState; counts: RunCounts } | null> {
  return inTransaction(db, async (client) => {
    const { rows } = await client.query<RunCountRow & { state: RunState }>(
      `update ingestion_runs r
          set state = 'succeeded',
              error_code = null,
              error_message = null,
              finished_at = now(),
              heartbeat_at = now(),
              pages = 0,
              records_seen = 0,
              records_unchanged = (
                select count(*)::int from supplier_offers o
                 where o.supplier = r.supplier and o.delisted_at is null
              ),
              etag = $2,
              last_modified = $3
        where r.id = $1 and r.state = 'running'
       returning r.state, ${RUN_COUNT_COLUMNS}`,
      [input.runId, input.validators.etag, input.validators.lastModified],
    );
    const closed = rows[0];
    if (!closed) return null;
    await recordRunsClosed(client, [input.runId]);
    // Nothing was staged (no step committed); discarded anyway so no run leaves one behind.
    await discardSeenSet(client, input.runId);
    return { state: closed.state, counts: toRunCounts(closed) };
  });
}
