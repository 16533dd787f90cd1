/**
 * The per-run "seen set": which SKUs a run saw, kept so a succeeded run can delist
 * the offers it did not see without writing the offers it saw unchanged.
 *
 * Why session temp tables on the lease connection:
 * - An unchanged offer must cause no write to `supplier_offers` (no dead tuple, no
 *   WAL), so "seen" cannot live there, and a durable per-run table of every SKU
 *   would write (and WAL-log, and later vacuum) the whole catalog on every run.
 * - A run lives on one connection for its whole life (the lease connection: every
 *   tick write goes through it), so a `pg_temp` table on that session holds its
 *   seen SKUs at no WAL cost, and vanishes with the session when the lease dies,
 *   which is exactly when the run can no longer succeed anyway.
 * - Rows are staged in the same transaction as the step they belong to, so the set
 *   is consistent with the committed steps: a rolled-back page leaves no SKU.
 *
 * Invariant for delisting: the set is trusted only if it covers every succeeded
 * step of the run (one row per staged step). When
 * it does not (closeRun called on another connection, the session was replaced),
 * delisting is skipped: an offer missed by one run is delisted by the next
 * complete one, whereas a false delisting would be a lie about the catalog.
 *
 * One connection runs one run at a time, so rows of any other run are leftovers of
 * a run closed elsewhere; they are truncated (temp tables are never autovacuumed,
 * so DELETE would let them grow for the life of a pooled connection).
 *
 * Under the table lease the connection is "sessionless" (`isSessionless`): through a
 * transaction pooler each transaction may reach another server session, so a temp
 * table would scatter the set over sessions. There the set is the durable
 * `ingestion_run_seen` (same shape: one row of SKUs per step, in the step's
 * transaction), deleted when the run is closed or recovered. It costs WAL of about
 * the SKUs' bytes per page, the price of working through any pooler.
 */
import type pg from "pg";
import { isSessionless, type Queryable } from "./queryable.js";

/** The durable seen set of sessionless lease connections. */
export const SEEN_TABLE = "ingestion_run_seen";

// Fixed names, never built from input. Created lazily inside the caller's transaction.
const CREATE_STAGING = `create temp table if not exists supplier_sync_run_seen (
  run_id bigint not null, seq integer not null, skus text[] not null, primary key (run_id, seq))`;

/**
 * The seen set's state on one lease connection, owned by the run session that holds
 * it (run-session.ts): the run it last prepared the set for, so the later pages of a
 * run skip the two preparing statements (bench/README.md, Figures behind code choices). Forgotten when a page
 * fails: its rollback may have undone the `create temp table`. A store function
 * called without one (tests, benchmarks) prepares the set on every page.
 */
export class SeenSetPreparation {
  private preparedFor: number | undefined;

  /**
   * Makes sure the staging tables exist on this session and hold nothing from another
   * run. Call inside the page transaction, before staging; call {@link forget} if that
   * transaction does not commit.
   */
  async prepare(client: pg.ClientBase, runId: number): Promise<void> {
    if (isSessionless(client) || this.preparedFor === runId) return;
    await prepareOnSession(client, runId);
    this.preparedFor = runId;
  }

  /** After a rolled-back page: the next page prepares the set again. */
  forget(): void {
    this.preparedFor = undefined;
  }
}

async function prepareOnSession(client: pg.ClientBase, runId: number): Promise<void> {
  await client.query(CREATE_STAGING);
  const { rows } = await client.query<{ stale: boolean; mine: boolean }>(
    `select coalesce(bool_or(run_id <> $1), false) as stale, coalesce(bool_or(run_id = $1), false) as mine
       from pg_temp.supplier_sync_run_seen`,
    [runId],
  );
  const row = rows[0];
  if (!row?.stale) return;
  if (row.mine) {
    await client.query("delete from pg_temp.supplier_sync_run_seen where run_id <> $1", [runId]);
  } else {
    await client.query("truncate pg_temp.supplier_sync_run_seen");
  }
}

/** Whether this session staged every succeeded step of the run (and so may delist). */
export async function isSeenSetComplete(
  db: pg.ClientBase,
  runId: number,
  succeededSteps: number,
): Promise<boolean> {
  if (isSessionless(db)) {
    const { rows } = await db.query<{ n: number }>(
      `select count(*)::int as n from ${SEEN_TABLE} where run_id = $1`,
      [runId],
    );
    return rows[0]?.n === succeededSteps;
  }
  const exists = await db.query<{ present: boolean }>(
    "select to_regclass('pg_temp.supplier_sync_run_seen') is not null as present",
  );
  if (!exists.rows[0]?.present) return false;
  const { rows } = await db.query<{ n: number }>(
    "select count(*)::int as n from pg_temp.supplier_sync_run_seen where run_id = $1",
    [runId],
  );
  return rows[0]?.n === succeededSteps;
}

/**
 * Drops the run's staged rows: its durable rows wherever it ran (a run closed from a
 * fresh connection after losing its lease leaves them too), and this session's.
 */
export async function discardSeenSet(db: pg.ClientBase, runId: number): Promise<void> {
  await db.query(`delete from ${SEEN_TABLE} where run_id = $1`, [runId]);
  if (isSessionless(db)) return;
  const exists = await db.query<{ present: boolean }>(
    "select to_regclass('pg_temp.supplier_sync_run_seen') is not null as present",
  );
  if (!exists.rows[0]?.present) return;
  const { rows } = await db.query<{ other: boolean }>(
    "select exists (select 1 from pg_temp.supplier_sync_run_seen where run_id <> $1) as other",
    [runId],
  );
  if (rows[0]?.other) {
    await db.query("delete from pg_temp.supplier_sync_run_seen where run_id = $1", [runId]);
  } else {
    await db.query("truncate pg_temp.supplier_sync_run_seen");
  }
}

/** Deletes the durable seen sets of runs closed by recovery (their holders are gone). */
export async function discardSeenSets(db: Queryable, runIds: number[]): Promise<void> {
  if (runIds.length === 0) return;
  await db.query(`delete from ${SEEN_TABLE} where run_id = any($1::bigint[])`, [runIds]);
}
