import type { FieldCoverage } from "../../ingestion/ports.js";
import type { CompiledField, CompiledFields } from "./field-spec.js";

/**
 * Field coverage (docs/connectors.md, Field coverage): per mapped field except `sku`,
 * how many of a step's records gave it a value. What the vanished-field guard and
 * `ingestion_runs.field_coverage` read, and what `preview` prints.
 *
 * A value is what the path or expression found (`sum` and `else` applied), non-null,
 * counted before `nullIf` / `nullWhen`: a price on request was sent, so it counts. A
 * record that is not an object, or whose read failed, gives no value. Records are the
 * step's records, offers and rejects alike; an enriched field counts on the merged
 * record (no enrichment record for a SKU: no value).
 *
 * The plan is built once per connector, so counting costs an increment per field per
 * record: slots 0–3 are the fixed fields, then one slot per attribute name.
 */

/** Slots of the fixed fields in a count array. */
export const SLOT = { price: 0, name: 1, currency: 2, stock: 3 } as const;
const FIXED = ["price", "name", "currency", "stock"] as const;
/** The first attribute slot: the connector's own attributes take slots from here in definition order. */
export const FIXED_SLOTS = FIXED.length;

/** The fields and attributes one `enrich` entry maps, in definition order. */
export interface EnrichMapping {
  fields: readonly [string, CompiledField][];
  attributes: readonly [string, CompiledField][];
}

export interface CoveragePlan {
  /** The mapped fields in report order: fixed fields, then attributes. */
  readonly entries: readonly { field: string; source: string; slot: number }[];
  /** Attribute name → slot. */
  readonly attributeSlots: ReadonlyMap<string, number>;
  /** Length of a count array. */
  readonly size: number;
}

const plans = new WeakMap<CompiledFields, CoveragePlan>();

/**
 * The plan of a mapping and its enrichments. A field an enrichment maps is reported
 * with the enrichment's source (the later entry wins, as in the merge).
 */
export function coveragePlan(mapping: CompiledFields, enrich?: readonly EnrichMapping[]): CoveragePlan {
  const cached = enrich === undefined ? plans.get(mapping) : undefined;
  if (cached) return cached;
  const fixed = new Map<string, string>();
  for (const name of FIXED) {
    const field = mapping[name];
    if (field !== undefined) fixed.set(name, field.source);
  }
  const attributes = new Map<string, string>(mapping.attributes.map(([name, f]) => [name, f.source]));
  for (const entry of enrich ?? []) {
    for (const [name, field] of entry.fields) fixed.set(name, field.source);
    for (const [name, field] of entry.attributes) attributes.set(name, field.source);
  }
  const entries: { field: string; source: string; slot: number }[] = FIXED.flatMap((name) => {
    const source = fixed.get(name);
    return source === undefined ? [] : [{ field: name, source, slot: SLOT[name] }];
  });
  const attributeSlots = new Map<string, number>();
  for (const [name, source] of attributes) {
    const slot = FIXED_SLOTS + attributeSlots.size;
    attributeSlots.set(name, slot);
    entries.push({ field: `attributes.${name}`, source, slot });
  }
  const plan = { entries, attributeSlots, size: FIXED_SLOTS + attributeSlots.size };
  if (enrich === undefined) plans.set(mapping, plan);
  return plan;
}

/** A fresh count array for one step. */
export function newCounts(plan: CoveragePlan): number[] {
  return new Array<number>(plan.size).fill(0);
}

/** The step's coverage: one entry per mapped field, `records` the step's record count. */
export function coverageOf(plan: CoveragePlan, counts: readonly number[], records: number): FieldCoverage[] {
  return plan.entries.map((e) => ({
    field: e.field,
    source: e.source,
    records,
    withValue: counts[e.slot] ?? 0,
  }));
}
