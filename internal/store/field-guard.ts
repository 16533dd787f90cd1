/**
 * The vanished-field guard and per-field coverage (docs/connectors.md, Guards).
 *
 * A connector reports, per step, how many records carried a value for each mapped
 * field (`Page.coverage`). A field with no value in any record of a step, while more
 * than half of the step's offers have one stored, has most likely vanished from the
 * supplier's answer (renamed, or never sent): the step keeps the stored values of that
 * field (the page statement's `KEEP_STORED` variant) and the run holds one `field` item
 * naming it. Approval writes the absence for the offers listed with the item.
 *
 * The decision is per step, so it works for streamed walks; the item accumulates
 * the counts of every step that held the field. The run's coverage totals are written
 * with each committed step (`ingestion_runs.field_coverage`).
 *
 * Invariant: the state here is updated only after the step's transaction committed
 * ({@link RunFieldState.committed}), so a rolled-back step counts nothing.
 */
import type pg from "pg";
import type { FieldCoverage } from "../ingestion/ports.js";
import type { Queryable } from "./queryable.js";

/** Run totals of one field, as kept in `ingestion_runs.field_coverage`. */
interface CoverageTotal {
  source: string;
  records: number;
  withValue: number;
}

/** What a step decided, to be folded into the run's state once it committed. */
export interface StepFields {
  coverage: Map<string, CoverageTotal>;
  /** Fields held on the step, with the run's cumulative record counts including it. */
  held: Map<string, { source: string; records: number; offersWithValue: number }>;
}

/** The offer columns a field can name; anything else is `attributes.<name>`. */
const COLUMNS = new Set(["name", "price", "currency", "stock"]);
const ATTRIBUTE_PREFIX = "attributes.";

/** The coverage totals and held fields of one run, owned by its run session. */
export class RunFieldState {
  private coverage = new Map<string, CoverageTotal>();
  private held = new Map<string, { source: string; records: number; offersWithValue: number }>();

  /** The run's coverage with `page` added, and the JSON to write with the step; null when the page counted none. */
  next(coverage: readonly FieldCoverage[] | undefined): { step: StepFields; json: string | null } {
    const next = new Map(this.coverage);
    for (const c of coverage ?? []) {
      const prev = next.get(c.field);
      next.set(c.field, {
        source: c.source,
        records: (prev?.records ?? 0) + c.records,
        withValue: (prev?.withValue ?? 0) + c.withValue,
      });
    }
    const json = coverage === undefined ? null : JSON.stringify(Object.fromEntries(next));
    return { step: { coverage: next, held: new Map(this.held) }, json };
  }

  /** A field the step holds: its cumulative counts. */
  hold(
    step: StepFields,
    c: FieldCoverage,
    offersWithValue: number,
  ): { records: number; offersWithValue: number } {
    const prev = step.held.get(c.field);
    const total = {
      source: c.source,
      records: (prev?.records ?? 0) + c.records,
      offersWithValue: (prev?.offersWithValue ?? 0) + offersWithValue,
    };
    step.held.set(c.field, total);
    return total;
  }

  /** The step committed: its counts become the run's. */
  committed(step: StepFields): void {
    this.coverage = step.coverage;
    this.held = step.held;
  }
}

/** Fields of the step that matched nothing in any of its records. */
export function vanishedFields(coverage: readonly FieldCoverage[] | undefined): FieldCoverage[] {
  return (coverage ?? []).filter((c) => c.records > 0 && c.withValue === 0);
}

/**
 * Of the vanished fields, those that more than half of the step's offers have stored:
 * the ones to keep and hold. One query over the step's stored offers.
 */
export async function fieldsToHold(
  tx: Queryable,
  supplier: string,
  skus: readonly string[],
  vanished: readonly FieldCoverage[],
): Promise<{ field: FieldCoverage; stored: number }[]> {
  if (vanished.length === 0 || skus.length === 0) return [];
  const { rows } = await tx.query<{ field: string; stored: number }>(
    `with step as materialized (
       select name, price, currency, stock, attributes
         from supplier_offers where supplier = $1 and sku = any ($2::text[])
     )
     select f.field, (select count(*) from step o
                       where case f.field when 'name' then o.name is not null
                                          when 'price' then o.price is not null
                                          when 'currency' then o.currency is not null
                                          when 'stock' then o.stock is not null
                                          else o.attributes ? substr(f.field, ${ATTRIBUTE_PREFIX.length + 1}) end)::int as stored
       from unnest($3::text[]) as f(field)`,
    [supplier, skus, vanished.map((v) => v.field)],
  );
  const stored = new Map(rows.map((r) => [r.field, r.stored]));
  return vanished
    .map((field) => ({ field, stored: stored.get(field.field) ?? 0 }))
    .filter((f) => f.stored * 2 > skus.length);
}

/** The page statement's `$16` (offer columns) and `$17` (attribute names) for the held fields. */
export function keepParameters(held: readonly { field: FieldCoverage }[]): [string[], string[]] {
  const columns: string[] = [];
  const attributes: string[] = [];
  for (const { field } of held) {
    if (COLUMNS.has(field.field)) columns.push(field.field);
    else if (field.field.startsWith(ATTRIBUTE_PREFIX))
      attributes.push(field.field.slice(ATTRIBUTE_PREFIX.length));
  }
  return [columns, attributes];
}

const count = (n: number) => n.toLocaleString("en-US");

/**
 * Records a held field in the step's transaction: the run's one `field` item for it
 * (created, or its counts brought up to date), the step's SKUs (whose field approval
 * empties), and older undecided items for the same field, superseded.
 */
export async function holdField(
  tx: pg.ClientBase,
  input: {
    runId: number;
    supplier: string;
    seq: number;
    skus: readonly string[];
    field: FieldCoverage;
    total: { records: number; offersWithValue: number };
  },
): Promise<void> {
  const { runId, supplier, seq, skus, field, total } = input;
  const reason = `${field.field}: ${field.source} matched nothing in ${count(total.records)} of ${count(total.records)} records (${count(total.offersWithValue)} offers have it stored)`;
  const { rows } = await tx.query<{ id: string; fresh: boolean }>(
    `insert into ingestion_held (run_id, supplier, kind, field, reason, stored, proposed)
     values ($1, $2, 'field', $3, $4, $5::jsonb, $6::jsonb)
     on conflict (run_id, kind, (coalesce(sku, '')), (coalesce(field, ''))) do update
        set reason = excluded.reason, stored = excluded.stored, proposed = excluded.proposed
     returning id, (xmax = 0) as fresh`,
    [
      runId,
      supplier,
      field.field,
      reason,
      JSON.stringify({ offersWithValue: total.offersWithValue }),
      JSON.stringify({ field: field.field, source: field.source, records: total.records, withValue: 0 }),
    ],
  );
  const item = rows[0];
  if (!item) throw new Error("insert into ingestion_held returned no row");
  await tx.query(
    `insert into ingestion_held_skus (held_id, run_id, seq, skus) values ($1, $2, $3, $4::text[])
     on conflict do nothing`,
    [item.id, runId, seq, skus],
  );
  if (item.fresh) {
    await tx.query(
      `with runs as (
         update ingestion_runs set records_held = records_held + 1 where id = $1 returning 1
       )
       update ingestion_held set state = 'stale', decided_at = now(), decided_by = 'run ' || $1
        where supplier = $2 and kind = 'field' and field = $3 and state = 'held' and run_id <> $1`,
      [runId, supplier, field.field],
    );
  }
}
