// `supplier-sync preview` prints, per mapped field, how many of a step's records had a value
// (docs/connectors.md, Field coverage), so a path that matches nothing is seen before the first
// run. The shipped config/suppliers/etm.json (only its baseUrl changed) against the simulator's
// etm profile, by a real process: once as ETM answers, once with the remains' quantity key
// renamed (what a connector reading the wrong field sees): stock 0 of 5, not stock 0.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { writeSkuFile } from "../../internal/simulator/real-apis.js";
import { startSimulator } from "../../internal/simulator/server.js";
import type { SimulatorSupplierOptions } from "../../internal/simulator/types.js";
import { baseEnv, runCli } from "../helpers/cli.js";

const LOGIN = "etm-login-5d1c";
const PASSWORD = "etm-password-77b0e3";

const etm = (extra: Partial<SimulatorSupplierOptions> = {}): SimulatorSupplierOptions => ({
  size: 5,
  profile: "etm",
  auth: {
    type: "session",
    loginPath: "/api/v1/user/login",
    credentials: { log: LOGIN, pwd: PASSWORD },
    expiredAs: "body403",
  },
  ...extra,
});

interface Coverage {
  field: string;
  source: string;
  records: number;
  withValue: number;
}

t.test("preview: per field, how many records had a value; a renamed quantity shows 0 of 5", async (t) => {
  const sim = await startSimulator({ suppliers: { etm: etm() } });
  t.teardown(() => sim.close());
  const dir = mkdtempSync(join(tmpdir(), "ss-preview-coverage-"));
  const shipped = JSON.parse(
    readFileSync(new URL("../../config/suppliers/etm.json", import.meta.url), "utf8"),
  );
  writeFileSync(join(dir, "etm.json"), JSON.stringify({ ...shipped, baseUrl: sim.baseUrl("etm") }));
  writeSkuFile(sim, "etm", join(dir, "etm-skus.txt"));
  const env = baseEnv({
    SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
    ETM_LOGIN: LOGIN,
    ETM_PASSWORD: PASSWORD,
  });
  const preview = async (json: boolean) => {
    const out = await runCli(t, ["preview", "etm", ...(json ? ["--json"] : [])], env, 60_000);
    t.equal(out.code, 0, out.stderr);
    return out.stdout;
  };
  const stockOf = (report: { steps: { coverage?: Coverage[] }[] }) =>
    report.steps[0]?.coverage?.find((c) => c.field === "stock");

  const good = JSON.parse(await preview(true));
  t.same(
    good.steps[0].coverage.map((c: Coverage) => [c.field, c.withValue, c.records]),
    [
      ["price", 5, 5],
      ["currency", 5, 5],
      ["stock", 5, 5],
      ["attributes.priceWithVat", 5, 5],
      ["attributes.priceTariff", 5, 5],
      ["attributes.priceRetail", 5, 5],
      ["attributes.stockByStore", 5, 5],
    ],
    "--json: every mapped field of the step, sku excluded, with its count",
  );
  t.match(stockOf(good)?.source, /^InfoStores\[\?StoreType=='all'\] \| \[0\]\.StoreQuantRem else sum of /);
  t.match(await preview(false), /\n {4}stock +InfoStores\[\?StoreType=='all'\].*… +5 of 5 records\n/);

  // The same API, the quantity sent under another key: no stock anywhere, and preview says so.
  sim.configure("etm", etm({ renameField: { from: "StoreQuantRem", to: "StockRem" } }));
  const drifted = JSON.parse(await preview(true));
  t.match(stockOf(drifted), { records: 5, withValue: 0 });
  t.same(
    drifted.steps[0].offers.map((o: { stock: unknown }) => o.stock),
    [null, null, null, null, null],
    "stock unknown (null), never 0",
  );
  t.match(await preview(false), /\n {4}stock +InfoStores.*… +0 of 5 records {2}\(matched nothing\)\n/);
});
