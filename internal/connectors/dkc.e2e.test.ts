// DKC through real ticks (docs/cookbook.md, DKC): the shipped config/suppliers/dkc.json, only
// its baseUrl and rateLimit changed, against the simulator's dkc profile over loopback (an
// access token fetched from GET /auth.access.token/{masterKey}, required in the AccessToken
// header of every other request; stock per comma list of 100 codes, a material per code),
// committed in a real PostgreSQL. A wrong master key fails the run, appears in no output, and
// delists nothing.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type pg from "pg";
import t, { type Test } from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { forcedTick, tickDeps } from "../../test/helpers/tick.js";
import { dkcNoPrice, dkcWarehouses } from "../simulator/profile-dkc.js";
import { indexOfSku } from "../simulator/profile-etm.js";
import { realApiSupplier, writeSkuFile } from "../simulator/real-apis.js";
import { startSimulator } from "../simulator/server.js";
import type { Simulator, SimulatorSupplierOptions } from "../simulator/types.js";
import { connectorDefinitionSchema } from "./schema/connector-schema.js";
import { buildConnector, shippedConnector, storedOffers, type TestConnector } from "./test-support.js";

const MASTER_KEY = "dkc-master-4be1a9c07d2f";

let sim: Simulator;
let pool: pg.Pool;
let dir: string;
t.before(async () => {
  sim = await startSimulator();
  pool = testPool(t, await createTestDatabase(t), 6);
  dir = mkdtempSync(join(tmpdir(), "ss-dkc-"));
});
t.teardown(async () => {
  await sim.close();
  rmSync(dir, { recursive: true, force: true });
});

const shipped = () => shippedConnector("dkc");

/** The simulator's dkc supplier `name` behind DKC's token, without its rate limit (test speed). */
function configure(name: string, size: number, auth: Partial<Record<string, unknown>> = {}): void {
  const options = realApiSupplier("dkc", size, { masterKey: MASTER_KEY });
  sim.configure(name, {
    ...options,
    auth: { ...options.auth, ...auth } as SimulatorSupplierOptions["auth"],
    rateLimit: undefined,
  });
  writeSkuFile(sim, name, join(dir, "dkc-skus.txt"));
}

/** The shipped dkc.json aimed at simulator supplier `supplier` (baseUrl and rateLimit only). */
function connector(t: Test, supplier: string, masterKey = MASTER_KEY): TestConnector {
  const definition = connectorDefinitionSchema.parse({
    ...shipped(),
    baseUrl: sim.baseUrl(supplier),
    rateLimit: { requestsPerSecond: 1000, burst: 1000, maxConcurrency: 1 },
  });
  const env: Record<string, string> = { DKC_MASTER_KEY: masterKey };
  return buildConnector(t, definition, {
    supplier,
    database: pool,
    connectorsDir: dir,
    readSecretEnv: (name) => env[name],
  });
}

async function tick(supplier: string, c: TestConnector) {
  const result = await forcedTick(tickDeps(pool, c.log), supplier, c.connector);
  const { rows } = await pool.query<{
    error_message: string | null;
    pages: number;
    records_inserted: number;
    records_updated: number;
    records_unchanged: number;
    records_delisted: number;
    records_rejected: number;
  }>(
    `select error_message, pages, records_inserted, records_updated, records_unchanged, records_delisted,
            records_rejected
       from ingestion_runs where id = $1`,
    [result.runId],
  );
  return { ...result, ...(rows[0] as NonNullable<(typeof rows)[0]>) };
}

const stored = (supplier: string) => storedOffers(pool, supplier);

const sameDecimal = (a: string | null, b: string) =>
  a !== null && a.replace(/\.?0+$/, "") === b.replace(/\.?0+$/, "");

t.test("dkc.json: a token from the master key, stock by 100 codes, a material per code", async (t) => {
  const n = 250;
  configure("dkc", n);
  const c = connector(t, "dkc");
  const first = await tick("dkc", c);
  t.equal(first.outcome, "success", String(first.error_message));
  t.equal(first.pages, 3, "100 + 100 + 50 codes");
  t.equal(first.records_inserted, n);
  t.equal(first.records_rejected, 0);
  const stats = sim.stats("dkc");
  t.equal(stats.logins, 1, "one token for the whole walk");
  t.equal(stats.requests, 1 + 3 + n, "a token, 3 stock requests and one material request a code");
  t.equal(stats.byStatus[401] ?? 0, 0, "every request carried the token");

  const rows = await stored("dkc");
  const offers = new Map(sim.offers("dkc").map((o) => [o.article, o]));
  t.equal(rows.length, n, "nothing missing");
  let onRequest = 0;
  let mismatches = 0;
  for (const row of rows) {
    const o = offers.get(row.sku);
    if (!o) {
      t.fail(`${row.sku} is not the simulator's`);
      continue;
    }
    const noPrice = dkcNoPrice({ catalog: { priceChanged: () => false } } as never, o);
    if (noPrice) onRequest++;
    const index = indexOfSku(o.article);
    const wantAttributes = {
      unit: "шт",
      series: `Серия ${index % 4}`,
      country: "Россия",
      stockByWarehouse: dkcWarehouses(o),
    };
    const ok =
      row.name === o.title &&
      (noPrice ? row.price === null : sameDecimal(row.price, o.price.value)) &&
      row.currency === "RUB" &&
      row.stock === o.stock.total &&
      JSON.stringify(row.attributes?.stockByWarehouse) === JSON.stringify(wantAttributes.stockByWarehouse) &&
      row.attributes?.unit === "шт" &&
      row.attributes?.series === wantAttributes.series &&
      row.attributes?.country === "Россия" &&
      !row.delisted;
    if (!ok && mismatches++ < 3) t.same(row, { sku: o.article, ...wantAttributes }, `offer ${row.sku}`);
  }
  t.equal(mismatches, 0, "every offer exact: name, price (null when no_price), stock summed, warehouses");
  t.equal(onRequest, Math.ceil(n / 11), "every eleventh material priced on request: a null price");

  const second = await tick("dkc", c);
  t.equal(second.outcome, "success", String(second.error_message));
  t.same(
    [second.records_inserted, second.records_updated, second.records_unchanged, second.records_delisted],
    [0, 0, n, 0],
    "a second tick changes nothing",
  );
  t.equal(sim.stats("dkc").logins, 1, "the token is reused across ticks");
});

t.test("dkc.json: an expired token costs one new token and a repeat of the request", async (t) => {
  configure("dkc-expiry", 120, { expireAfterRequests: 40 });
  const r = await tick("dkc-expiry", connector(t, "dkc-expiry"));
  t.equal(r.outcome, "success", String(r.error_message));
  t.equal(r.records_inserted, 120);
  const stats = sim.stats("dkc-expiry");
  t.equal(stats.logins, 4, "a token every 40 requests: 122 data requests take 4");
  t.equal(stats.expiredRequests, 3);
});

t.test("dkc.json: a wrong master key fails the run AUTH, appears nowhere, delists nothing", async (t) => {
  configure("dkc-auth", 30);
  const ok = await tick("dkc-auth", connector(t, "dkc-auth"));
  t.equal(ok.outcome, "success", String(ok.error_message));
  const wrongKey = "dkc-wrong-master-0c93f1e2";
  const c = connector(t, "dkc-auth", wrongKey);
  const r = await tick("dkc-auth", c);
  t.equal(r.outcome, "failed");
  t.equal(r.errorCode, "AUTH");
  t.match(r.error_message, /login failed/);
  t.notMatch(r.error_message ?? "", wrongKey);
  t.ok(
    c.lines.some((l) => l.includes("/auth.access.token/[REDACTED]")),
    "the token URL is logged with the key redacted",
  );
  t.notOk(
    c.lines.some((l) => l.includes(wrongKey)),
    "the master key is in no log line",
  );
  t.equal(sim.stats("dkc-auth").loginFailures, 1);
  const rows = await stored("dkc-auth");
  t.equal(rows.length, 30);
  t.notOk(
    rows.some((x) => x.delisted),
    "nothing delisted",
  );
});

t.test("the dkc profile refuses a request without a live token", async (t) => {
  configure("dkc-shape", 10);
  const base = sim.baseUrl("dkc-shape");
  const code = sim.offers("dkc-shape")[0]?.article as string;
  t.equal((await fetch(`${base}/catalog/material/stock?code=${code}`)).status, 401, "no AccessToken: 401");
  t.equal(
    (await fetch(`${base}/catalog/material/stock?code=${code}`, { headers: { AccessToken: "made-up" } }))
      .status,
    401,
    "an unknown token: 401",
  );
  t.equal((await fetch(`${base}/auth.access.token/not-the-key`)).status, 401, "a wrong master key: 401");
  const issued = (await (await fetch(`${base}/auth.access.token/${MASTER_KEY}`)).json()) as {
    access_token: string;
  };
  t.same(Object.keys(issued), ["access_token"], "the answer holds the token alone");
  const stock = await fetch(`${base}/catalog/material/stock?code=${code}`, {
    headers: { AccessToken: issued.access_token },
  });
  t.equal(stock.status, 200);
  const codes = Array.from({ length: 101 }, () => code).join(",");
  t.equal(
    (
      await fetch(`${base}/catalog/material/stock?code=${codes}`, {
        headers: { AccessToken: issued.access_token },
      })
    ).status,
    400,
    "101 codes: 400",
  );
});
