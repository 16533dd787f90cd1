/**
 * Run events (docs/changes.md, Run events): an outbox, `ingestion_events`, written in
 * the very transaction that changes what the event reports (a run's close, a guard's
 * hold, a decision), so an event exists exactly when its change committed. Each insert
 * is announced with `NOTIFY supplier_sync_events, '<event id>'`, which PostgreSQL
 * delivers at commit (and never for a rolled-back one). Delivery to a webhook reads the
 * table (webhooks/), so a missed notification delays an event, never loses it.
 */
import type { Queryable } from "../store/queryable.js";

/** The channel of `LISTEN supplier_sync_events`; the payload is the event's id. */
export const EVENTS_CHANNEL = "supplier_sync_events";

/** The event types of docs/changes.md. */
export type EventType =
  | "run.closed"
  | "guard.held"
  | "held.approved"
  | "held.dismissed"
  | "supplier.paused"
  | "supplier.resumed";

/**
 * Writes one event in the caller's transaction and announces it. The payload is stored
 * as given with `type` and `supplier` added; returns the event's id.
 */
export async function recordEvent(
  tx: Queryable,
  event: { type: EventType; supplier: string; payload: Record<string, unknown> },
): Promise<number> {
  const { rows } = await tx.query<{ id: string }>(
    `with e as (
       insert into ingestion_events (supplier, type, payload)
       values ($1, $2, jsonb_build_object('type', $2::text, 'supplier', $1::text) || $3::jsonb)
       returning id
     )
     select e.id, pg_notify('${EVENTS_CHANNEL}', e.id::text) from e`,
    [event.supplier, event.type, JSON.stringify(event.payload)],
  );
  return Number(rows[0]?.id);
}

/**
 * One `run.closed` event per closed run of `runIds` (the closing transaction's), built
 * from the run row as that transaction left it:
 * `{type, supplier, run_id, state, error_code, counts, held, finished_at}`.
 */
export async function recordRunsClosed(tx: Queryable, runIds: readonly number[]): Promise<void> {
  if (runIds.length === 0) return;
  await tx.query(
    `with e as (
       insert into ingestion_events (supplier, type, payload)
       select r.supplier, 'run.closed',
              jsonb_build_object('type', 'run.closed', 'supplier', r.supplier, 'run_id', r.id, 'state', r.state,
                'error_code', r.error_code,
                'counts', jsonb_build_object('pages', r.pages, 'seen', r.records_seen, 'inserted', r.records_inserted,
                  'updated', r.records_updated, 'unchanged', r.records_unchanged, 'rejected', r.records_rejected,
                  'delisted', r.records_delisted),
                'held', r.records_held, 'finished_at', r.finished_at)
         from ingestion_runs r
        where r.id = any ($1::bigint[]) and r.state <> 'running'
        order by r.id
       returning id
     )
     select pg_notify('${EVENTS_CHANNEL}', e.id::text) from e`,
    [runIds],
  );
}
