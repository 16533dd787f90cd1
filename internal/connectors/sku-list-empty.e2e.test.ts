// `skus.allowEmpty` (docs/connectors.md, SKU lists) through real ticks: an empty list is a complete walk of
// nothing, so the run succeeds and delists every offer it listed before (docs/connectors.md, Walks and steps). That is what the
// flag asks for: a supplier whose list may legitimately empty out. Without it an empty list
// is a failed run that delists nothing, the safe default for a list emptied by mistake.
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { forcedTick, tickDeps } from "../../test/helpers/tick.js";
import { skuOf } from "../simulator/catalog.js";
import { startSimulator } from "../simulator/server.js";
import { connectorDefinitionSchema } from "./schema/connector-schema.js";
import { buildConnector } from "./test-support.js";

t.test(
  "an emptied SKU list: allowEmpty delists everything, without it the run fails and keeps all",
  async (t) => {
    const sim = await startSimulator({ suppliers: { etm: { size: 3, profile: "etm" } } });
    t.teardown(() => sim.close());
    const pool = testPool(t, await createTestDatabase(t));
    const dir = await mkdtemp(join(tmpdir(), "allow-empty-"));
    const list = (codes: string[]) => writeFile(join(dir, "skus.txt"), `# codes\n${codes.join("\n")}\n`);
    const tick = async (allowEmpty: boolean) => {
      const definition = connectorDefinitionSchema.parse({
        baseUrl: sim.baseUrl("etm"),
        rateLimit: { requestsPerSecond: 1000, burst: 1000, maxConcurrency: 2 },
        skus: { from: "file", file: "skus.txt", batch: 50, allowEmpty },
        request: { path: "/api/v1/goods/{skus}/price", query: { type: "etm" } },
        records: { path: "data.rows" },
        fields: { sku: "gdscode", price: "price", currency: { const: "RUB" } },
      });
      const { connector } = buildConnector(t, definition, { supplier: "etm", connectorsDir: dir });
      return forcedTick(tickDeps(pool), "etm", connector);
    };
    const listed = async () =>
      (
        await pool.query<{ n: number }>(
          "select count(*)::int as n from supplier_offers where supplier = 'etm' and delisted_at is null",
        )
      ).rows[0]?.n;

    await list([0, 1, 2].map((i) => skuOf("etm", i)));
    t.match(await tick(false), { outcome: "success", counts: { inserted: 3 } });
    t.equal(await listed(), 3);

    await list([]);
    const refused = await tick(false);
    t.match(refused, { outcome: "failed", errorCode: "CONTRACT" });
    t.equal(await listed(), 3, "without allowEmpty nothing is delisted");

    const emptied = await tick(true);
    t.match(emptied, { outcome: "success", errorCode: null, counts: { delisted: 3 } });
    t.equal(await listed(), 0, "allowEmpty: every offer delisted");
    const { rows } = await pool.query<{ pages: number; records_seen: number }>(
      "select pages, records_seen from ingestion_runs where id = $1",
      [emptied.runId],
    );
    t.same(rows, [{ pages: 1, records_seen: 0 }], "one step without offers");
  },
);
