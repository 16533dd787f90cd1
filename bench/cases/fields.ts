/**
 * What field specs cost (docs/connectors.md, Records and fields): CPU of validating 1,000 records (already
 * parsed: `normalizeRecords` alone, field coverage counted), in this one process,
 * repetitions alternating:
 * - dot paths, a JMESPath sum over ETM-shaped remains (3 stores and an `all` row,
 *   quantities as strings), `sum(values(residues))` over IEK-shaped residues, and dot
 *   paths with four attributes (one a JMESPath projection): this build, and with
 *   `--baseline DIR` the same specs on that build (`*_before`, its own compiled specs);
 * - this build's `sum` + `else` (the shipped etm.json's stock) and `nullWhen` (iek.json's
 *   price on request), against dot paths.
 */
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import * as currentSpecs from "../../internal/connectors/records/field-spec.js";
import * as current from "../../internal/connectors/records/normalize.js";
import { Catalog } from "../../internal/simulator/catalog.js";
import { type Measurement, measurement } from "../measure.js";
import type { CaseContext } from "./context.js";

type NormalizeModule = Pick<typeof current, "normalizeRecords">;
type SpecModule = Pick<typeof currentSpecs, "compileFields">;
type Validate = (records: unknown[]) => { offers: unknown[] };

const DOT_PATHS = {
  sku: "article",
  name: "title",
  price: "price.value",
  currency: "price.currency",
  stock: "stock.total",
};

/** Field mappings both builds understand: name → [fields, attributes]. */
const SHARED: Record<string, [Record<string, unknown>, Record<string, unknown> | undefined]> = {
  dot: [DOT_PATHS, undefined],
  jmespath: [
    { ...DOT_PATHS, stock: { jmespath: "sum(InfoStores[?StoreType!='all'].to_number(StoreQuantRem))" } },
    undefined,
  ],
  jmespath_values: [{ ...DOT_PATHS, stock: { jmespath: "sum(values(residues))" } }, undefined],
  attributes: [
    DOT_PATHS,
    { brand: "brand", unit: "unit", vat: "vat", stores: { jmespath: "InfoStores[].StoreCode" } },
  ],
};

/** Field mappings of this build only. */
const NEW: Record<string, Record<string, unknown>> = {
  etm_stock: {
    ...DOT_PATHS,
    stock: {
      jmespath: "InfoStores[?StoreType=='all'] | [0].StoreQuantRem",
      else: { jmespath: "InfoStores[?StoreType!='all'].StoreQuantRem", sum: true },
    },
  },
  sum_path: { ...DOT_PATHS, stock: { path: "residues", sum: true } },
  null_when: {
    ...DOT_PATHS,
    price: { path: "price.value", nullWhen: { path: "extra", contains: "Цена по запросу" } },
  },
};

const LABELS: Record<string, string> = {
  dot: "dot paths",
  jmespath: "stock by a JMESPath sum over ETM remains",
  jmespath_values: "stock by JMESPath sum(values(residues)) (IEK)",
  attributes: "dot paths + 4 attributes (one JMESPath)",
  etm_stock: "stock by etm.json's all row else sum: true",
  sum_path: "stock by sum: true over IEK residues",
  null_when: "price with nullWhen contains (iek.json)",
};

/** ms of CPU per 1,000 records; throws if any record was rejected. */
function cpuPer1000(records: unknown[], validate: Validate): number {
  const start = process.cpuUsage();
  const { offers } = validate(records);
  const used = process.cpuUsage(start);
  if (offers.length !== records.length) throw new Error("bench records were rejected");
  return (used.user + used.system) / records.length;
}

function variantsOf(normalize: NormalizeModule, specs: SpecModule, suffix: string): [string, Validate][] {
  return Object.entries(SHARED).map(([name, [fields, attributes]]) => {
    const compiled = specs.compileFields(fields as never, attributes as never);
    return [`${name}${suffix}`, (r: unknown[]) => normalize.normalizeRecords(r, compiled)];
  });
}

export async function measureFields(
  ctx: CaseContext,
  baselineDir: string | undefined,
): Promise<Measurement[]> {
  const n = 50_000;
  const catalog = new Catalog(ctx.catalog.supplier, n);
  const records: unknown[] = catalog.slice(0, n).map((r, i) => ({
    ...r,
    InfoStores: [
      ...[0, 1, 2].map((s) => ({
        StoreCode: String(s),
        StoreType: "rc",
        StoreQuantRem: String((i + s) % 50),
      })),
      { StoreCode: "all", StoreType: "all", StoreQuantRem: String((3 * i + 3) % 150) },
    ],
    residues: { "1": i % 7, "2": i % 11, "3": i % 13 },
    extra: i % 7 === 0 ? "Цена по запросу" : "",
    brand: "ETM",
    unit: "pcs",
    vat: 20,
  }));
  const variants = variantsOf(current, currentSpecs, "");
  for (const [name, fields] of Object.entries(NEW)) {
    const compiled = currentSpecs.compileFields(fields as never, undefined);
    variants.push([name, (r) => current.normalizeRecords(r, compiled)]);
  }
  if (baselineDir) {
    const dist = (file: string) => pathToFileURL(join(baselineDir, "dist/internal/connectors", file)).href;
    const before = (await import(dist("normalize.js"))) as NormalizeModule;
    const specs = (await import(dist("field-spec.js"))) as SpecModule;
    variants.push(...variantsOf(before, specs, "_before"));
  }
  const samples = new Map<string, number[]>();
  for (let warm = 0; warm < 3; warm++) for (const [, run] of variants) cpuPer1000(records, run);
  for (let rep = 0; rep < 5 * ctx.repetitions; rep++) {
    const order = rep % 2 === 0 ? variants : [...variants].reverse();
    for (const [name, run] of order)
      samples.set(name, [...(samples.get(name) ?? []), cpuPer1000(records, run)]);
  }
  const of = (name: string, label: string) =>
    measurement(
      `fields.${name}`,
      `Fields: validate 1,000 records, ${label}`,
      "ms/1k",
      samples.get(name) ?? [],
    );
  const dot = of("dot", `${LABELS.dot} (this build)`);
  const results = [dot];
  for (const name of [...Object.keys(SHARED), ...Object.keys(NEW)]) {
    const m = name === "dot" ? dot : of(name, LABELS[name] as string);
    if (name !== "dot") {
      m.details.over_dot = m.median / dot.median;
      results.push(m);
    }
    if (baselineDir && name in SHARED) {
      const b = of(`${name}_before`, `${LABELS[name]} (baseline build)`);
      m.details.after_over_before = m.median / b.median;
      results.push(b);
    }
  }
  ctx.progress(
    `fields: ${results.map((m) => `${m.id} ${m.median.toFixed(3)}`).join(", ")} ms per 1,000 records`,
  );
  return results;
}
