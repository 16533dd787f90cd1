/**
 * The store's write path alone (no HTTP): a run of `commitPage` calls on one
 * connection, then `closeRun` with delisting, exactly as a tick drives them. It
 * isolates the database cost the pipeline cases include, for tuning offers.ts.
 * Per repetition, from empty tables: first load, unchanged re-sync, 1 % changed.
 */
import type pg from "pg";
import type { Page } from "../../internal/ingestion/ports.js";
import { commitPage } from "../../internal/store/offers.js";
import { closeRun, startRun } from "../../internal/store/runs.js";
import { SeenSetPreparation } from "../../internal/store/seen-set.js";
import { cores, cpuBounds, type WalkCpu } from "../cpu.js";
import { type DbProbe, probeDatabase, resetTables, settleStats, walBytesBetween } from "../database.js";
import { type Measurement, measurement, medianOf, rowsPerSecond, timed } from "../measure.js";
import type { CaseContext } from "./context.js";

export interface WalkCost {
  rowsPerSecond: number;
  walBytes: number;
  deadTuples: number;
  updatedRows: number;
  newObservations: number;
  state: string;
  /** CPU seconds by process, where measured (pipeline walks on a local server). */
  cpu?: WalkCpu;
  /** Rows of the walk (for the CPU bound). */
  rows?: number;
}

/** One complete run through the store: startRun, every page, closeRun. */
async function storeWalk(client: pg.ClientBase, supplier: string, pages: Page[]): Promise<string> {
  const runId = await startRun(client, {
    supplier,
    slotStart: new Date(),
    trigger: "forced",
    owner: { hostname: "bench", pid: process.pid, bootId: "bench" },
  });
  // One preparation for the run, as the run session keeps it (internal/store/run-session.ts).
  const seen = new SeenSetPreparation();
  for (const page of pages) await commitPage(client, { runId, supplier, page }, seen);
  const closed = await closeRun(client, { runId, walkComplete: true, errorCode: null, errorMessage: null });
  return closed?.state ?? "unknown";
}

/** Runs `walk` between two database probes and returns its rate and its cost in the database. */
export async function measureWalk(
  pool: pg.Pool,
  rows: number,
  walk: () => Promise<string>,
  writer?: pg.ClientBase,
): Promise<WalkCost> {
  await settleStats(pool, writer);
  const before: DbProbe = await probeDatabase(pool);
  const { ms, value: state } = await timed(walk);
  await settleStats(pool, writer);
  const after = await probeDatabase(pool);
  return {
    rowsPerSecond: rowsPerSecond(rows, ms),
    walBytes: await walBytesBetween(pool, before, after),
    deadTuples: after.offersDead - before.offersDead,
    updatedRows: after.offersUpdated - before.offersUpdated,
    newObservations: after.observations - before.observations,
    state,
  };
}

/**
 * CPU seconds by process (medians), the share of the machine's cores the walk kept busy,
 * and the rows/s its CPU cost allows on these cores (bench/cpu.ts), when every walk has them.
 */
function cpuDetails(walks: WalkCost[]): Record<string, number> {
  const measured = walks.flatMap((w) => (w.cpu && w.rows ? [{ cpu: w.cpu, rows: w.rows, w }] : []));
  if (measured.length === 0 || measured.length !== walks.length) return {};
  return {
    cpu_database_s: medianOf(measured, (m) => m.cpu.database),
    cpu_worker_s: medianOf(measured, (m) => m.cpu.worker),
    cpu_supplier_s: medianOf(measured, (m) => m.cpu.supplier),
    cores_busy: medianOf(
      measured,
      (m) => ((m.cpu.database + m.cpu.worker + m.cpu.supplier) * m.w.rowsPerSecond) / m.rows / cores,
    ),
    cpu_bound: medianOf(measured, (m) => cpuBounds(m.rows, m.cpu).all),
    cpu_bound_without_supplier: medianOf(measured, (m) => cpuBounds(m.rows, m.cpu).withoutSupplier),
  };
}

/** Measurements of the three walks, from per-repetition costs. */
export function walkMeasurements(
  prefix: string,
  label: string,
  costs: { first: WalkCost; unchanged: WalkCost; changed: WalkCost }[],
): Measurement[] {
  const pick = (name: "first" | "unchanged" | "changed") => costs.map((c) => c[name]);
  const details = (walks: WalkCost[]) => ({
    wal_bytes: medianOf(walks, (w) => w.walBytes),
    dead_tuples_max: Math.max(...walks.map((w) => w.deadTuples)),
    updated_rows: medianOf(walks, (w) => w.updatedRows),
    new_observations: medianOf(walks, (w) => w.newObservations),
    states: [...new Set(walks.map((w) => w.state))].join(","),
    ...cpuDetails(walks),
  });
  return (["first", "unchanged", "changed"] as const).map((name) => {
    const walks = pick(name);
    const title = { first: "first load", unchanged: "unchanged re-sync", changed: "1 % changed" }[name];
    return measurement(
      `${prefix}.${name}`,
      `${label}: ${title}`,
      "rows/s",
      walks.map((w) => w.rowsPerSecond),
      details(walks),
    );
  });
}

export async function measureStoreWrite(ctx: CaseContext): Promise<Measurement[]> {
  const { catalog, pool } = ctx;
  const changedCount = Math.round(catalog.size / 100);
  const costs: { first: WalkCost; unchanged: WalkCost; changed: WalkCost }[] = [];
  for (let rep = 1; rep <= ctx.repetitions; rep++) {
    await resetTables(pool);
    catalog.mutate({ reset: true });
    const pristine = catalog.pages();
    const client = await pool.connect();
    try {
      const first = await measureWalk(
        pool,
        catalog.size,
        () => storeWalk(client, catalog.supplier, pristine),
        client,
      );
      const unchanged = await measureWalk(
        pool,
        catalog.size,
        () => storeWalk(client, catalog.supplier, pristine),
        client,
      );
      catalog.mutate({ changePrices: changedCount });
      const mutated = catalog.pages();
      const changed = await measureWalk(
        pool,
        catalog.size,
        () => storeWalk(client, catalog.supplier, mutated),
        client,
      );
      costs.push({ first, unchanged, changed });
      ctx.progress(
        `store rep ${rep}: first ${Math.round(first.rowsPerSecond)}, unchanged ${Math.round(unchanged.rowsPerSecond)}, changed ${Math.round(changed.rowsPerSecond)} rows/s`,
      );
    } finally {
      client.release();
    }
  }
  catalog.mutate({ reset: true });
  return walkMeasurements(
    "store",
    `Store write path (commitPage, no HTTP, ${catalog.size.toLocaleString("en")} SKUs)`,
    costs,
  );
}
