/**
 * Delisting at the close of a complete walk, under the mass-delisting guard
 * (docs/connectors.md, Guards).
 *
 * One statement reads the supplier's offers once against the run's seen set: offers
 * the run did not see would be delisted, delisted offers it saw again are relisted.
 * Only those offers are kept (`flags`), and the listed ones are counted by a separate
 * scan in the same snapshot: keeping every offer of a 1M catalog in the statement
 * spilled it to disk. The seen SKUs are not made distinct (a hash of 1M strings): a SKU
 * on two pages only repeats a relisted offer's row in `flags`, which the update applies
 * once and `missing` never counts (it counts offers no seen SKU matched). Together 2.9 s
 * → 1.2 s for a 1M catalog (bench/README.md, The close).
 * When the guard is on and the walk would delist more than `maxDelistRatio` of the
 * offers listed before it *and* more than `minDelistCount` of them, nothing is
 * delisted (relisting still applies: those offers are there) and the caller holds
 * one `delist` item. The ratio is compared in numeric, never through a float.
 *
 * "Listed before the run" is the offers listed now minus the run's own inserts:
 * `delisted_at` only changes at a close, so every offer listed now was listed before
 * the run or inserted by it.
 */
import type pg from "pg";
import type { GuardSettings } from "../ingestion/ports.js";
import { isSessionless, type Queryable } from "./queryable.js";
import { SEEN_TABLE } from "./seen-set.js";

export interface DelistingVerdict {
  /** Offers listed before the run. */
  listed: number;
  /** Listed offers the run did not see. */
  missing: number;
  /** Whether the delisting was applied (else held). */
  applied: boolean;
  /** Offers delisted (0 when held). */
  delisted: number;
}

function seenSource(db: pg.ClientBase): string {
  return isSessionless(db) ? SEEN_TABLE : "pg_temp.supplier_sync_run_seen";
}

/** Delists what the run missed unless the guard holds it; relists what it saw again. */
export async function delistUnlessHeld(
  db: pg.ClientBase,
  input: { runId: number; supplier: string; insertedByRun: number; guards: GuardSettings | null },
): Promise<DelistingVerdict> {
  const { guards } = input;
  const { rows } = await db.query<{ listed: number; missing: number; applied: boolean; delisted: number }>(
    `with seen as (
       select unnest(skus) as sku from ${seenSource(db)} where run_id = $1
     ), flags as materialized (
       select o.sku, o.delisted_at is null as listed, s.sku is not null as seen
         from supplier_offers o
         left join seen s on s.sku = o.sku
        where o.supplier = $2 and (o.delisted_at is null) <> (s.sku is not null)
     ), verdict as (
       select (select count(*) from supplier_offers where supplier = $2 and delisted_at is null)::int - $3::int as listed,
              count(*) filter (where listed and not seen)::int as missing
         from flags
     ), decided as (
       select v.listed, v.missing,
              not ($4::boolean and v.missing > v.listed * $5::numeric and v.missing > $6::int) as applied
         from verdict v
     ), changed as (
       update supplier_offers o
          set delisted_at = case when t.seen then null else now() end
         from flags t
        where o.supplier = $2 and o.sku = t.sku
          and ((t.seen and not t.listed) or (not t.seen and t.listed and (select applied from decided)))
       returning o.*, not t.seen as delisted
     ), observed as (${observeDelisted("changed", "$1", "case when delisted then 'delisted' else 'relisted' end")})
     select d.listed, d.missing, d.applied,
            (select count(*) filter (where delisted) from changed)::int as delisted
       from decided d`,
    [
      input.runId,
      input.supplier,
      input.insertedByRun,
      guards !== null,
      guards === null ? "1" : String(guards.maxDelistRatio),
      guards?.minDelistCount ?? 0,
    ],
  );
  const row = rows[0];
  if (!row) throw new Error("delisting returned no row");
  return row;
}

/**
 * Writes the change feed's observation (docs/changes.md) of each offer in the CTE
 * `source` (rows of `supplier_offers`) as delisted, or with the `kind` expression given:
 * a delisting or relisting is a change too. The run's observation of an offer it also
 * changed (a relisted offer with new values) becomes `relisted`, with this transaction's
 * txid and a new id (the one its insert drew), so it lies in this transaction's id range.
 */
export function observeDelisted(source: string, runId: string, kind = "'delisted'"): string {
  return `insert into supplier_offer_observations
         (supplier, sku, run_id, observed_at, price, currency, stock, attributes, content_hash, kind, txid)
  select s.supplier, s.sku, ${runId}, now(), s.price, s.currency, s.stock, s.attributes, s.content_hash,
         ${kind}, pg_current_xact_id()
    from ${source} s
  on conflict (supplier, sku, run_id) do update
     set observed_at = excluded.observed_at, price = excluded.price, currency = excluded.currency,
         stock = excluded.stock, attributes = excluded.attributes, content_hash = excluded.content_hash,
         kind = excluded.kind, txid = excluded.txid, id = excluded.id
  returning 1`;
}

const count = (n: number) => n.toLocaleString("en-US");

/** `delist: 9,412 of 10,000 listed (94 %) > 25 %` */
export function delistReason(verdict: DelistingVerdict, guards: GuardSettings): string {
  const share = verdict.listed === 0 ? 100 : Math.round((verdict.missing / verdict.listed) * 100);
  return `delist: ${count(verdict.missing)} of ${count(verdict.listed)} listed (${share} %) > ${Math.round(guards.maxDelistRatio * 100)} % and > ${count(guards.minDelistCount)}`;
}

/**
 * Holds the run's delisting: one `delist` item with the counts, and the run's seen set
 * copied beside it (approval delists the listed offers that neither this run nor a
 * later one saw).
 */
export async function holdDelisting(
  db: pg.ClientBase,
  input: { runId: number; supplier: string; verdict: DelistingVerdict; guards: GuardSettings },
): Promise<void> {
  const { runId, supplier, verdict, guards } = input;
  const { rows } = await db.query<{ id: string }>(
    `insert into ingestion_held (run_id, supplier, kind, reason, stored, proposed)
     values ($1, $2, 'delist', $3, $4::jsonb, $5::jsonb)
     on conflict (run_id, kind, (coalesce(sku, '')), (coalesce(field, ''))) do nothing
     returning id`,
    [
      runId,
      supplier,
      delistReason(verdict, guards),
      JSON.stringify({ listed: verdict.listed }),
      JSON.stringify({
        delist: verdict.missing,
        listed: verdict.listed,
        maxDelistRatio: guards.maxDelistRatio,
        minDelistCount: guards.minDelistCount,
      }),
    ],
  );
  const item = rows[0];
  if (!item) return;
  await db.query(
    `insert into ingestion_held_skus (held_id, run_id, seq, skus)
     select $1, run_id, seq, skus from ${seenSource(db)} where run_id = $2`,
    [item.id, runId],
  );
}

/**
 * What a closing run tells the items earlier runs of its supplier still hold:
 * - a complete walk that decided its own delisting supersedes their `delist` items,
 *   and their `field` items for fields it found values for (the field came back);
 * - any other run adds the SKUs it saw to their `delist` items (approval must not
 *   delist an offer seen since).
 */
export async function updateEarlierHolds(
  db: pg.ClientBase,
  input: { runId: number; supplier: string; decidedDelisting: boolean; fieldsWithValues: string[] },
): Promise<void> {
  const { runId, supplier } = input;
  if (input.decidedDelisting) {
    await db.query(
      `update ingestion_held
          set state = 'stale', decided_at = now(), decided_by = 'run ' || $1
        where supplier = $2 and state = 'held' and run_id < $1
          and (kind = 'delist' or (kind = 'field' and field = any ($3::text[])))`,
      [runId, supplier, input.fieldsWithValues],
    );
    return;
  }
  if (isSessionless(db)) {
    await appendSeenToEarlierDelists(db, supplier, [runId]);
    return;
  }
  const present = await db.query<{ present: boolean }>(
    "select to_regclass('pg_temp.supplier_sync_run_seen') is not null as present",
  );
  if (!present.rows[0]?.present) return;
  await db.query(
    `insert into ingestion_held_skus (held_id, run_id, seq, skus)
     select h.id, s.run_id, s.seq, s.skus
       from pg_temp.supplier_sync_run_seen s
       join ingestion_held h on h.supplier = $2 and h.kind = 'delist' and h.state = 'held' and h.run_id < s.run_id
      where s.run_id = $1
     on conflict do nothing`,
    [runId, supplier],
  );
}

/** Adds the durable seen sets of `runIds` (table lease, recovery) to the supplier's earlier held delistings. */
export async function appendSeenToEarlierDelists(
  db: Queryable,
  supplier: string,
  runIds: number[],
): Promise<void> {
  if (runIds.length === 0) return;
  await db.query(
    `insert into ingestion_held_skus (held_id, run_id, seq, skus)
     select h.id, s.run_id, s.seq, s.skus
       from ${SEEN_TABLE} s
       join ingestion_held h on h.supplier = $1 and h.kind = 'delist' and h.state = 'held' and h.run_id < s.run_id
      where s.run_id = any ($2::bigint[])
     on conflict do nothing`,
    [supplier, runIds],
  );
}
