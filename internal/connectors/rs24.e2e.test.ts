import type pg from "pg";
import t, { type Test } from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { forcedTick, tickDeps } from "../../test/helpers/tick.js";
import { indexOfSku } from "../simulator/profile-etm.js";
import {
  RS24_STORE,
  rs24Category,
  rs24Prices,
  rs24Residue,
  rs24VendorCode,
} from "../simulator/profile-rs24.js";
import { realApiSupplier } from "../simulator/real-apis.js";
import { startSimulator } from "../simulator/server.js";
import type { Simulator } from "../simulator/types.js";
import { connectorDefinitionSchema } from "./schema/connector-schema.js";
import { buildConnector, shippedConnector, storedOffers, type TestConnector } from "./test-support.js";

const LOGIN = "rs24-login-5d1e";
const PASSWORD = "rs24-password-93c0a7e2";

let sim: Simulator;
let pool: pg.Pool;
t.before(async () => {
  sim = await startSimulator();
  pool = testPool(t, await createTestDatabase(t), 6);
});
t.teardown(() => sim.close());

const shipped = () => shippedConnector("rs24");

/** The shipped rs24.json aimed at simulator supplier `supplier` (baseUrl and rateLimit only). */
function connector(t: Test, supplier: string, password = PASSWORD): TestConnector {
  const definition = connectorDefinitionSchema.parse({
    ...shipped(),
    baseUrl: sim.baseUrl(supplier),
    rateLimit: { requestsPerSecond: 1000, burst: 1000, maxConcurrency: 4 },
  });
  const env: Record<string, string> = { RS24_LOGIN: LOGIN, RS24_PASSWORD: password };
  return buildConnector(t, definition, { supplier, database: pool, readSecretEnv: (name) => env[name] });
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

/** What the simulator serves for every live offer, as supplier_offers should hold it. */
function expected(supplier: string) {
  return sim
    .offers(supplier)
    .map((o) => {
      const p = rs24Prices(o);
      const vendorCode = rs24VendorCode(o);
      return {
        sku: o.article,
        name: o.title,
        price: o.price.value,
        currency: "RUB",
        stock: rs24Residue(o, RS24_STORE),
        attributes: {
          ...(vendorCode === "" ? {} : { vendorCode }),
          brand: ["IEK", "EKF", "DKC", "Schneider Electric"][indexOfSku(o.article) % 4],
          category: rs24Category(o) === "custom" ? "Заказная" : "Складская",
          priceWithVat: p.Personal_w_VAT,
          priceRetail: p.Retail,
          priceRetailWithVat: p.Retail_w_VAT,
          priceMrc: p.MRC,
          priceMrcWithVat: p.MRC_w_VAT,
          unit: "шт",
        },
      };
    })
    .sort((a, b) => (a.sku < b.sku ? -1 : 1));
}

/** Compares prices as exact decimals: PostgreSQL `numeric` keeps the trailing zeros sent. */
const sameDecimal = (a: string | null, b: string) =>
  a !== null && a.replace(/\.?0+$/, "") === b.replace(/\.?0+$/, "");

t.test(
  "rs24.json: positions of both categories paged by 1,000, prices by 50, residues of store 287",
  async (t) => {
    const n = 1_300; // 1,040 stock positions (two pages of 1,000) and 260 made to order
    sim.configure("rs24", {
      ...realApiSupplier("rs24", n, { username: LOGIN, password: PASSWORD }),
      rateLimit: undefined,
    });
    const c = connector(t, "rs24");
    sim.resetStats("rs24");
    const first = await tick("rs24", c);
    t.equal(first.outcome, "success", String(first.error_message));
    t.equal(first.pages, 3, "instock: 2 pages of up to 1,000; custom: 1 page");
    t.equal(first.records_inserted, n);
    t.equal(first.records_rejected, 0);

    const rows = await stored("rs24");
    const want = expected("rs24");
    t.equal(rows.length, want.length, "nothing missing, nothing extra");
    let mismatches = 0;
    for (const [i, row] of rows.entries()) {
      const w = want[i];
      if (
        !w ||
        row.sku !== w.sku ||
        row.name !== w.name ||
        !sameDecimal(row.price, w.price) ||
        row.currency !== w.currency ||
        row.stock !== w.stock ||
        JSON.stringify(row.attributes, Object.keys(row.attributes ?? {}).sort()) !==
          JSON.stringify(w.attributes, Object.keys(w.attributes).sort()) ||
        row.delisted
      ) {
        if (mismatches++ < 3) t.same({ ...row, price: row.price }, w, `offer ${row.sku}`);
      }
    }
    t.equal(mismatches, 0, "every offer exact: price, stock of store 287, attributes");
    // 3 position pages, ceil(1000/50) + ceil(40/50) + ceil(260/50) = 27 price batches, a residue a code.
    t.equal(
      sim.stats("rs24").requests,
      3 + 27 + n,
      "exactly the requests the walk needs, prices 50 a request",
    );
    t.equal(sim.stats("rs24").byStatus[400] ?? 0, 0, "no batch over 50 codes");

    const second = await tick("rs24", c);
    t.equal(second.outcome, "success", String(second.error_message));
    t.same(
      [second.records_inserted, second.records_updated, second.records_unchanged, second.records_delisted],
      [0, 0, n, 0],
      "a second tick changes nothing",
    );

    // Five prices changed, three positions gone: exactly those written.
    sim.mutate("rs24", { changePrices: 5, remove: 3 });
    const third = await tick("rs24", c);
    t.equal(third.outcome, "success", String(third.error_message));
    t.same([third.records_updated, third.records_delisted], [5, 3]);
    const after = await stored("rs24");
    t.equal(after.filter((r) => r.delisted).length, 3);
    const live = new Map(sim.offers("rs24").map((o) => [o.article, o]));
    t.ok(
      after.every((r) => r.delisted || sameDecimal(r.price, live.get(r.sku)?.price.value ?? "?")),
      "every live price is the simulator's",
    );
  },
);

t.test("rs24.json: a wrong password fails the run AUTH and delists nothing", async (t) => {
  sim.configure("rs24-auth", {
    ...realApiSupplier("rs24", 40, { username: LOGIN, password: PASSWORD }),
    rateLimit: undefined,
  });
  const ok = await tick("rs24-auth", connector(t, "rs24-auth"));
  t.equal(ok.outcome, "success", String(ok.error_message));
  const wrongPassword = "rs24-wrong-password-77f1";
  const c = connector(t, "rs24-auth", wrongPassword);
  const r = await tick("rs24-auth", c);
  t.equal(r.outcome, "failed");
  t.equal(r.errorCode, "AUTH");
  t.match(r.error_message, /401/);
  t.notMatch(r.error_message ?? "", wrongPassword);
  t.ok(
    c.lines.some((l) => l.includes("/position/287/instock")),
    "the refused request is logged",
  );
  const basic = Buffer.from(`${LOGIN}:${wrongPassword}`).toString("base64");
  t.notOk(
    c.lines.some((l) => l.includes(wrongPassword) || l.includes(basic)),
    "the password is in no log line",
  );
  const rows = await stored("rs24-auth");
  t.equal(rows.length, 40);
  t.notOk(
    rows.some((x) => x.delisted),
    "nothing delisted",
  );
});

t.test("the rs24 profile refuses what the real API refuses", async (t) => {
  sim.configure("rs24-shape", {
    ...realApiSupplier("rs24", 60, { username: LOGIN, password: PASSWORD }),
    rateLimit: undefined,
  });
  const base = sim.baseUrl("rs24-shape");
  const basic = `Basic ${Buffer.from(`${LOGIN}:${PASSWORD}`).toString("base64")}`;
  const noAuth = await fetch(`${base}/position/287/instock?page=1&rows=10`);
  t.equal(noAuth.status, 401, "no Basic credentials: 401");
  const codes = sim.offers("rs24-shape").map((o) => o.article);
  const post = (items: unknown) =>
    fetch(`${base}/massprice`, {
      method: "POST",
      headers: { authorization: basic, "content-type": "application/json" },
      body: JSON.stringify({ items }),
    });
  t.equal((await post(codes.slice(0, 51))).status, 400, "51 codes: 400");
  const fifty = await post(codes.slice(0, 50));
  t.equal(fifty.status, 200);
  t.equal(((await fifty.json()) as unknown[]).length, 50);
  t.equal((await post(codes.slice(0, 1).join(","))).status, 400, "a joined string is not an items array");
  const stocks = (await (await fetch(`${base}/stocks`, { headers: { authorization: basic } })).json()) as {
    Stocks: { ORGANIZATION_ID: number; NAME: string }[];
  };
  t.ok(stocks.Stocks.some((s) => String(s.ORGANIZATION_ID) === RS24_STORE));
});
