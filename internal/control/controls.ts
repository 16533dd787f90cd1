/**
 * Operator controls (docs/operations.md, Pausing and triggering): pause, resume and
 * run-now requests, kept in `ingestion_controls` and `ingestion_triggers` so they are
 * durable and every replica sees them.
 *
 * Invariants:
 * - A supplier is paused while its `ingestion_controls.paused_at` is set. Pausing twice
 *   keeps the first `paused_at` (and updates who and why); resuming clears it.
 * - A trigger request is served exactly once: it is claimed under the supplier's lease
 *   by the run that serves it (`taken_at`, `run_id` set in one statement, the row
 *   locked with `FOR UPDATE SKIP LOCKED`). A replica that dies between starting that
 *   run and claiming leaves the request pending: it is served again (at least once
 *   across a crash, exactly once otherwise).
 * - A request for a paused supplier stays pending until `resume`.
 */
import { recordEvent } from "../events/outbox.js";
import { inTransaction, type Queryable } from "../store/queryable.js";

/** A supplier's pause, as `runs`, `/readyz` and the console show it. */
export interface PauseState {
  pausedAt: Date;
  pausedBy: string;
  reason: string | null;
}

/** What the control watcher reads on each poll. */
export interface ControlSnapshot {
  paused: Map<string, PauseState>;
  /** Suppliers with pending trigger requests, and how many. */
  pendingTriggers: Map<string, number>;
}

/** Marks `supplier` paused. Returns the pause as stored and whether it was already paused. */
export async function pauseSupplier(
  db: Queryable,
  input: { supplier: string; by: string; reason?: string | null },
): Promise<PauseState & { already: boolean }> {
  return inTransaction(db, async (tx) => {
    const { rows } = await tx.query<{
      paused_at: Date;
      paused_by: string;
      pause_reason: string | null;
      already: boolean;
    }>(
      `with before as (select paused_at from ingestion_controls where supplier = $1)
     insert into ingestion_controls as c (supplier, paused_at, paused_by, pause_reason)
     values ($1, now(), $2, $3)
     on conflict (supplier) do update
        set paused_at = coalesce(c.paused_at, now()), paused_by = $2, pause_reason = $3
     returning c.paused_at, c.paused_by, c.pause_reason,
               coalesce((select paused_at is not null from before), false) as already`,
      [input.supplier, input.by, input.reason ?? null],
    );
    const row = rows[0];
    if (!row) throw new Error(`pausing ${input.supplier} returned no row`);
    // A `supplier.paused` event (docs/changes.md) in the same transaction, for a new pause only.
    if (!row.already) {
      await recordEvent(tx, {
        type: "supplier.paused",
        supplier: input.supplier,
        payload: { paused_at: row.paused_at.toISOString(), by: row.paused_by, reason: row.pause_reason },
      });
    }
    return {
      pausedAt: row.paused_at,
      pausedBy: row.paused_by,
      reason: row.pause_reason,
      already: row.already,
    };
  });
}

/** Clears `supplier`'s pause. Returns the pause it ended, or null when it was not paused. */
export async function resumeSupplier(db: Queryable, supplier: string): Promise<PauseState | null> {
  return inTransaction(db, async (tx) => {
    const { rows } = await tx.query<{ paused_at: Date; paused_by: string; pause_reason: string | null }>(
      `update ingestion_controls c set paused_at = null
       from (select supplier, paused_at, paused_by, pause_reason from ingestion_controls
              where supplier = $1 and paused_at is not null for update) old
      where c.supplier = old.supplier
      returning old.paused_at, old.paused_by, old.pause_reason`,
      [supplier],
    );
    const row = rows[0];
    if (!row) return null;
    // A `supplier.resumed` event (docs/changes.md) in the same transaction.
    await recordEvent(tx, {
      type: "supplier.resumed",
      supplier,
      payload: { paused_at: row.paused_at.toISOString(), by: row.paused_by ?? "" },
    });
    return { pausedAt: row.paused_at, pausedBy: row.paused_by ?? "", reason: row.pause_reason };
  });
}

/** Whether `supplier` is paused now (read under its lease by every tick). */
export async function isPaused(db: Queryable, supplier: string): Promise<boolean> {
  const { rows } = await db.query<{ paused: boolean }>(
    "select exists (select 1 from ingestion_controls where supplier = $1 and paused_at is not null) as paused",
    [supplier],
  );
  return rows[0]?.paused === true;
}

/** Records a request for one forced walk of `supplier` now. */
export async function requestTrigger(
  db: Queryable,
  input: { supplier: string; by: string },
): Promise<{ id: number; requestedAt: Date }> {
  const { rows } = await db.query<{ id: string; requested_at: Date }>(
    `insert into ingestion_triggers (supplier, requested_by) values ($1, $2) returning id, requested_at`,
    [input.supplier, input.by],
  );
  const row = rows[0];
  if (!row) throw new Error(`requesting a walk of ${input.supplier} returned no row`);
  return { id: Number(row.id), requestedAt: row.requested_at };
}

/** Whether `supplier` has a pending trigger request (read under its lease). */
export async function hasPendingTrigger(db: Queryable, supplier: string): Promise<boolean> {
  const { rows } = await db.query<{ pending: boolean }>(
    "select exists (select 1 from ingestion_triggers where supplier = $1 and taken_at is null) as pending",
    [supplier],
  );
  return rows[0]?.pending === true;
}

/**
 * Claims the oldest pending request of `supplier` for the run `runId` that serves it.
 * Null when there was none (another holder of the lease served it first).
 */
export async function claimTrigger(db: Queryable, supplier: string, runId: number): Promise<number | null> {
  const { rows } = await db.query<{ id: string }>(
    `update ingestion_triggers set taken_at = now(), run_id = $2
      where id = (select id from ingestion_triggers
                   where supplier = $1 and taken_at is null
                   order by requested_at, id limit 1
                   for update skip locked)
      returning id`,
    [supplier, runId],
  );
  return rows[0] ? Number(rows[0].id) : null;
}

/** Every paused supplier and every supplier with pending triggers: one poll of the watcher. */
export async function readControls(db: Queryable): Promise<ControlSnapshot> {
  const [paused, pending] = await Promise.all([
    db.query<{ supplier: string; paused_at: Date; paused_by: string | null; pause_reason: string | null }>(
      "select supplier, paused_at, paused_by, pause_reason from ingestion_controls where paused_at is not null",
    ),
    db.query<{ supplier: string; n: number }>(
      "select supplier, count(*)::int as n from ingestion_triggers where taken_at is null group by supplier",
    ),
  ]);
  return {
    paused: new Map(
      paused.rows.map((r) => [
        r.supplier,
        { pausedAt: r.paused_at, pausedBy: r.paused_by ?? "", reason: r.pause_reason },
      ]),
    ),
    pendingTriggers: new Map(pending.rows.map((r) => [r.supplier, r.n])),
  };
}

/**
 * Whether the database knows `supplier`: it has runs, offers, a control row or a
 * trigger. The CLI needs only `DATABASE_URL`, so this is how it tells a typo from a
 * supplier (a supplier named in `SUPPLIER_SYNC_SUPPLIERS` counts too, when it is set).
 */
export async function isKnownSupplier(db: Queryable, supplier: string): Promise<boolean> {
  const { rows } = await db.query<{ known: boolean }>(
    `select exists (select 1 from ingestion_runs where supplier = $1)
         or exists (select 1 from supplier_offers where supplier = $1)
         or exists (select 1 from ingestion_controls where supplier = $1)
         or exists (select 1 from ingestion_triggers where supplier = $1) as known`,
    [supplier],
  );
  return rows[0]?.known === true;
}
