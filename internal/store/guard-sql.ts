/**
 * The guards' per-offer tests as SQL (docs/connectors.md, Guards), shared by the page statement
 * (offers.ts) and `preview`'s read-only check (guard-preview.ts), so that what preview
 * says would be held is what a run holds.
 *
 * Prices are `numeric` on both sides and the factor is a `numeric` parameter: the
 * comparison is exact (`0.1 -> 0.3` is exactly x3). A fall is tested as
 * `new * factor <= old`, never as a division, which would round.
 */

/** True when the new price jumped by the factor or more either way (both prices known and different). */
export function priceJumpedSql(now: string, stored: string, factor: string): string {
  return `(${stored} is not null and ${now} is not null and ${now} <> ${stored}
           and (${now} >= ${stored} * ${factor} or ${now} * ${factor} <= ${stored}))`;
}

/** True when the currency differs from a stored one (and the guard is on). */
export function currencySwitchedSql(now: string, stored: string, on: string): string {
  return `(${on} and ${stored} is not null and ${now} is distinct from ${stored})`;
}

/**
 * The reason of a held offer: `currency EUR -> USD`, `price 12.50 -> 1250.00 (x100)`,
 * `price 100 -> 10 (/10)`, `price 5.00 -> 0 (to 0)`, or both joined by `; `.
 * `r` is a row with `price`, `currency`, `old_price`, `old_currency` and the two flags.
 */
export function heldReasonSql(r: string, jumped: string, switched: string): string {
  return `concat_ws('; ',
           case when ${switched} then format('currency %s -> %s', ${r}.old_currency, coalesce(${r}.currency, 'none')) end,
           case when ${jumped} then format('price %s -> %s (%s)', ${r}.old_price, ${r}.price,
             case when ${r}.old_price = 0 then 'from 0'
                  when ${r}.price = 0 then 'to 0'
                  when ${r}.price > ${r}.old_price then 'x' || trim_scale(round(${r}.price / ${r}.old_price, 2))
                  else '/' || trim_scale(round(${r}.old_price / ${r}.price, 2)) end) end)`;
}
