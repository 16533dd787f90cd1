/**
 * Held items (docs/connectors.md, Guards; `ingestion_held`): listing them, and the two
 * decisions an operator makes, `approve` and `dismiss`.
 *
 * Invariants:
 * - A decision runs in ONE transaction under the supplier's lease (the caller holds it:
 *   no tick writes the supplier's offers meanwhile), and locks the items it decides
 *   (`for update`): two operators deciding the same run at once decide each item once.
 * - An item is decided once: `held` → `approved` | `dismissed` | `stale`. Deciding
 *   again finds nothing left and changes nothing (idempotent).
 * - Approval applies an item "as if its run had written it" only where nothing changed
 *   since: an offer whose stored fields differ from the item's `stored` (a later run
 *   changed it, or delisted it) makes the item `stale`, applying nothing. Each change
 *   approval writes has its observation, with the held run's id.
 * - A held delisting delists the offers listed before the hold that neither the held
 *   run nor any later run saw (`ingestion_held_skus`), and that no later run changed.
 */
import type pg from "pg";
import { recordEvent } from "../events/outbox.js";
import type { HeldKind } from "../ingestion/ports.js";
import { ConfigError } from "../platform/errors.js";
import { observeDelisted } from "./delisting.js";
import { columnsOf, contentHash } from "./offers.js";
import { type Queryable, toId } from "./queryable.js";

/** One held item as `held` lists it. */
export interface HeldItem {
  id: number;
  runId: number;
  supplier: string;
  kind: HeldKind;
  sku: string | null;
  field: string | null;
  reason: string;
  stored: unknown;
  proposed: unknown;
  state: "held" | "approved" | "dismissed" | "stale";
  createdAt: Date;
  decidedAt: Date | null;
  decidedBy: string | null;
}

interface HeldDbRow {
  id: string;
  run_id: string;
  supplier: string;
  kind: HeldKind;
  sku: string | null;
  field: string | null;
  reason: string;
  stored: unknown;
  proposed: unknown;
  state: HeldItem["state"];
  created_at: Date;
  decided_at: Date | null;
  decided_by: string | null;
}

const HELD_COLUMNS =
  "id, run_id, supplier, kind, sku, field, reason, stored, proposed, state, created_at, decided_at, decided_by";

function toItem(r: HeldDbRow): HeldItem {
  return {
    id: toId(r.id),
    runId: toId(r.run_id),
    supplier: r.supplier,
    kind: r.kind,
    sku: r.sku,
    field: r.field,
    reason: r.reason,
    stored: r.stored,
    proposed: r.proposed,
    state: r.state,
    createdAt: r.created_at,
    decidedAt: r.decided_at,
    decidedBy: r.decided_by,
  };
}

/**
 * Held items, oldest run first: the undecided ones (through the partial index of
 * undecided items), or, with `all`, decided ones too, newest `limit` runs' worth.
 */
export async function listHeld(
  db: Queryable,
  options: { supplier?: string | undefined; all?: boolean; runId?: number; limit?: number },
): Promise<HeldItem[]> {
  const { rows } = await db.query<HeldDbRow>(
    `select ${HELD_COLUMNS} from ingestion_held
      where ($1::text is null or supplier = $1::text)
        and ($2::boolean or state = 'held')
        and ($3::bigint is null or run_id = $3::bigint)
      order by run_id, id
      limit $4`,
    [options.supplier ?? null, options.all === true, options.runId ?? null, options.limit ?? 10_000],
  );
  return rows.map(toItem);
}

/** What a decision did, per item (`approve` / `dismiss` print it). */
export interface Decision {
  runId: number;
  supplier: string;
  /** Items decided now, with their new state and, for approved ones, what was applied. */
  decided: { item: HeldItem; state: "approved" | "dismissed" | "stale"; applied: number }[];
  /** Named SKUs with no undecided item in the run (already decided, or never held). */
  notHeld: string[];
}

/** The run a decision is about: it must exist and be closed. Throws `ConfigError` otherwise. */
export async function heldRun(db: Queryable, runId: number): Promise<{ supplier: string; state: string }> {
  const { rows } = await db.query<{ supplier: string; state: string }>(
    "select supplier, state from ingestion_runs where id = $1",
    [runId],
  );
  const run = rows[0];
  if (!run) throw new ConfigError(`run ${runId} does not exist`);
  if (run.state === "running") {
    throw new ConfigError(`run ${runId} of ${run.supplier} is still running: decide once it has closed`);
  }
  return run;
}

/**
 * Approves or dismisses what run `runId` holds (all of it, or the items of the named
 * SKUs), in the caller's transaction on a connection holding the supplier's lease.
 */
export async function decideHeld(
  tx: pg.ClientBase,
  input: { runId: number; skus?: readonly string[]; decision: "approve" | "dismiss"; by: string },
): Promise<Decision> {
  const { runId, decision, by } = input;
  const run = await heldRun(tx, runId);
  const skus = input.skus && input.skus.length > 0 ? [...new Set(input.skus)] : null;
  const { rows } = await tx.query<HeldDbRow>(
    `select ${HELD_COLUMNS} from ingestion_held
      where run_id = $1 and state = 'held' and ($2::text[] is null or sku = any ($2::text[]))
      order by id
        for update`,
    [runId, skus],
  );
  const items = rows.map(toItem);
  const found = new Set(items.map((i) => i.sku));
  const notHeld = skus ? skus.filter((s) => !found.has(s)) : [];
  const decided: Decision["decided"] = [];
  for (const item of items) {
    if (decision === "dismiss") {
      await mark(tx, item.id, "dismissed", by);
      decided.push({ item, state: "dismissed", applied: 0 });
      continue;
    }
    const applied = await apply(tx, item);
    const state = applied === null ? "stale" : "approved";
    await mark(tx, item.id, state, by);
    decided.push({ item, state, applied: applied ?? 0 });
  }
  if (decided.length > 0) {
    await recordEvent(tx, {
      type: decision === "approve" ? "held.approved" : "held.dismissed",
      supplier: run.supplier,
      payload: {
        run_id: runId,
        by,
        items: decided.map((d) => ({
          id: d.item.id,
          kind: d.item.kind,
          sku: d.item.sku,
          state: d.state,
          applied: d.applied,
        })),
      },
    });
  }
  return { runId, supplier: run.supplier, decided, notHeld };
}

async function mark(tx: pg.ClientBase, id: number, state: string, by: string): Promise<void> {
  await tx.query("update ingestion_held set state = $2, decided_at = now(), decided_by = $3 where id = $1", [
    id,
    state,
    by,
  ]);
}

/** Applies one item; the count of offers it changed, or null when it is stale. */
function apply(tx: pg.ClientBase, item: HeldItem): Promise<number | null> {
  switch (item.kind) {
    case "price_jump":
    case "currency":
      return applyOffer(tx, item);
    case "delist":
      return applyDelist(tx, item);
    case "field":
      return applyField(tx, item);
  }
}

/** The observation of an offer changed by approval, with the held run's id (as the run would have). */
const OBSERVE = `insert into supplier_offer_observations
         (supplier, sku, run_id, observed_at, price, currency, stock, attributes, content_hash, kind, txid)
  select o.supplier, o.sku, $2, now(), o.price, o.currency, o.stock, o.attributes, o.content_hash,
         'changed', pg_current_xact_id() from changed o
  on conflict (supplier, sku, run_id) do update
     set observed_at = excluded.observed_at, price = excluded.price, currency = excluded.currency,
         stock = excluded.stock, attributes = excluded.attributes, content_hash = excluded.content_hash,
         kind = coalesce(supplier_offer_observations.kind, excluded.kind), txid = excluded.txid, id = excluded.id
  returning 1`;

/**
 * A held offer change: written as proposed when the offer still has the stored values
 * the item was held against (and is listed), else stale.
 */
async function applyOffer(tx: pg.ClientBase, item: HeldItem): Promise<number | null> {
  const { rows } = await tx.query<{ changed: number }>(
    `with item as (
       select h.sku, h.stored as s, h.proposed as p from ingestion_held h where h.id = $1
     ), target as (
       select o.ctid as row_tid, i.p from supplier_offers o join item i on o.sku = i.sku
        where o.supplier = $3 and o.delisted_at is null
          and o.name is not distinct from i.s->>'name'
          and o.price is not distinct from (i.s->>'price')::numeric
          and o.currency is not distinct from i.s->>'currency'
          and o.stock is not distinct from (i.s->>'stock')::int
          and o.attributes is not distinct from nullif(i.s->'attributes', 'null'::jsonb)
     ), proposed as (
       select t.row_tid, t.p->>'name' as name, (t.p->>'price')::numeric as price, t.p->>'currency' as currency,
              (t.p->>'stock')::int as stock, nullif(t.p->'attributes', 'null'::jsonb) as attributes
         from target t
     ), changed as (
       update supplier_offers o
          set name = p.name, price = p.price, currency = p.currency, stock = p.stock, attributes = p.attributes,
              content_hash = ${contentHash(columnsOf("p"))}, last_changed_at = now(), last_run_id = $2
         from proposed p
        where o.ctid = p.row_tid
       returning o.*
     ), observed as (${OBSERVE}), counted as (
       update ingestion_runs set records_updated = records_updated + (select count(*) from changed) where id = $2
     )
     select (select count(*) from changed)::int as changed`,
    [item.id, item.runId, item.supplier],
  );
  const changed = rows[0]?.changed ?? 0;
  return changed === 0 ? null : changed;
}

/**
 * A held delisting: the offers listed when it was held that neither its run nor a
 * later one saw, nor a later run changed. Stale when nothing is left to delist.
 */
async function applyDelist(tx: pg.ClientBase, item: HeldItem): Promise<number | null> {
  const { rows } = await tx.query<{ delisted: number }>(
    `with item as (
       select created_at from ingestion_held where id = $1
     ), seen as (
       select unnest(skus) as sku from ingestion_held_skus where held_id = $1
     ), delisted as (
       update supplier_offers o set delisted_at = now()
        where o.supplier = $3 and o.delisted_at is null
          and o.first_seen_at <= (select created_at from item)
          and o.last_changed_at <= (select created_at from item)
          and not exists (select 1 from seen s where s.sku = o.sku)
       returning o.*
     ), observed as (${observeDelisted("delisted", "$2")}), counted as (
       update ingestion_runs set records_delisted = records_delisted + (select count(*) from delisted) where id = $2
     )
     select (select count(*) from delisted)::int as delisted`,
    [item.id, item.runId, item.supplier],
  );
  const delisted = rows[0]?.delisted ?? 0;
  return delisted === 0 ? null : delisted;
}

/** How emptying each offer column reads in SQL; an attribute is removed from the object. */
const EMPTY_COLUMN: Record<string, string> = {
  name: "name",
  price: "price",
  currency: "currency",
  stock: "stock",
};

/**
 * A vanished field: emptied for the offers its run saw without it, except those a
 * later run changed (stale for them). Stale when none is left to empty.
 */
async function applyField(tx: pg.ClientBase, item: HeldItem): Promise<number | null> {
  const field = item.field ?? "";
  const column = EMPTY_COLUMN[field];
  const attribute = field.startsWith("attributes.") ? field.slice("attributes.".length) : null;
  if (!column && attribute === null)
    throw new Error(`held field item ${item.id} names no known field: ${field}`);
  // The new values of the offer's hashed fields, with the vanished one emptied.
  const after = {
    name: "o.name",
    price: "o.price",
    currency: "o.currency",
    stock: "o.stock",
    attributes: attribute === null ? "o.attributes" : "nullif(o.attributes - $4::text, '{}'::jsonb)",
    ...(column ? { [column]: "null" } : {}),
  };
  const set = column ? `${column} = null` : `attributes = ${after.attributes}`;
  const present = column ? `o.${column} is not null` : "o.attributes ? $4::text";
  const { rows } = await tx.query<{ changed: number }>(
    `with item as (
       select created_at from ingestion_held where id = $1
     ), skus as (
       select distinct unnest(skus) as sku from ingestion_held_skus where held_id = $1
     ), changed as (
       update supplier_offers o
          set ${set}, content_hash = ${contentHash(after)}, last_changed_at = now(), last_run_id = $2
        where o.supplier = $3 and o.sku in (select sku from skus) and ${present}
          and o.last_changed_at <= (select created_at from item)
       returning o.*
     ), observed as (${OBSERVE}), counted as (
       update ingestion_runs set records_updated = records_updated + (select count(*) from changed) where id = $2
     )
     select (select count(*) from changed)::int as changed`,
    attribute === null
      ? [item.id, item.runId, item.supplier]
      : [item.id, item.runId, item.supplier, attribute],
  );
  const changed = rows[0]?.changed ?? 0;
  return changed === 0 ? null : changed;
}
