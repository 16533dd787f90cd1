/**
 * The hot path: one page committed as one transaction, with change detection by
 * content hash so an unchanged offer costs no write (docs/architecture.md, The store).
 *
 * Counting (per page; a run's counters are the sums):
 * - `seen` = offers on the page, every occurrence (a SKU repeated on the page, or
 *   already written by an earlier page of the same run, is seen once more).
 * - The page is reduced to one offer per SKU, the last occurrence winning; each of
 *   those is exactly one of `inserted` (SKU unknown), `updated` (content differs
 *   from the stored row, which may be this run's earlier page) or `unchanged`. So
 *   `inserted + updated + unchanged` = distinct SKUs on the page.
 * - `rejected` = rejects of the page.
 *
 * Content hash: md5 of `name, trim_scale(price), currency, stock` each through
 * `quote_nullable` (quoted, so unambiguous: null is not "" and no separator can be
 * forged; a null price, on request, is `NULL`), then the attributes' jsonb text when
 * there are any (so the hash of an offer without attributes is what it always was),
 * computed in SQL so the decimal is normalised by PostgreSQL itself
 * (`1.50` and `1.5` hash alike). It measured faster than a jsonb encoding or
 * node:crypto md5 (which would also block the event loop and need a JS copy of
 * numeric normalisation; figures in bench/README.md, Figures behind code choices). It is computed for
 * new and changed offers only: unchanged ones are recognised by comparing fields.
 *
 * `commitPage` alone beat the previous per-SKU-probe statement on first loads,
 * unchanged re-syncs and small changes alike; an unchanged offer writes no WAL.
 * Rates and WAL per offer, with date and method: bench/README.md, Figures behind code choices.
 */
import type pg from "pg";
import type { GuardSettings, Offer, Page, PageCounts, Reject } from "../ingestion/ports.js";
import { IngestionError } from "../platform/errors.js";
import { jsonbText, stringifyForJsonb, stripNul } from "../platform/exact-json.js";
import { BinaryArrays } from "./binary-arrays.js";
import {
  fieldsToHold,
  holdField,
  keepParameters,
  RunFieldState,
  type StepFields,
  vanishedFields,
} from "./field-guard.js";
import { currencySwitchedSql, heldReasonSql, priceJumpedSql } from "./guard-sql.js";
import { inTransaction, isSessionless, type Queryable } from "./queryable.js";
import { SEEN_TABLE, SeenSetPreparation } from "./seen-set.js";

const ZERO_COUNTS = { seen: 0, inserted: 0, updated: 0, unchanged: 0, rejected: 0 } as const;

/** SQL expressions of an offer's hashed fields. */
export interface HashedColumns {
  name: string;
  price: string;
  currency: string;
  stock: string;
  attributes: string;
}

/** The hashed fields of the row `alias`. */
export function columnsOf(alias: string): HashedColumns {
  return {
    name: `${alias}.name`,
    price: `${alias}.price`,
    currency: `${alias}.currency`,
    stock: `${alias}.stock`,
    attributes: `${alias}.attributes`,
  };
}

/**
 * The content hash (see the top of this file) of an offer with these field values: md5
 * of each through `quote_nullable` (the price trimmed of its scale), then the attributes'
 * jsonb text. Every writer of `supplier_offers` computes it with this one expression.
 */
export function contentHash(c: HashedColumns): string {
  return `md5(concat_ws(',', quote_nullable(${c.name}), coalesce(trim_scale(${c.price})::text, 'NULL'),
                            quote_nullable(${c.currency}), quote_nullable(${c.stock}), (${c.attributes})::text))`;
}

/**
 * Claims the step row as succeeded. Nothing is returned when it already succeeded:
 * that is a re-commit after an ambiguous commit, and must change nothing. A step
 * recorded `failed` (or left `running`) may still succeed on a later attempt.
 * `started_at` is when the step began (`$5`, the page's first request; null: now),
 * `finished_at` when it commits (`clock_timestamp()`: the statement's time, not the
 * transaction's start).
 *
 * It also turns JIT compilation off for the rest of the page's transaction (`set local`,
 * without a round trip of its own): the page statement's estimated cost is about half
 * of PostgreSQL's default `jit_above_cost`, and a plan that crosses it (a larger cap,
 * held rows estimated high) spends ~120 ms compiling a statement that runs in ~15 ms
 * (measured: bench/README.md, Guards).
 */
const CLAIM_STEP = `
insert into ingestion_run_steps (run_id, seq, state, started_at, finished_at, records, http_attempts, error_code)
values ($1, $2, 'succeeded', least(coalesce($5::timestamptz, now()), clock_timestamp()), clock_timestamp(), $3, $4, null)
on conflict (run_id, seq) do update
   set state = 'succeeded', started_at = excluded.started_at, finished_at = excluded.finished_at,
       records = excluded.records, http_attempts = excluded.http_attempts, error_code = null
 where ingestion_run_steps.state <> 'succeeded'
returning set_config('jit', 'off', true)`;

/**
 * The guards' per-offer tests on a row `c` of `classified` (guard-sql.ts): each implies a
 * change, so neither repeats `is_changed`. They are written out where they are needed (the
 * `written` filter, the `held` rows) rather than kept as columns of another materialised
 * CTE over the whole page: that cost an unchanged page ~10 % more (bench/README.md, Guards).
 */
const JUMPED = `($13::numeric is not null and ${priceJumpedSql("c.price", "c.old_price", "$13::numeric")})`;
const SWITCHED = currencySwitchedSql("c.currency", "c.old_currency", "$14::boolean");

/** The new and changed offers of `classified` that `filter` lets through, with their content hash. */
function writtenCte(filter: string): string {
  return `written as materialized (
  select c.*, ${contentHash(columnsOf("c"))} as content_hash
    from classified c
   where ${filter}
)`;
}

/** The page's counts over `classified`; `updated` and the held counts as given. */
function countsCte(updated: string, heldPrice: string, heldCurrency: string): string {
  return `counts as (
  select count(*) filter (where is_new)::int as inserted,
         ${updated} as updated,
         count(*) filter (where not is_new and not is_changed)::int as unchanged,
         ${heldPrice} as held_price,
         ${heldCurrency} as held_currency
    from classified
)`;
}

/** What a held offer would have become (the page's values), as `ingestion_held.proposed`. */
const PROPOSED = `jsonb_build_object('name', h.name, 'price', h.price::text, 'currency', h.currency,
                            'stock', h.stock, 'attributes', h.attributes)`;

/**
 * Stage → classify → write, as one statement, for a page already reduced to one
 * offer per SKU (`$3`-`$7`, `$12`: the page's columns as arrays, binary or text,
 * {@link pageColumns}, {@link arrayLiterals}).
 *
 * Classification reads the stored offers once, by the page's SKU range: catalogs are
 * served in a stable order, usually by SKU, so the stored offers between the page's
 * lowest and highest SKU are the page's own (plus any the supplier dropped since).
 * That is one primary-key range scan and a hash join, against one index descent per
 * SKU (several times faster on a large catalog: bench/README.md, Figures behind code choices). The range
 * is read up to a cap of twice the page plus 100 rows; a page whose range holds more
 * (SKUs served in random order, or a catalog that shrank a lot) falls back to one
 * probe per SKU (`limit 1` keeps each a plain index scan, `union all` with one-time
 * filters runs exactly one of the two branches). `min`/`max` are taken in SQL, so the
 * range follows the database's collation and a SKU missing from a complete range is
 * new, whatever the collation.
 *
 * An offer is unchanged when its fields equal the stored ones (`price` compared as
 * numeric, so `1.50` = `1.5`; attributes as jsonb, so key order does not matter);
 * this is what the content hash encodes, without hashing the unchanged majority. The
 * hash (md5 of `name, trim_scale(price), currency, stock`, attributes,
 * each through `quote_nullable`: unambiguous, null is not "") is computed in SQL for
 * the new and changed offers only, so the decimal is normalised by PostgreSQL itself.
 *
 * Changed rows are updated by the `ctid` the read found (a TID scan: safe within one
 * statement and snapshot, and checked: if a row moved under us the update count
 * differs and the page fails). Only new and changed offers are written and observed;
 * the page's SKUs go to the session's seen set as one array row (temp: no WAL).
 *
 * New offers are plain inserts, not upserts: under the lease nobody else writes this
 * supplier, and `on conflict` costs about twice as much per row (bench/README.md, Figures behind code choices).
 * Should the lease invariant ever break, the primary keys
 * still refuse the duplicate and the page fails instead of corrupting anything.
 *
 * The observation conflict target `(supplier, sku, run_id)` is hit only when an
 * earlier page of the same run wrote this SKU with other content: the observation
 * then takes the last value, like the offer, so a run's observation always equals
 * what the run left in `supplier_offers`. A new offer cannot have an observation in
 * this run yet, so its observation is a plain insert: `on conflict` inserts
 * speculatively (three WAL records a row instead of two), which measured much slower
 * on a first-load page (bench/README.md, Figures behind code choices).
 *
 * Observations carry the change feed's `kind` (`listed` for a new offer, `changed`) and
 * `txid` (this transaction's id, docs/changes.md). An observation rewritten by a later
 * page of the run keeps its kind (a `listed` stays listed) and takes the later
 * transaction's id, so it moves forward in the feed and a consumer past the first
 * version sees the last one too.
 *
 * Exported for `bench/explain-page.ts` (its plan, as PostgreSQL runs it); the store
 * itself runs it only through {@link commitPage}.
 */
export const WRITE_PAGE = `
with page as materialized (
  select u.sku, u.name, u.price, u.currency, u.stock, u.attributes
    from unnest($3::text[], $4::text[], $5::numeric[], $6::text[], $7::int[], $12::jsonb[])
      as u(sku, name, price, currency, stock, attributes)
), bounds as materialized (
  -- The guards' parameters are named here once, so they are typed in every variant (unused without guards).
  select min(sku) as lo, max(sku) as hi, count(*) * 2 + 100 as cap,
         $13::numeric as jump_factor, $14::boolean as currency_guard
    from page
), stored as materialized (
  select s.sku, s.name, s.price, s.currency, s.stock, s.attributes, s.ctid as row_tid
    from supplier_offers s
   where s.supplier = $2 and s.sku >= (select lo from bounds) and s.sku <= (select hi from bounds)
   limit (select cap from bounds)
), sparse as materialized (
  select count(*) >= (select cap from bounds) as yes from stored
), matched as (
  select p.*, r.name as old_name, r.price as old_price, r.currency as old_currency, r.stock as old_stock,
         r.attributes as old_attributes, r.row_tid
    from page p left join stored r on r.sku = p.sku
   where not (select yes from sparse)
  union all
  select p.*, o.name, o.price, o.currency, o.stock, o.attributes, o.row_tid
    from page p
    left join lateral (
      select s.name, s.price, s.currency, s.stock, s.attributes, s.ctid as row_tid
        from supplier_offers s where s.supplier = $2 and s.sku = p.sku limit 1
    ) o on true
   where (select yes from sparse)
), /*KEPT*/classified as (
  select m.sku, m.name, m.price, m.currency, m.stock, m.attributes, m.row_tid, m.row_tid is null as is_new,
         m.row_tid is not null and (m.old_price is distinct from m.price or m.old_name is distinct from m.name
           or m.old_currency is distinct from m.currency or m.old_stock is distinct from m.stock
           or m.old_attributes is distinct from m.attributes) as is_changed,
         m.old_name, m.old_price, m.old_currency, m.old_stock, m.old_attributes
    from /*MATCHED*/matched m
), /*GUARDS*/${writtenCte(`c.is_new or (c.is_changed and not ${JUMPED} and not ${SWITCHED})`)}, held as materialized (
  select c.*, ${JUMPED} as price_jumped, ${SWITCHED} as currency_switched, k.kind,
         -- Held already by an earlier page of this run? Probed per row only when the run holds
         -- any offer yet (one look for the page): a first hold costs no probe at all.
         (select exists (select 1 from ingestion_held e where e.run_id = $1 and e.sku is not null))
           and exists (select 1 from ingestion_held e
                        where e.run_id = $1 and e.kind = k.kind and coalesce(e.sku, '') = c.sku
                          and coalesce(e.field, '') = '') as again
    from classified c
   cross join lateral (select case when ${SWITCHED} then 'currency' else 'price_jump' end as kind) k
   where ${JUMPED} or ${SWITCHED}
), held_items as (
  insert into ingestion_held (run_id, supplier, sku, kind, reason, stored, proposed)
  select $1, $2, h.sku, h.kind, ${heldReasonSql("h", "h.price_jumped", "h.currency_switched")},
         jsonb_build_object('name', h.old_name, 'price', h.old_price::text, 'currency', h.old_currency,
                            'stock', h.old_stock, 'attributes', h.old_attributes),
         ${PROPOSED}
    from held h where not h.again
  returning 1
), held_again as (
  update ingestion_held e
     set reason = ${heldReasonSql("h", "h.price_jumped", "h.currency_switched")}, proposed = ${PROPOSED}
    from held h
   where h.again and e.run_id = $1 and e.kind = h.kind and coalesce(e.sku, '') = h.sku
     and coalesce(e.field, '') = ''
  returning 1
), /*END GUARDS*//*SUPERSEDED*/inserted as (
  insert into supplier_offers
         (supplier, sku, name, price, currency, stock, attributes, content_hash, first_seen_at, last_changed_at, last_run_id)
  select $2, sku, name, price, currency, stock, attributes, content_hash, now(), now(), $1
    from written where is_new
  returning 1
), updated as (
  update supplier_offers o
     set name = w.name, price = w.price, currency = w.currency, stock = w.stock, attributes = w.attributes,
         content_hash = w.content_hash, last_changed_at = now(), last_run_id = $1
    from written w
   where o.ctid = any (array(select row_tid from written where not is_new))
     and w.row_tid = o.ctid and not w.is_new
  returning 1
), observed_new as (
  insert into supplier_offer_observations
         (supplier, sku, run_id, observed_at, price, currency, stock, attributes, content_hash, kind, txid)
  select $2, sku, $1, now(), price, currency, stock, attributes, content_hash, 'listed', pg_current_xact_id()
    from written where is_new
  returning 1
), observed_changed as (
  insert into supplier_offer_observations
         (supplier, sku, run_id, observed_at, price, currency, stock, attributes, content_hash, kind, txid)
  select $2, sku, $1, now(), price, currency, stock, attributes, content_hash, 'changed', pg_current_xact_id()
    from written where not is_new
  on conflict (supplier, sku, run_id) do update
     set observed_at = excluded.observed_at, price = excluded.price, currency = excluded.currency,
         stock = excluded.stock, attributes = excluded.attributes, content_hash = excluded.content_hash,
         kind = coalesce(supplier_offer_observations.kind, excluded.kind), txid = excluded.txid, id = excluded.id
  returning 1
), rejected as (
  insert into ingestion_rejects (run_id, supplier, seq, reason, raw)
  select $1, $2, $8, r.value->>'reason', r.value->'raw'
    from jsonb_array_elements($9::jsonb) as r(value)
  returning 1
), seen as (
  insert into pg_temp.supplier_sync_run_seen (run_id, seq, skus) values ($1, $8, $3::text[])
  returning 1
), /*COUNTS*/${countsCte(
  "count(*) filter (where is_changed)::int - (select count(*) from held)::int",
  "(select count(*) filter (where price_jumped and not currency_switched) from held)::int",
  "(select count(*) filter (where currency_switched) from held)::int",
)}/*END COUNTS*/, run as (
  update ingestion_runs r
     set pages = pages + 1,
         records_seen = records_seen + $10,
         records_inserted = records_inserted + counts.inserted,
         records_updated = records_updated + counts.updated,
         records_unchanged = records_unchanged + counts.unchanged,
         records_rejected = records_rejected + $11,
         /*HELD*/records_held = records_held + (select count(*) from held_items),
         field_coverage = coalesce($15::jsonb, field_coverage),
         heartbeat_at = now()
    from counts
   where r.id = $1 and r.state = 'running'
  returning 1
)
select counts.*,
       (select count(*) from run)::int as run_updated,
       (select count(*) from inserted)::int as inserted_rows,
       (select count(*) from updated)::int as updated_rows,
       (select count(*) from observed_new)::int + (select count(*) from observed_changed)::int as observed,
       (select count(*) from rejected)::int as rejects,
       (select count(*) from seen)::int as staged
  from counts`;

/**
 * What a run's pages mark `stale` (docs/connectors.md, Guards): an offer this run saw again
 * decides what an earlier run held for it (the supplier corrected itself, or this run holds
 * the newer values). Spliced into {@link WRITE_PAGE} only while the supplier has undecided
 * per-offer items of earlier runs ({@link EarlierHolds}): planning it took 0.6–4 ms a page,
 * more than the rest of an unchanged page's statement (bench/README.md, Guards).
 */
const SUPERSEDE_EARLIER = `superseded as (
  update ingestion_held o
     set state = 'stale', decided_at = now(), decided_by = 'run ' || $1
   where o.supplier = $2 and o.state = 'held' and o.sku = any ($3::text[]) and o.run_id <> $1
     and o.kind in ('price_jump', 'currency')
  returning 1
), `;

/**
 * Whether the supplier had undecided per-offer items of other runs when this run began
 * (read once, on the run's first page). None can appear during the run: only a run of
 * this supplier holds offers, and the lease lets one run at a time.
 */
export class EarlierHolds {
  private known: boolean | undefined;

  async any(tx: Queryable, supplier: string, runId: number): Promise<boolean> {
    if (this.known === undefined) {
      const { rows } = await tx.query<{ yes: boolean }>(
        `select exists (select 1 from ingestion_held where supplier = $1 and state = 'held'
                          and sku is not null and run_id <> $2 and kind in ('price_jump', 'currency')) as yes`,
        [supplier, runId],
      );
      this.known = rows[0]?.yes === true;
    }
    return this.known;
  }
}

/**
 * The values a vanished field keeps (docs/connectors.md, Guards): for a stored offer, each
 * field named in `$16` (`name`, `price`, `currency`, `stock`) and each attribute named in
 * `$17` keeps its stored value, so a change of that field alone writes nothing. Spliced
 * into {@link WRITE_PAGE} only for a step with a vanished field: every other step pays nothing.
 */
const KEEP_STORED = `kept as (
  select m.sku,
         case when m.row_tid is not null and 'name' = any ($16::text[]) then m.old_name else m.name end as name,
         case when m.row_tid is not null and 'price' = any ($16::text[]) then m.old_price else m.price end as price,
         case when m.row_tid is not null and 'currency' = any ($16::text[]) then m.old_currency
              else m.currency end as currency,
         case when m.row_tid is not null and 'stock' = any ($16::text[]) then m.old_stock else m.stock end as stock,
         case when m.row_tid is null or cardinality($17::text[]) = 0 then m.attributes
              else nullif(coalesce(m.attributes, '{}'::jsonb) || coalesce(
                     (select jsonb_object_agg(e.key, e.value) from jsonb_each(m.old_attributes) e
                       where e.key = any ($17::text[])), '{}'::jsonb), '{}'::jsonb) end as attributes,
         m.old_name, m.old_price, m.old_currency, m.old_stock, m.old_attributes, m.row_tid
    from matched m
), `;

/**
 * What replaces the guards' CTEs of {@link WRITE_PAGE} for a connector with `"guards": false`:
 * the statement as it was before guards existed. Testing the guards on every row, holding
 * nothing, still cost about a tenth of an unchanged page's statement (a third plan
 * branch writing `ingestion_held`, flags on every row: bench/README.md, Guards), so a
 * connector that turned them off does not pay it.
 */
const UNGUARDED_WRITTEN = `${writtenCte("c.is_new or c.is_changed")}, `;
const UNGUARDED_COUNTS = countsCte("count(*) filter (where is_changed)::int", "0", "0");

/** `text` with the part from `start` to `end` (markers included) replaced by `by`. */
function splice(text: string, start: string, end: string, by: string): string {
  const from = text.indexOf(start);
  const to = text.indexOf(end, from);
  if (from < 0 || to < 0) throw new Error(`page statement: no ${start}…${end}`);
  return text.slice(0, from) + by + text.slice(to + end.length);
}

/**
 * The variant of {@link WRITE_PAGE} for a lease connection with or without a session,
 * guarded or not, keeping vanished fields or not, superseding earlier runs' held items or not.
 */
function pageStatement(sessionless: boolean, guarded: boolean, keep: boolean, supersede: boolean): string {
  let text = WRITE_PAGE;
  if (!guarded) {
    text = splice(text, "/*GUARDS*/", "/*END GUARDS*/", UNGUARDED_WRITTEN);
    text = splice(text, "/*COUNTS*/", "/*END COUNTS*/", UNGUARDED_COUNTS);
    text = text.replace(/\/\*HELD\*\/.*\n/, "");
  }
  if (sessionless) {
    // The seen set is durable on a sessionless connection (seen-set.ts).
    text = text.replace("insert into pg_temp.supplier_sync_run_seen", `insert into ${SEEN_TABLE}`);
  }
  if (keep) text = text.replace("/*KEPT*/", KEEP_STORED).replace("/*MATCHED*/matched", "kept");
  if (supersede) text = text.replace("/*SUPERSEDED*/", SUPERSEDE_EARLIER);
  return text;
}

const PAGE_STATEMENTS = new Map<string, string>();

function cachedPageStatement(
  sessionless: boolean,
  guarded: boolean,
  keep: boolean,
  supersede: boolean,
): string {
  const key = `${sessionless}:${guarded}:${keep}:${supersede}`;
  let text = PAGE_STATEMENTS.get(key);
  if (text === undefined) {
    text = pageStatement(sessionless, guarded, keep, supersede);
    PAGE_STATEMENTS.set(key, text);
  }
  return text;
}

/** One array element, double-quoted (backslash and quote escaped), or NULL. */
function element(value: string | number | null): string {
  if (value === null) return "NULL";
  if (typeof value === "number") return String(value);
  return `"${NEEDS_ESCAPE.test(value) ? value.replace(/["\\]/g, "\\$&") : value}"`;
}

const NEEDS_ESCAPE = /["\\]/;

/**
 * A column as a PostgreSQL array literal. The common column (no null, nothing to escape)
 * is one native `join` of the values themselves, which allocates the literal and
 * nothing else; any other column is built element by element.
 */
function literal(values: (string | number | null)[], quoted: boolean): string {
  // `values` is the caller's own scratch array: the fast path rewrites its ends.
  if (values.length === 0) return "{}";
  let plain = true;
  for (let i = 0; i < values.length && plain; i++) {
    const v = values[i] as string | number | null;
    plain = v !== null && (!quoted || !NEEDS_ESCAPE.test(v as string));
  }
  if (plain) {
    // The braces (and outer quotes) go onto the first and last values, so the join makes
    // the whole literal as one flat string: wrapping it afterwards made a rope that pg
    // flattened again, a second copy, to measure it (Buffer.byteLength).
    const last = values.length - 1;
    values[0] = quoted ? `{"${values[0]}` : `{${values[0]}`;
    values[last] = quoted ? `${values[last]}"}` : `${values[last]}}`;
    return values.join(quoted ? '","' : ",");
  }
  const items = new Array<string>(values.length);
  for (let i = 0; i < values.length; i++) items[i] = element(values[i] as string | number | null);
  return `{${items.join(",")}}`;
}

/**
 * The page's columns as PostgreSQL array literals. pg's own array serialisation
 * (`prepareValue`) costs several times more for a page (bench/README.md, Figures
 * behind code choices), and the statement casts the text (`$3::text[]`, …) as before.
 * The attributes column is null (no array at all: `unnest` pads it with nulls) when no
 * offer of the page has attributes, so connectors without them pay nothing for it.
 * Indexed loops and one join per column: this runs for every page, and its garbage
 * was the largest share of a walk's allocation (bench/README.md, Heap growth).
 */
export function arrayLiterals(offers: Offer[]): [string, string, string, string, string, string | null] {
  const n = offers.length;
  const sku = new Array<string>(n);
  const name = new Array<string | null>(n);
  const price = new Array<string | null>(n);
  const currency = new Array<string | null>(n);
  const stock = new Array<number | null>(n);
  let attributes: (string | null)[] | null = null;
  for (let i = 0; i < n; i++) {
    const o = offers[i] as Offer;
    sku[i] = o.sku;
    name[i] = o.name;
    price[i] = o.price;
    currency[i] = o.currency;
    stock[i] = o.stock;
    if (o.attributes) {
      attributes ??= new Array<string | null>(n).fill(null);
      attributes[i] = jsonbText(o.attributes);
    }
  }
  return [
    literal(sku, true),
    literal(name, true),
    literal(price, true),
    literal(currency, true),
    literal(stock, false),
    attributes && literal(attributes, true),
  ];
}

/** The page statement's columns `$3`–`$7`, `$12`: text literals ({@link arrayLiterals}) or binary arrays ({@link pageColumns}). */
export type PageColumns = [
  sku: string | Buffer,
  name: string | Buffer,
  price: string | Buffer,
  currency: string | Buffer,
  stock: string | Buffer,
  attributes: string | Buffer | null,
];

/**
 * The page's columns as binary arrays in the run's scratch buffer (binary-arrays.ts), a
 * price or stock column that has a value the binary form does not take as a text literal
 * instead: what {@link commitPage} sends. Read back by PostgreSQL as the
 * literals of {@link arrayLiterals} are (store/binary-arrays.pg.test.ts).
 */
export function pageColumns(offers: Offer[], arrays: BinaryArrays): PageColumns {
  arrays.begin();
  let attributed = false;
  for (let i = 0; i < offers.length && !attributed; i++) attributed = (offers[i] as Offer).attributes != null;
  const price = arrays.numeric(offers, priceOf);
  const stock = arrays.int4(offers, stockOf);
  return [
    arrays.text(offers, skuOf),
    arrays.text(offers, nameOf),
    price ?? literal(offers.map(priceOf), true),
    arrays.text(offers, currencyOf),
    stock ?? literal(offers.map(stockOf), false),
    attributed ? arrays.jsonb(offers, attributesOf) : null,
  ];
}

const skuOf = (o: Offer): string => o.sku;
const nameOf = (o: Offer): string | null => o.name;
const priceOf = (o: Offer): string | null => o.price;
const currencyOf = (o: Offer): string | null => o.currency;
const stockOf = (o: Offer): number | null => o.stock;
const attributesOf = (o: Offer): string | null => (o.attributes ? jsonbText(o.attributes) : null);

/** The page with one offer per SKU, the last occurrence winning (in first-seen order). */
export function lastOccurrences(offers: Offer[]): Offer[] {
  // Pages usually come sorted by SKU: strictly increasing SKUs cannot repeat, and checking
  // that costs a small fraction of building the map (bench/README.md, Figures behind code choices).
  let increasing = true;
  for (let i = 1; i < offers.length && increasing; i++) {
    increasing = (offers[i - 1] as Offer).sku < (offers[i] as Offer).sku;
  }
  if (increasing) return offers;
  const bySku = new Map<string, Offer>();
  for (const offer of offers) bySku.set(offer.sku, offer);
  return bySku.size === offers.length ? offers : [...bySku.values()];
}

/** The parameters of {@link WRITE_PAGE}, in order, for `page` (with its literals already built). */
export function writePageParameters(
  runId: number,
  supplier: string,
  page: Page,
  literals: PageColumns = arrayLiterals(lastOccurrences(page.offers)),
  guards: GuardSettings | null = null,
  fieldCoverage: string | null = null,
): unknown[] {
  const [sku, name, price, currency, stock, attributes] = literals;
  return [
    runId,
    supplier,
    sku,
    name,
    price,
    currency,
    stock,
    page.seq,
    serializeRejects(page.rejects),
    page.offers.length,
    page.rejects.length,
    attributes,
    guards === null ? null : String(guards.priceJumpFactor),
    guards?.currencyChange ?? false,
    fieldCoverage,
  ];
}

/**
 * Commits one page in ONE transaction: the step row `(run_id, seq)` marked succeeded
 * together with the page's data (offers upserted by content hash, one observation
 * per new/changed offer, rejects with their raw payload), what the guards held on it
 * (docs/connectors.md, Guards) and the run's counters and field coverage.
 * Must be called on the lease connection: the SKUs it saw are staged on that session
 * for `closeRun`'s delisting. `seen`, `fields`, `earlier` and `arrays` are the run
 * session's state for the run (fresh ones, by default, prepare the seen set again, count
 * coverage from this page on, look again for earlier runs' held items and allocate a
 * scratch buffer for the page's columns).
 *
 * Idempotent: re-committing a step that already succeeded (a retry after an
 * ambiguous commit) changes nothing and returns zero counts. Throws
 * `IngestionError('INTERRUPTED')` (and writes nothing) if the run is no longer
 * running: it was closed by recovery.
 */
export async function commitPage(
  client: pg.ClientBase,
  input: { runId: number; supplier: string; page: Page; guards?: GuardSettings | null },
  seen: SeenSetPreparation = new SeenSetPreparation(),
  fields: RunFieldState = new RunFieldState(),
  earlier: EarlierHolds = new EarlierHolds(),
  arrays: BinaryArrays = new BinaryArrays(),
): Promise<PageCounts> {
  const offers = lastOccurrences(input.page.offers);
  const { step, json } = fields.next(input.page.coverage);
  try {
    const counts = await writePage(client, { ...input, guards: input.guards ?? null }, offers, {
      seen,
      earlier,
      fields,
      arrays,
      step,
      coverageJson: json,
    });
    fields.committed(step);
    return counts;
  } catch (err) {
    seen.forget();
    throw err;
  }
}

interface PageState {
  seen: SeenSetPreparation;
  earlier: EarlierHolds;
  fields: RunFieldState;
  arrays: BinaryArrays;
  step: StepFields;
  coverageJson: string | null;
}

function writePage(
  client: pg.ClientBase,
  input: { runId: number; supplier: string; page: Page; guards: GuardSettings | null },
  offers: Offer[],
  state: PageState,
): Promise<PageCounts> {
  const { runId, supplier, page, guards } = input;
  return inTransaction(client, async (tx) => {
    const claim = await tx.query(CLAIM_STEP, [
      runId,
      page.seq,
      page.offers.length,
      page.httpAttempts,
      page.startedAt ?? null,
    ]);
    if (claim.rowCount === 0) return { ...ZERO_COUNTS, held: {} };
    await state.seen.prepare(tx, runId);
    const skus = offers.map((o) => o.sku);
    const heldFields =
      guards === null ? [] : await fieldsToHold(tx, supplier, skus, vanishedFields(page.coverage));
    const supersede = await state.earlier.any(tx, supplier, runId);
    // Built last, just before the statement: the columns are the page's largest values.
    const columns = pageColumns(offers, state.arrays);
    const parameters = writePageParameters(runId, supplier, page, columns, guards, state.coverageJson);
    if (heldFields.length > 0) parameters.push(...keepParameters(heldFields));
    const { rows } = await tx.query<{
      inserted: number;
      updated: number;
      unchanged: number;
      held_price: number;
      held_currency: number;
      run_updated: number;
      inserted_rows: number;
      updated_rows: number;
    }>(cachedPageStatement(isSessionless(tx), guards !== null, heldFields.length > 0, supersede), parameters);
    const row = rows[0];
    if (row && (row.inserted_rows !== row.inserted || row.updated_rows !== row.updated)) {
      // Only possible if someone else wrote this supplier's offers meanwhile: the lease was not exclusive.
      throw new IngestionError(
        "DATABASE",
        `page ${page.seq} of run ${runId}: offers changed concurrently (${row.updated_rows}/${row.updated} updated)`,
      );
    }
    if (row?.run_updated !== 1) {
      throw new IngestionError(
        "INTERRUPTED",
        `run ${runId} is no longer running: page ${page.seq} not committed`,
      );
    }
    for (const { field, stored } of heldFields) {
      const total = state.fields.hold(state.step, field, stored);
      await holdField(tx, { runId, supplier, seq: page.seq, skus, field, total });
    }
    const held: PageCounts["held"] = {};
    if (row.held_price > 0) held.price_jump = row.held_price;
    if (row.held_currency > 0) held.currency = row.held_currency;
    if (heldFields.length > 0) held.field = heldFields.length;
    return {
      seen: page.offers.length,
      inserted: row.inserted,
      updated: row.updated,
      unchanged: row.unchanged,
      rejected: page.rejects.length,
      held,
    };
  });
}

/**
 * Records a failed step (state failed, error code, HTTP attempts) and keeps its
 * rejects, if given: a page failed as CONTRACT for too many invalid records still
 * keeps them. Idempotent per `(run_id, seq)`: a second call, or a call for a step
 * that already succeeded, writes nothing. Rejects are counted on the run.
 */
export async function recordFailedStep(
  db: Queryable,
  input: {
    runId: number;
    supplier: string;
    seq: number;
    errorCode: string;
    httpAttempts: number;
    rejects?: Reject[];
    /** When the step began (its first request); absent: now. */
    startedAt?: Date;
  },
): Promise<void> {
  const rejects = input.rejects ?? [];
  await inTransaction(db, async (tx) => {
    const { rowCount } = await tx.query(
      `insert into ingestion_run_steps (run_id, seq, state, started_at, finished_at, records, http_attempts, error_code)
       values ($1, $2, 'failed', least(coalesce($5::timestamptz, now()), clock_timestamp()), clock_timestamp(), 0, $3, $4)
       on conflict (run_id, seq) do update
          set state = 'failed', started_at = excluded.started_at, finished_at = excluded.finished_at,
              http_attempts = excluded.http_attempts, error_code = excluded.error_code
        where ingestion_run_steps.state = 'running'
       returning 1`,
      [input.runId, input.seq, input.httpAttempts, input.errorCode, input.startedAt ?? null],
    );
    if (rowCount === 0 || rejects.length === 0) return;
    await tx.query(
      `with rejected as (
         insert into ingestion_rejects (run_id, supplier, seq, reason, raw)
         select $1, $2, $3, r.value->>'reason', r.value->'raw'
           from jsonb_array_elements($4::jsonb) as r(value)
         returning 1
       )
       update ingestion_runs set records_rejected = records_rejected + (select count(*) from rejected)
        where id = $1`,
      [input.runId, input.supplier, input.seq, serializeRejects(rejects)],
    );
  });
}

/**
 * Rejects as one JSON array parameter. The raw payload is whatever the supplier
 * sent, so it must survive jsonb: `\u0000` (which jsonb refuses) becomes U+FFFD,
 * a number literal a double could not hold (a `LosslessNumber`) is written as its
 * own digits (jsonb keeps numbers exactly; one beyond numeric's range as a string of
 * them), and a value JSON cannot express (a cycle) is kept as text.
 */
export function serializeRejects(rejects: Reject[]): string {
  const items = rejects.map(
    (r) => `{"reason":${JSON.stringify(stripNul(r.reason))},"raw":${rawJson(r.raw)}}`,
  );
  return `[${items.join(",")}]`;
}

function rawJson(raw: unknown): string {
  try {
    return stringifyForJsonb(raw) ?? "null";
  } catch {
    return JSON.stringify(stripNul(String(raw)));
  }
}
