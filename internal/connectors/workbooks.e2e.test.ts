import type pg from "pg";
import t, { type Test } from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { forcedTick, tickDeps } from "../../test/helpers/tick.js";
import { startSimulator } from "../simulator/server.js";
import type { Simulator, SimulatorSupplierOptions } from "../simulator/types.js";
import { connectorDefinitionSchema } from "./schema/connector-schema.js";
import { addDays, dateIn, isoDate } from "./schema/placeholders.js";
import { buildConnector, shippedConnector, storedOffers } from "./test-support.js";

let sim: Simulator;
let pool: pg.Pool;
t.before(async () => {
  sim = await startSimulator();
  pool = testPool(t, await createTestDatabase(t), 6);
});
t.teardown(() => sim.close());

const shipped = shippedConnector;

/** The shipped connector `file` against simulator supplier `supplier`, with `extra` merged in (test speed only). */
async function tick(t: Test, file: string, supplier: string, extra: Record<string, unknown> = {}) {
  const raw = {
    ...shipped(file),
    baseUrl: sim.baseUrl(supplier),
    rateLimit: { requestsPerSecond: 1000, burst: 1000, maxConcurrency: 1 },
    ...extra,
  };
  const definition = connectorDefinitionSchema.parse(raw);
  const { connector } = buildConnector(t, definition, { supplier, database: pool });
  const result = await forcedTick(tickDeps(pool), supplier, connector);
  const { rows } = await pool.query<{
    error_message: string | null;
    source_date: string | null;
    pages: number;
    records_rejected: number;
  }>(
    "select error_message, source_date::text as source_date, pages, records_rejected from ingestion_runs where id = $1",
    [result.runId],
  );
  return { ...result, ...rows[0] };
}

const stored = (supplier: string) => storedOffers(pool, supplier);

const significant = (price: string) => (price.includes(".") ? price.replace(/\.?0+$/, "") : price);

function configure(name: string, profile: SimulatorSupplierOptions["profile"], size: number, extra = {}) {
  sim.configure(name, { size, profile, ...extra });
}

t.test("ekf.json: today's dated xlsx, a title block above the header, every offer exact", async (t) => {
  configure("ekf", "ekf", 120);
  const r = await tick(t, "ekf", "ekf", { format: { type: "xlsx", sheet: 1, pageSize: 50 } });
  t.equal(r.outcome, "success", String(r.error_message));
  t.equal(r.source_date, isoDate(dateIn(Date.now())), "the run keeps the date it read");
  t.equal(r.pages, 3, "120 rows in steps of 50");
  const rows = await stored("ekf");
  const expected = sim
    .offers("ekf")
    .map((o) => ({
      sku: o.article,
      name: `${o.title} (товар)`,
      price: significant(o.price.value),
      currency: "RUB",
      stock: o.stock.total,
    }))
    .sort((a, b) => (a.sku < b.sku ? -1 : 1));
  t.same(
    rows.map((x) => ({
      sku: x.sku,
      name: x.name,
      price: significant(x.price ?? ""),
      currency: x.currency,
      stock: x.stock,
    })),
    expected,
  );
  t.match(sim.stats("ekf").urls, [new RegExp(`/ekf/storage/prices/ekf_pricelist_${r.source_date}\\.xlsx$`)]);
});

t.test("ekf.json: missing days fall back one day per 404, up to dateFallbackDays", async (t) => {
  const today = dateIn(Date.now());
  const missing = [0, 1, 2].map((d) => isoDate(addDays(today, -d)));
  configure("ekf-late", "ekf", 30, { workbook: { missingDates: missing } });
  const r = await tick(t, "ekf", "ekf-late");
  t.equal(r.outcome, "success", String(r.error_message));
  t.equal(r.source_date, isoDate(addDays(today, -3)));
  t.equal((await stored("ekf-late")).length, 30);
  t.same(
    sim.stats("ekf-late").urls.map((u) => /(\d{4}-\d{2}-\d{2})/.exec(u)?.[1]),
    [...missing, isoDate(addDays(today, -3))],
  );

  // Every day in the window missing: the run fails and delists nothing.
  const all = Array.from({ length: 8 }, (_, d) => isoDate(addDays(today, -d)));
  sim.configure("ekf-late", { size: 30, profile: "ekf", workbook: { missingDates: all } });
  const none = await tick(t, "ekf", "ekf-late");
  t.equal(none.outcome, "failed");
  t.equal(none.errorCode, "HTTP_404");
  t.match(
    none.error_message,
    /no dated file found: the supplier answered HTTP 404 for .*\(request\.dateFallbackDays 7\)/,
  );
  t.equal(none.source_date, null);
  const after = await stored("ekf-late");
  t.equal(after.length, 30);
  t.notOk(
    after.some((x) => x.delisted),
    "nothing delisted",
  );
});

t.test("keaz.json: the legacy xls read whole, availability kept as an attribute", async (t) => {
  configure("keaz", "keaz", 60);
  const r = await tick(t, "keaz", "keaz");
  t.equal(r.outcome, "success", String(r.error_message));
  const rows = await stored("keaz");
  t.equal(rows.length, 60);
  const bySku = new Map(sim.offers("keaz").map((o) => [o.article, o]));
  for (const row of rows) {
    const o = bySku.get(row.sku);
    t.ok(o, row.sku);
    if (!o) continue;
    t.equal(significant(row.price ?? ""), significant(o.price.value), `${row.sku} price`);
    t.equal(row.stock, null, "KEAZ publishes no quantity");
    t.same(row.attributes, { availability: o.stock.total > 0 ? "есть" : "нет" });
  }
});

t.test(
  "iek-pricelist.json: a POST answered by a zip holding the xlsx; dotted header text as one column",
  async (t) => {
    configure("iekpl", "iek-pricelist", 45);
    const r = await tick(t, "iek-pricelist", "iekpl");
    t.equal(r.outcome, "success", String(r.error_message));
    const rows = await stored("iekpl");
    t.equal(rows.length, 45);
    const bySku = new Map(sim.offers("iekpl").map((o) => [o.article, o]));
    t.ok(rows.every((x) => significant(x.price ?? "") === significant(bySku.get(x.sku)?.price.value ?? "?")));
    t.ok(rows.every((x) => (x.attributes as { unit?: string }).unit === "шт"));
    // Unchanged file: a conditional request answered 304 (docs/conditional-requests.md).
    const again = await tick(t, "iek-pricelist", "iekpl");
    t.equal(again.outcome, "success");
    t.equal(again.pages, 0, "not modified: nothing read");
  },
);

t.test(
  "a workbook whose header is not found fails CONTRACT naming the columns, and delists nothing",
  async (t) => {
    configure("ekf-bad", "ekf", 20);
    const first = await tick(t, "ekf", "ekf-bad");
    t.equal(first.outcome, "success");
    const renamed = shipped("ekf");
    const r = await tick(t, "ekf", "ekf-bad", {
      fields: { ...(renamed.fields as object), price: "Цена, руб." },
      conditional: false,
    });
    t.equal(r.outcome, "failed");
    t.equal(r.errorCode, "CONTRACT");
    t.match(r.error_message, /header row not found in sheet "Прайс-лист".*lacks "Цена, руб\."/);
    t.notOk((await stored("ekf-bad")).some((x) => x.delisted));
    const sheet = await tick(t, "ekf", "ekf-bad", {
      format: { type: "xlsx", sheet: "Цены" },
      conditional: false,
    });
    t.equal(sheet.errorCode, "CONTRACT");
    t.match(sheet.error_message, /sheet "Цены" not found: the workbook has "Прайс-лист"/);
  },
);

t.test("preview shows the workbook's sheet, its detected header row and the first mapped rows", async (t) => {
  const { mkdtempSync, writeFileSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const { baseEnv, runCli } = await import("../../test/helpers/cli.js");
  configure("iekpreview", "iek-pricelist", 12);
  const dir = mkdtempSync(join(tmpdir(), "ss-preview-workbook-"));
  writeFileSync(
    join(dir, "iek-pricelist.json"),
    JSON.stringify({ ...shipped("iek-pricelist"), baseUrl: sim.baseUrl("iekpreview") }),
  );
  const env = baseEnv({ SUPPLIER_SYNC_SUPPLIERS: "iek-pricelist:1h", SUPPLIER_SYNC_CONNECTORS_DIR: dir });
  const out = await runCli(t, ["preview", "iek-pricelist"], env, 60_000);
  t.equal(out.code, 0, out.stderr);
  t.match(
    out.stdout,
    /workbook sheet "Прайс-лист", header row 4: "Артикул" \| "Наименование" \| "Цена, руб\. с НДС" \| "Ед\. изм\."/,
  );
  const first = sim
    .offers("iekpreview")
    .map((o) => o.article)
    .sort()[0] as string;
  t.match(out.stdout, new RegExp(first), "the first mapped rows are shown");
});
