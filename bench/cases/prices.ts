/**
 * What exact prices cost (docs/connectors.md, Records and fields): the whole pipeline over HTTP, first load and
 * unchanged re-sync, for
 * - ordinary pages (prices as short JSON strings, the bench catalog) with this build
 *   and, given `--baseline DIR` (a checkout of an earlier commit, built, with its
 *   `node_modules`), with that build: the two alternate within each repetition, so
 *   both see the same machine; reported as after/before ratios;
 * - pages full of long numbers: every price a JSON number literal of 20–30
 *   significant digits, which no double holds, so every page is parsed
 *   number-exact; and the same long decimals as JSON strings (plain `JSON.parse`).
 *   Reported against the ordinary pages of the same build and run.
 * - the worker's CPU for one ordinary page alone: decode (limit scan + parse) and
 *   validation of the same page texts, this build's modules against the baseline's,
 *   alternating in this one process. The pipeline figures swing with whatever else
 *   the shared machine runs; this one isolates the code that changed.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import * as currentNormalize from "../../internal/connectors/records/normalize.js";
import * as currentDecode from "../../internal/platform/json-body.js";
import { Catalog, skuOf } from "../../internal/simulator/catalog.js";
import { startSimulator } from "../../internal/simulator/index.js";
import type { Simulator } from "../../internal/simulator/types.js";
import { runWorker, writeConnectors } from "../child.js";
import { resetTables } from "../database.js";
import { type Measurement, measurement, rowsPerSecond } from "../measure.js";
import type { CaseContext } from "./context.js";

type PriceShape = "plain" | "long-number" | "long-string";

/** A price of 20–30 significant digits, deterministic per offer index. */
function longPrice(index: number): string {
  const integer = String(1000 + (index % 90_000));
  const fraction = String(index * 7_919 + 1)
    .padStart(8, "0")
    .repeat(2)
    .slice(0, 16 + (index % 7));
  return `${integer}.${fraction}1`;
}

function configure(
  sim: Simulator,
  supplier: string,
  size: number,
  pageSize: number,
  shape: PriceShape,
): void {
  sim.configure(supplier, { size, pageSize, priceFormat: shape === "long-number" ? "number" : "string" });
  if (shape === "plain") return;
  const prices: Record<string, string> = {};
  for (let i = 0; i < size; i++) prices[skuOf(supplier, i)] = longPrice(i);
  sim.mutate(supplier, { setPrices: prices });
}

const FIELDS = {
  sku: "article",
  name: "title",
  price: "price.value",
  currency: "price.currency",
  stock: "stock.total",
};

type DecodeModule = Pick<typeof currentDecode, "decodeJsonPage">;
type NormalizeModule = Pick<typeof currentNormalize, "normalizeRecords">;

/** ms of CPU per page to decode and validate `pages` with one build's modules. */
function decodeAndValidate(pages: Buffer[], decode: DecodeModule, normalize: NormalizeModule): number {
  const limits = { maxDepth: 64, maxRecords: 100_000, recordsPath: "data.items" };
  const start = process.cpuUsage();
  for (const body of pages) {
    const { records } = decode.decodeJsonPage(body, "application/json", limits);
    const { offers } = normalize.normalizeRecords(records, FIELDS);
    if (offers.length !== records.length) throw new Error("bench page had rejects");
  }
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000 / pages.length;
}

async function measureDecode(ctx: CaseContext, baselineDir: string): Promise<Measurement[]> {
  const base = (file: string) =>
    import(pathToFileURL(join(baselineDir, "dist/internal/connectors", file)).href);
  const before = {
    decode: (await base("json-body.js")) as DecodeModule,
    normalize: (await base("normalize.js")) as NormalizeModule,
  };
  const after = { decode: currentDecode, normalize: currentNormalize };
  const catalog = new Catalog(ctx.catalog.supplier, 40 * ctx.catalog.pageSize);
  const pages: Buffer[] = [];
  for (let from = 0; from < catalog.liveCount; from += ctx.catalog.pageSize) {
    pages.push(
      Buffer.from(JSON.stringify({ data: { items: catalog.slice(from, from + ctx.catalog.pageSize) } })),
    );
  }
  // The same pages with every price a long JSON number literal (as the simulator writes them).
  const prices: Record<string, string> = {};
  for (let i = 0; i < catalog.liveCount; i++) prices[skuOf(ctx.catalog.supplier, i)] = longPrice(i);
  catalog.setPrices(prices);
  const longPages: Buffer[] = [];
  for (let from = 0; from < catalog.liveCount; from += ctx.catalog.pageSize) {
    const text = JSON.stringify({ data: { items: catalog.slice(from, from + ctx.catalog.pageSize) } });
    longPages.push(Buffer.from(text.replace(/"value":"([0-9.]+)"/g, '"value":$1')));
  }
  const samples = { before: [] as number[], after: [] as number[], long: [] as number[] };
  // Warm-up: both builds' code optimised before anything is counted.
  for (let i = 0; i < 3; i++) {
    decodeAndValidate(pages, before.decode, before.normalize);
    decodeAndValidate(pages, after.decode, after.normalize);
  }
  for (let rep = 0; rep < 5 * ctx.repetitions; rep++) {
    const order = rep % 2 === 0 ? (["before", "after"] as const) : (["after", "before"] as const);
    for (const which of order) {
      const build = which === "before" ? before : after;
      samples[which].push(decodeAndValidate(pages, build.decode, build.normalize));
    }
    if (rep % 2 === 0) samples.long.push(decodeAndValidate(longPages, after.decode, after.normalize));
  }
  const a = measurement(
    "prices.decode_validate",
    "Prices: decode + validate one ordinary page, CPU (this build)",
    "ms/page",
    samples.after,
  );
  const b = measurement(
    "prices.decode_validate_before",
    "Prices: decode + validate one ordinary page, CPU (baseline build)",
    "ms/page",
    samples.before,
  );
  a.details.after_over_before = a.median / b.median;
  const long = measurement(
    "prices.decode_validate_long",
    "Prices: decode + validate one page of long JSON numbers, CPU (this build)",
    "ms/page",
    samples.long,
  );
  long.details.over_ordinary = long.median / a.median;
  ctx.progress(
    `prices decode+validate: ${a.median.toFixed(2)} ms/page against ${b.median.toFixed(2)} before; long JSON numbers ${long.median.toFixed(2)}`,
  );
  return [a, b, long];
}

export async function measurePrices(
  ctx: CaseContext,
  baselineDir: string | undefined,
): Promise<Measurement[]> {
  const results: Measurement[] = baselineDir ? await measureDecode(ctx, baselineDir) : [];
  const { size, pageSize, supplier } = ctx.catalog;
  const sim = await startSimulator();
  const dir = writeConnectors({
    [supplier]: { baseUrl: sim.baseUrl(supplier), limit: pageSize, requestsPerSecond: 10_000, burst: 10_000 },
  });
  const env = {
    SUPPLIER_SYNC_SUPPLIERS: `${supplier}:1h`,
    DATABASE_URL: ctx.url,
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
    SUPPLIER_SYNC_LOG_LEVEL: "warn",
    SUPPLIER_SYNC_HTTP_ADDR: "127.0.0.1:0",
  };
  const builds: [string, string | undefined][] = [["after", undefined]];
  if (baselineDir) builds.push(["before", join(baselineDir, "dist/bench/worker.js")]);
  const samples = new Map<string, number[]>();
  const add = (key: string, value: number) => samples.set(key, [...(samples.get(key) ?? []), value]);
  const walk = async (key: string, shape: PriceShape, worker: string | undefined) => {
    await resetTables(ctx.pool);
    configure(sim, supplier, size, pageSize, shape);
    for (const phase of ["first", "unchanged"]) {
      const report = await runWorker(env, 600_000, worker);
      const outcome = report.results[0]?.outcome;
      if (outcome !== "success") throw new Error(`prices ${key} ${phase}: tick ${outcome}`);
      const counts = report.results[0]?.counts;
      if (counts && counts.rejected > 0)
        throw new Error(`prices ${key} ${phase}: ${counts.rejected} rejects`);
      add(`${key}.${phase}`, rowsPerSecond(size, report.tickMs));
    }
  };
  try {
    for (let rep = 1; rep <= ctx.repetitions; rep++) {
      // Alternate which build goes first, so neither always runs on a warmer machine.
      const order = rep % 2 === 0 ? [...builds].reverse() : builds;
      for (const [name, worker] of order) await walk(`plain.${name}`, "plain", worker);
      await walk("long_number", "long-number", undefined);
      await walk("long_string", "long-string", undefined);
      ctx.progress(
        `prices rep ${rep}: ${[...samples].map(([k, v]) => `${k} ${Math.round(v.at(-1) ?? 0)}`).join(", ")} rows/s`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await sim.close();
  }
  const get = (key: string) => samples.get(key) ?? [];
  for (const phase of ["first", "unchanged"] as const) {
    const after = measurement(
      `prices.plain.${phase}`,
      `Prices: ordinary pages, ${phase} (this build)`,
      "rows/s",
      get(`plain.after.${phase}`),
    );
    results.push(after);
    if (baselineDir) {
      const before = measurement(
        `prices.plain_before.${phase}`,
        `Prices: ordinary pages, ${phase} (baseline build)`,
        "rows/s",
        get(`plain.before.${phase}`),
      );
      after.details.after_over_before = after.median / before.median;
      results.push(before);
    }
    for (const [key, label] of [
      ["long_number", "every price a 20–30 digit JSON number"],
      ["long_string", "every price a 20–30 digit JSON string"],
    ] as const) {
      const m = measurement(
        `prices.${key}.${phase}`,
        `Prices: ${label}, ${phase}`,
        "rows/s",
        get(`${key}.${phase}`),
      );
      m.details.over_plain = m.median / after.median;
      results.push(m);
    }
  }
  return results;
}
