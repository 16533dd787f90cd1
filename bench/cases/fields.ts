/**
 * What field specs cost (docs/connectors.md, Records and fields): CPU of validating 1,000 records (already
 * parsed: `normalizeRecords` alone), in this one process, repetitions alternating:
 * - dot-path fields, this build against `--baseline DIR`'s build (when given): the
 *   connectors of before keep their cost;
 * - the same record shape read through JMESPath (`sum(InfoStores[].Remain)` on
 *   ETM-shaped remains with 4 stores; `sum(values(residues))` on IEK-shaped residues
 *   of 3 stores) and with four attributes, against dot paths.
 */
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { compileFields } from "../../internal/connectors/field-spec.js";
import * as current from "../../internal/connectors/normalize.js";
import { Catalog } from "../../internal/simulator/catalog.js";
import { type Measurement, measurement } from "../measure.js";
import type { CaseContext } from "./context.js";

type NormalizeModule = Pick<typeof current, "normalizeRecords">;

const DOT_PATHS = {
  sku: "article",
  name: "title",
  price: "price.value",
  currency: "price.currency",
  stock: "stock.total",
};

/** ms of CPU per 1,000 records; throws if any record was rejected. */
function cpuPer1000(records: unknown[], validate: (records: unknown[]) => { offers: unknown[] }): number {
  const start = process.cpuUsage();
  const { offers } = validate(records);
  const used = process.cpuUsage(start);
  if (offers.length !== records.length) throw new Error("bench records were rejected");
  return (used.user + used.system) / records.length;
}

export async function measureFields(
  ctx: CaseContext,
  baselineDir: string | undefined,
): Promise<Measurement[]> {
  const n = 50_000;
  const catalog = new Catalog(ctx.catalog.supplier, n);
  const records: unknown[] = catalog.slice(0, n).map((r, i) => ({
    ...r,
    InfoStores: [0, 1, 2, 3].map((s) => ({ StoreCode: String(s), StoreType: "rc", Remain: (i + s) % 50 })),
    residues: { "1": i % 7, "2": i % 11, "3": i % 13 },
    brand: "ETM",
    unit: "pcs",
    vat: 20,
  }));
  const jmespath = compileFields(
    { ...DOT_PATHS, stock: { jmespath: "sum(InfoStores[].Remain)" } },
    undefined,
  );
  const jmespathValues = compileFields(
    { ...DOT_PATHS, stock: { jmespath: "sum(values(residues))" } },
    undefined,
  );
  const attributes = compileFields(DOT_PATHS, {
    brand: "brand",
    unit: "unit",
    vat: "vat",
    stores: { jmespath: "InfoStores[].StoreCode" },
  });
  const before = baselineDir
    ? ((await import(
        pathToFileURL(join(baselineDir, "dist/internal/connectors/normalize.js")).href
      )) as NormalizeModule)
    : undefined;
  const variants: [string, (records: unknown[]) => { offers: unknown[] }][] = [
    ["dot", (r) => current.normalizeRecords(r, DOT_PATHS)],
    ["jmespath", (r) => current.normalizeRecords(r, jmespath)],
    ["jmespath_values", (r) => current.normalizeRecords(r, jmespathValues)],
    ["attributes", (r) => current.normalizeRecords(r, attributes)],
  ];
  if (before) variants.push(["dot_before", (r) => before.normalizeRecords(r, DOT_PATHS)]);
  const samples = new Map<string, number[]>();
  for (let warm = 0; warm < 3; warm++) for (const [, run] of variants) cpuPer1000(records, run);
  for (let rep = 0; rep < 5 * ctx.repetitions; rep++) {
    const order = rep % 2 === 0 ? variants : [...variants].reverse();
    for (const [name, run] of order)
      samples.set(name, [...(samples.get(name) ?? []), cpuPer1000(records, run)]);
  }
  const dot = measurement(
    "fields.dot",
    "Fields: validate 1,000 records, dot paths (this build)",
    "ms/1k",
    samples.get("dot") ?? [],
  );
  const results = [dot];
  if (before) {
    const b = measurement(
      "fields.dot_before",
      "Fields: validate 1,000 records, dot paths (baseline build)",
      "ms/1k",
      samples.get("dot_before") ?? [],
    );
    dot.details.after_over_before = dot.median / b.median;
    results.push(b);
  }
  for (const [name, label] of [
    ["jmespath", "stock by JMESPath sum(InfoStores[].Remain)"],
    ["jmespath_values", "stock by JMESPath sum(values(residues)) (IEK)"],
    ["attributes", "dot paths + 4 attributes (one JMESPath)"],
  ] as const) {
    const m = measurement(
      `fields.${name}`,
      `Fields: validate 1,000 records, ${label}`,
      "ms/1k",
      samples.get(name) ?? [],
    );
    m.details.over_dot = m.median / dot.median;
    results.push(m);
  }
  ctx.progress(
    `fields: ${results.map((m) => `${m.id} ${m.median.toFixed(3)}`).join(", ")} ms per 1,000 records`,
  );
  return results;
}
