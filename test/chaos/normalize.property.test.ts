// Issue 9, scenario 8: property tests of record normalisation (docs/connectors.md, Records and fields; docs/failure-modes.md, Suppliers). Whatever a
// supplier sends, normalizeRecord never throws: it returns an offer that holds every
// column invariant, or a reject that keeps the raw record and names the field.
import fc from "fast-check";
import { normalizeRecord } from "../../internal/connectors/records/normalize.js";
import type { Offer } from "../../internal/ingestion/ports.js";
import { SIM_FIELDS } from "../helpers/fixtures.js";
import { scenario } from "./helpers/scenario.js";

const fields = SIM_FIELDS;
const RUNS = 3_000;

function assertValidOffer(offer: Offer): void {
  if (offer.sku.length === 0 || offer.sku.length > 256 || offer.sku !== offer.sku.trim()) {
    throw new Error(`bad sku ${JSON.stringify(offer.sku)}`);
  }
  // No nullIf in these fields: a price is never null.
  if (
    offer.price === null ||
    offer.price.length > 100 ||
    !/^\+?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(offer.price)
  )
    throw new Error(`bad price ${offer.price}`);
  if (offer.currency !== null && !/^[A-Z]{3}$/.test(offer.currency))
    throw new Error(`bad currency ${offer.currency}`);
  if (
    offer.stock !== null &&
    (!Number.isSafeInteger(offer.stock) || offer.stock < 0 || offer.stock > 2_147_483_647)
  ) {
    throw new Error(`bad stock ${offer.stock}`);
  }
  if (offer.name !== null && (offer.name.length > 1_000 || /[\u0000-\u001f\u007f]/.test(offer.name))) {
    throw new Error(`bad name ${JSON.stringify(offer.name)}`);
  }
}

/** Values that sit on and around every boundary of the field rules. */
const edgy = fc.oneof(
  fc.constantFrom(
    "",
    " ",
    "0",
    "-1",
    "1e3",
    "NaN",
    "Infinity",
    "12.3456789",
    "1234567890123456",
    "0.000001",
    " 7.50 ",
    "EUR",
    "eur",
    "EURO",
    "€",
    null,
    true,
    [],
    {},
    -0,
    2 ** 31,
    2 ** 53,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    1e21,
    0.1 + 0.2,
    "\u0000",
    "a".repeat(300),
    "__proto__",
  ),
  fc.string(),
  fc.double(),
  fc.integer(),
  fc.anything({ maxDepth: 2 }),
);

/** Records shaped like the simulator's, each field valid, edgy, or absent. */
const shaped = fc.record(
  {
    article: fc.oneof(fc.stringMatching(/^[A-Z]{2}-\d{1,6}$/), fc.nat(), edgy),
    title: fc.oneof(fc.string(), edgy),
    price: fc.oneof(
      fc.record({
        value: fc.oneof(fc.stringMatching(/^\d{1,6}(\.\d{1,2})?$/), fc.nat({ max: 100_000 }), edgy),
        currency: fc.oneof(fc.constantFrom("EUR", "USD", "rub"), edgy),
      }),
      edgy,
    ),
    stock: fc.oneof(fc.record({ total: fc.oneof(fc.nat({ max: 1_000_000 }), edgy) }), edgy),
  },
  { requiredKeys: [] },
);

scenario(
  "8. property: normalizeRecord never crashes, offer valid or reject named",
  { timeoutMs: 120_000 },
  async (t) => {
    const check = (raw: unknown) => {
      const result = normalizeRecord(raw, fields);
      if ("offer" in result) assertValidOffer(result.offer);
      else {
        if (!Object.is(result.reject.raw, raw)) throw new Error("the reject does not keep the raw record");
        if (!/^(sku|price|currency|stock|name) \(|^record is not an object/.test(result.reject.reason)) {
          throw new Error(`reject reason names no field: ${result.reject.reason}`);
        }
      }
    };
    t.doesNotThrow(() => fc.assert(fc.property(shaped, check), { numRuns: RUNS }), "shaped records");
    t.doesNotThrow(() => fc.assert(fc.property(fc.anything(), check), { numRuns: RUNS }), "anything at all");
    t.doesNotThrow(
      () =>
        fc.assert(
          fc.property(
            fc.stringMatching(/^\d{1,40}(\.\d{1,40})?([eE][+-]?\d{1,3})?$/),
            fc.stringMatching(/^[A-Z]{2}-\d{1,6}$/),
            (price, sku) => {
              const r = normalizeRecord({ article: sku, price: { value: price, currency: "EUR" } }, fields);
              if (!("offer" in r)) throw new Error(`valid record rejected: ${r.reject.reason}`);
              // Exact decimals: a price string is stored as sent, never through a float.
              if (r.offer.price !== price || r.offer.sku !== sku)
                throw new Error(`changed: ${JSON.stringify(r.offer)}`);
            },
          ),
          { numRuns: RUNS },
        ),
      "valid records always become offers, price kept exactly",
    );
    return ["never a crash", "offer columns valid", "reject keeps raw + names field", "exact prices"];
  },
);
