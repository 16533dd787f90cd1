/**
 * What the guards would hold (docs/connectors.md, Guards), for `preview`: the same tests as a
 * run's (guard-sql.ts, field-guard.ts, the delisting verdict), computed read-only
 * against the stored catalog. Nothing is written.
 */
import type { FieldCoverage, GuardSettings, Offer } from "../ingestion/ports.js";
import { delistReason } from "./delisting.js";
import { fieldsToHold, vanishedFields } from "./field-guard.js";
import { currencySwitchedSql, heldReasonSql, priceJumpedSql } from "./guard-sql.js";
import { arrayLiterals, lastOccurrences } from "./offers.js";
import type { Queryable } from "./queryable.js";

/** What a walk's steps would have held, had a run written them. */
export interface GuardPreview {
  offers: { seq: number; sku: string; kind: "price_jump" | "currency"; reason: string }[];
  fields: { seq: number; field: string; reason: string }[];
  /** Known only for a walk that reached the end of the catalog. */
  delist: { listed: number; missing: number; held: boolean; reason: string | null } | null;
}

const HELD_OFFERS = `
with page as (
  select u.sku, u.price, u.currency from unnest($2::text[], $3::numeric[], $4::text[]) as u(sku, price, currency)
), compared as (
  select p.sku, p.price, p.currency, s.price as old_price, s.currency as old_currency
    from page p join supplier_offers s on s.supplier = $1 and s.sku = p.sku
), flagged as (
  select c.*, ${priceJumpedSql("c.price", "c.old_price", "$5::numeric")} as price_jumped,
         ${currencySwitchedSql("c.currency", "c.old_currency", "$6::boolean")} as currency_switched
    from compared c
)
select f.sku, case when f.currency_switched then 'currency' else 'price_jump' end as kind,
       ${heldReasonSql("f", "f.price_jumped", "f.currency_switched")} as reason
  from flagged f where f.price_jumped or f.currency_switched order by f.sku`;

/** The guards' verdict on `steps`, read against `db`'s catalog of `supplier`. */
export async function previewHolds(
  db: Queryable,
  input: {
    supplier: string;
    guards: GuardSettings;
    steps: { seq: number; offers: Offer[]; coverage?: FieldCoverage[] | undefined }[];
    complete: boolean;
  },
): Promise<GuardPreview> {
  const { supplier, guards } = input;
  const out: GuardPreview = { offers: [], fields: [], delist: null };
  const seen = new Set<string>();
  for (const step of input.steps) {
    const offers = lastOccurrences(step.offers);
    for (const o of offers) seen.add(o.sku);
    if (offers.length === 0) continue;
    const [sku, , price, currency] = arrayLiterals(offers);
    const { rows } = await db.query<{ sku: string; kind: "price_jump" | "currency"; reason: string }>(
      HELD_OFFERS,
      [supplier, sku, price, currency, String(guards.priceJumpFactor), guards.currencyChange],
    );
    for (const r of rows) out.offers.push({ seq: step.seq, ...r });
    const held = await fieldsToHold(
      db,
      supplier,
      offers.map((o) => o.sku),
      vanishedFields(step.coverage),
    );
    for (const { field, stored } of held) {
      out.fields.push({
        seq: step.seq,
        field: field.field,
        reason: `${field.field}: ${field.source} matched nothing in ${field.records} of ${field.records} records (${stored} offers have it stored)`,
      });
    }
  }
  if (input.complete) {
    const { rows } = await db.query<{ listed: number; missing: number; held: boolean }>(
      `select v.listed, v.missing, (v.missing > v.listed * $3::numeric and v.missing > $4::int) as held
         from (select count(*) filter (where delisted_at is null)::int as listed,
                      count(*) filter (where delisted_at is null and not (sku = any ($2::text[])))::int as missing
                 from supplier_offers where supplier = $1) v`,
      [supplier, [...seen], String(guards.maxDelistRatio), guards.minDelistCount],
    );
    const v = rows[0] ?? { listed: 0, missing: 0, held: false };
    out.delist = {
      ...v,
      reason: v.held
        ? delistReason({ listed: v.listed, missing: v.missing, applied: false, delisted: 0 }, guards)
        : null,
    };
  }
  return out;
}
