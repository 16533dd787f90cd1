// The app hands the connector its database for `skus.from: "sql"` (docs/connectors.md, SKU lists): a real
// `--tick-once` process reads the SKU list from the database it writes to, in batches,
// against the simulator's etm profile.
import t from "tap";
import { skuOf } from "../../internal/simulator/catalog.js";
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, runCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query } from "../helpers/fixtures.js";

t.test("--tick-once walks a SQL SKU list: $1 is the supplier, one step per batch", async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({ suppliers: { etm: { size: 7, profile: "etm" } } });
  t.teardown(() => sim.close());
  await query(url, "create table wanted (supplier text, sku text)");
  for (const i of [0, 2, 4, 6]) await query(url, "insert into wanted values ('etm', $1)", [skuOf("etm", i)]);
  await query(url, "insert into wanted values ('other', 'X-1')");
  const dir = connectorsDir({
    etm: {
      baseUrl: sim.baseUrl("etm"),
      rateLimit: { requestsPerSecond: 1000, burst: 1000, maxConcurrency: 2 },
      skus: { from: "sql", query: "select sku from wanted where supplier = $1 order by sku", batch: 3 },
      request: { path: "/api/v1/goods/{skus}/price", query: { type: "etm" } },
      records: { path: "data.rows" },
      fields: { sku: "gdscode", price: "price", currency: { const: "RUB" } },
    },
  });
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
  });
  const run = await runCli(t, ["--tick-once"], env);
  t.equal(run.code, 0, run.stderr);
  const offers = await query<{ sku: string }>(url, "select sku from supplier_offers order by sku");
  t.same(
    offers.map((o) => o.sku),
    [0, 2, 4, 6].map((i) => skuOf("etm", i)),
  );
  const steps = await query<{ n: number }>(url, "select count(*)::int as n from ingestion_run_steps");
  t.equal(steps[0]?.n, 2, "4 SKUs in batches of 3: 2 steps");
});
