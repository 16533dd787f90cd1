// The shipped connector files config/suppliers/{etm,iek,systeme}.json themselves, only their
// baseUrl aimed at the simulator's etm, iek and systeme profiles (behind the real APIs' auth
// and rate limits, in the shapes the real APIs send), run by real `--tick-once` processes
// against a real PostgreSQL: catalogs exact, ETM's stock from the `all` row or the other
// stores summed (quantities as strings), IEK's price null exactly when `extra` flags it,
// secrets nowhere an operator looks.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import t, { type Test } from "tap";
import { etmRemains } from "../../internal/simulator/profile-etm.js";
import { iekExtra, iekIndividualPrice } from "../../internal/simulator/profile-iek.js";
import { storeSplit } from "../../internal/simulator/profiles.js";
import {
  pointConnectorsAt,
  type RealApiCredentials,
  realApiEnv,
  realApiSupplier,
  writeSkuFile,
} from "../../internal/simulator/real-apis.js";
import { startSimulator } from "../../internal/simulator/server.js";
import type { Simulator, SimulatorRecord } from "../../internal/simulator/types.js";
import { baseEnv, runCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { query } from "../helpers/fixtures.js";

const SHIPPED = fileURLToPath(new URL("../../config/suppliers", import.meta.url));

const CREDENTIALS: RealApiCredentials = {
  etm: { login: "etm-login-3c9e71", password: "etm-password-8a41f05d" },
  iek: { username: "iek-user-52b0", password: "iek-password-e6d3a9c1" },
  systeme: { accessCode: "systeme-access-7f28be4d90" },
};
const BASIC = Buffer.from(`${CREDENTIALS.iek.username}:${CREDENTIALS.iek.password}`).toString("base64");
const SECRETS = [CREDENTIALS.etm.password, CREDENTIALS.iek.password, CREDENTIALS.systeme.accessCode, BASIC];

interface OfferRow {
  sku: string;
  name: string | null;
  price: string | null;
  currency: string | null;
  stock: number | null;
  attributes: Record<string, unknown> | null;
  delisted: boolean;
}

async function offers(url: string, supplier: string): Promise<OfferRow[]> {
  return query<OfferRow & Record<string, unknown>>(
    url,
    `select sku, name, price::text as price, currency, stock, attributes, delisted_at is not null as delisted
       from supplier_offers where supplier = $1 order by sku`,
    [supplier],
  );
}

async function lastRun(url: string, supplier: string) {
  const [run] = await query<{
    id: number;
    state: string;
    error_code: string | null;
    error_message: string | null;
    records_inserted: number;
    records_updated: number;
    records_delisted: number;
  }>(
    url,
    `select id::int as id, state, error_code, error_message, records_inserted, records_updated, records_delisted
       from ingestion_runs where supplier = $1 order by id desc limit 1`,
    [supplier],
  );
  if (!run) throw new Error(`no run of ${supplier}`);
  return run;
}

async function observationsOfRun(url: string, runId: number) {
  return query<{ sku: string; price: string | null }>(
    url,
    "select sku, price::text as price from supplier_offer_observations where run_id = $1 order by sku",
    [runId],
  );
}

/** Every text an operator can see of the database: run and step errors. */
async function operatorText(url: string): Promise<string> {
  const runs = await query<{ t: string | null }>(
    url,
    "select coalesce(string_agg(coalesce(error_message, '') || ' ' || coalesce(error_code, ''), ' '), '') as t from ingestion_runs",
  );
  const steps = await query<{ t: string | null }>(
    url,
    "select coalesce(string_agg(to_jsonb(s)::text, ' '), '') as t from ingestion_run_steps s",
  );
  return `${runs[0]?.t ?? ""} ${steps[0]?.t ?? ""}`;
}

function assertClean(
  t: Test,
  what: string,
  text: string,
  sim: Simulator,
  suppliers: readonly string[],
): void {
  const tokens = suppliers.flatMap((s) => sim.stats(s).issuedTokens);
  const leaked = [...SECRETS, ...tokens].filter((s) => text.includes(s));
  t.same(leaked, [], `${what}: no secret and no session token`);
}

/** A fresh database, the simulator with `sizes`, and the shipped connectors aimed at it. */
async function setup(t: Test, sizes: Partial<Record<keyof RealApiCredentials, number>>) {
  const url = await createTestDatabase(t);
  const suppliers = Object.fromEntries(
    Object.entries(sizes).map(([name, size]) => [
      name,
      realApiSupplier(name as keyof RealApiCredentials, size as number, CREDENTIALS[name as "etm"]),
    ]),
  );
  const sim = await startSimulator({ suppliers });
  t.teardown(() => sim.close());
  const dir = mkdtempSync(join(tmpdir(), "ss-shipped-"));
  pointConnectorsAt(sim, SHIPPED, dir, Object.keys(sizes));
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: Object.keys(sizes)
      .map((n) => `${n}:1h`)
      .join(","),
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
    SUPPLIER_SYNC_LOG_LEVEL: "trace",
    ...realApiEnv(CREDENTIALS),
  });
  return { url, sim, dir, env };
}

async function tickOnce(t: Test, env: Record<string, string>, supplier: string, timeoutMs = 60_000) {
  const out = await runCli(t, ["--tick-once", "--force", "--supplier", supplier], env, timeoutMs);
  return { ...out, text: out.stdout + out.stderr };
}

const expectedStock = (r: SimulatorRecord) => storeSplit(r.stock.total).reduce((a, b) => a + b, 0);

/** A price IEK sent as a JSON number, as stored: the number's digits (`746.70` is 746.7). */
const numeric = (price: string) => price.replace(/\.?0+$/, "");

t.test(
  "iek.json: groups, products paged, price null exactly when extra flags it, stock summed",
  async (t) => {
    const { url, sim, env } = await setup(t, { iek: 60 });
    const first = await tickOnce(t, env, "iek");
    t.equal(first.code, 0, first.stderr);
    const run1 = await lastRun(url, "iek");
    t.equal(run1.state, "succeeded");

    const expected = sim
      .offers("iek")
      .map((r) => {
        const index = Number(r.article.slice(4));
        const onRequest = index % 7 === 0;
        const [a, b, c] = storeSplit(r.stock.total);
        const individual = iekIndividualPrice(r);
        return {
          sku: r.article,
          name: r.title,
          price: onRequest ? null : numeric(r.price.value),
          currency: "RUB",
          stock: r.stock.total,
          attributes: {
            brand: "IEK",
            groupId: `G${index % 3}`,
            ...(individual === undefined ? {} : { individualPrice: Number(individual) }),
            vat: 20,
            vatIncluded: true,
            orderMultiplicity: 1 + (index % 2) * 9,
            minShip: 1,
            stockByStore: { "1": a, "2": b, "3": c },
          },
          delisted: false,
        };
      })
      .sort((x, y) => x.sku.localeCompare(y.sku));
    const flags = new Set([0, 7, 14, 21].map((i) => iekExtra(i, true)));
    t.equal(
      flags.size,
      3,
      "the flag was sent alone, padded and followed by a note (the test can tell them apart)",
    );
    t.ok(
      sim.offers("iek").some((r) => iekExtra(Number(r.article.slice(4)), false) !== ""),
      "offers with another note in extra keep their price",
    );
    t.same(await offers(url, "iek"), expected, "the catalog exactly, price on request stored null");
    t.equal(
      (await offers(url, "iek")).filter((o) => o.price === null).length,
      Math.ceil(60 / 7),
      "every seventh offer is price on request",
    );
    // 1 group list + 3 groups (one page each: totalPage 1) + ceil(20/50) residues per group.
    t.equal(sim.stats("iek").requests, 1 + 3 + 3, "requests: groups, products per group, residues per group");
    t.ok(
      sim
        .stats("iek")
        .urls.filter((u) => u.includes("/api/products?"))
        .every(
          (u) =>
            /[?&]page=1(&|$)/.test(u) && /[?&]pageSize=500(&|$)/.test(u) && /[?&]entity=all(&|$)/.test(u),
        ),
      "products asked page by page, 500 a page, entity=all",
    );

    // The first offer (price on request) gets a real price: exactly one observation, its own.
    sim.mutate("iek", { changePrices: 1 });
    const priced = sim.offers("iek")[0] as SimulatorRecord;
    t.equal(priced.article, "IEK-0000000");
    const second = await tickOnce(t, env, "iek");
    t.equal(second.code, 0, second.stderr);
    const run2 = await lastRun(url, "iek");
    t.same(await observationsOfRun(url, run2.id), [
      { sku: "IEK-0000000", price: numeric(priced.price.value) },
    ]);
    t.equal(run2.records_updated, 1);

    // New and removed offers: inserted and delisted.
    sim.mutate("iek", { remove: 2, add: 3 });
    const third = await tickOnce(t, env, "iek");
    t.equal(third.code, 0, third.stderr);
    const run3 = await lastRun(url, "iek");
    t.match(run3, { state: "succeeded", records_inserted: 3, records_delisted: 2 });
    const live = (await offers(url, "iek")).filter((o) => !o.delisted).map((o) => o.sku);
    t.same(
      live,
      sim
        .offers("iek")
        .map((r) => r.article)
        .sort(),
      "live offers are the catalog",
    );

    for (const [what, text] of [
      ["tick output", first.text + second.text + third.text],
      ["runs and steps", await operatorText(url)],
    ] as const)
      assertClean(t, what, text, sim, ["iek"]);
  },
);

t.test("systeme.json: accessCode, getdata pages, getprice and getstock in lists of 45", async (t) => {
  const { url, sim, env } = await setup(t, { systeme: 530 });
  const first = await tickOnce(t, env, "systeme");
  t.equal(first.code, 0, first.stderr);
  t.equal((await lastRun(url, "systeme")).state, "succeeded");
  const expected = sim
    .offers("systeme")
    .map((r) => ({
      sku: r.article,
      name: r.title,
      price: r.price.value,
      currency: "RUB",
      stock: expectedStock(r),
      attributes: { brand: "Systeme Electric", range: `Range ${Number(r.article.slice(8)) % 5}` },
      delisted: false,
    }))
    .sort((x, y) => x.sku.localeCompare(y.sku));
  t.same(await offers(url, "systeme"), expected, "the catalog exactly, stock summed over warehouses");
  const stats = sim.stats("systeme");
  // getdata pages of 500: 500 and 30 records, then the empty page; per step ceil(k/45) × 2.
  t.equal(stats.requests, 3 + 2 * (Math.ceil(500 / 45) + Math.ceil(30 / 45)));
  t.ok(
    stats.urls.every((u) => u.includes(`accessCode=${CREDENTIALS.systeme.accessCode}`)),
    "every request carries accessCode",
  );
  const lists = stats.urls
    .filter((u) => /\/get(price|stock)\?/.test(u))
    .map((u) => (/commercialRef=([^&]*)/.exec(u)?.[1] ?? "").split(","));
  t.ok(
    lists.length > 0 && lists.every((l) => l.length >= 1 && l.length <= 45),
    "at most 45 references a call",
  );
  t.ok(
    lists.some((l) => l.length === 45 && l.every((r) => /^SYSTEME-\d{7}$/.test(r))),
    "references as a literal comma list",
  );

  // A wrong key: the run fails AUTH-side with a clear error that does not repeat the key.
  const wrong = { ...env, SYSTEME_ACCESS_CODE: "systeme-wrong-key-1d7c3b" };
  const failed = await tickOnce(t, wrong, "systeme");
  t.not(failed.code, 0);
  const run = await lastRun(url, "systeme");
  t.equal(run.state, "failed");
  t.match(run.error_code, /HTTP_401|AUTH/);
  t.notOk(
    `${failed.text}${run.error_message}`.includes("systeme-wrong-key-1d7c3b"),
    "the wrong key is redacted too",
  );
  assertClean(t, "tick output", first.text + failed.text, sim, ["systeme"]);
  assertClean(t, "runs and steps", await operatorText(url), sim, ["systeme"]);
});

t.test("etm.json: session login, price batches of 50, remains per code, at 1 request/s", async (t) => {
  const n = 51;
  const { url, sim, dir, env } = await setup(t, { etm: n });
  t.equal(writeSkuFile(sim, "etm", join(dir, "etm-skus.txt")), n);
  const started = Date.now();
  const first = await tickOnce(t, env, "etm", 150_000);
  const elapsedMs = Date.now() - started;
  t.equal(first.code, 0, first.stderr);
  t.equal((await lastRun(url, "etm")).state, "succeeded");

  const stats = sim.stats("etm");
  t.equal(stats.logins, 1, "one login");
  t.equal(stats.requests - stats.logins, Math.ceil(n / 50) + n, "ceil(n/50) + n data requests");
  t.equal(stats.overBudget, 0, "never over the 1 request/s budget");
  t.ok(elapsedMs >= (Math.ceil(n / 50) + n - 1) * 1000, `paced at 1/s (${elapsedMs} ms)`);
  t.ok(
    stats.urls.every((u) => /[?&]session-id=etm-[0-9a-f]+/.test(u)),
    "every data request carries the session",
  );
  t.ok(
    stats.urls.every((u) => /[?&]type=etm(&|$)/.test(u)),
    "prices and remains alike ask for ETM codes (type=etm)",
  );

  // What the simulator sent: an `all` row that is not the sum of the listed stores (so reading
  // the wrong row, or summing, would be caught), remains without one, string quantities.
  const rows = sim.offers("etm").map((r) => ({ r, stores: etmRemains(r) }));
  const quantity = (q: string | number) => Number(q);
  const others = (stores: ReturnType<typeof etmRemains>) => stores.filter((s) => s.StoreType !== "all");
  t.ok(
    rows.some(
      ({ stores }) =>
        stores.some((s) => s.StoreType === "all") &&
        others(stores).reduce((a, s) => a + quantity(s.StoreQuantRem), 0) !==
          quantity(stores.find((s) => s.StoreType === "all")?.StoreQuantRem ?? 0),
    ),
    "some all rows differ from the sum of the listed stores",
  );
  t.ok(
    rows.some(({ stores }) => !stores.some((s) => s.StoreType === "all")),
    "some remains have no all row",
  );
  t.ok(
    rows.some(({ stores }) => stores.some((s) => typeof s.StoreQuantRem === "string")),
    "quantities as strings",
  );

  const expected = rows
    .map(({ r, stores }) => ({
      sku: r.article,
      name: null,
      price: r.price.value,
      currency: "RUB",
      stock: r.stock.total,
      attributes: {
        priceWithVat: (Number(r.price.value) * 1.2).toFixed(2),
        priceTariff: r.price.value,
        priceRetail: (Number(r.price.value) * 1.5).toFixed(2),
        stockByStore: others(stores).map((s) => ({
          store: s.StoreCode,
          type: s.StoreType,
          quantity: s.StoreQuantRem,
        })),
      },
      delisted: false,
    }))
    .sort((x, y) => x.sku.localeCompare(y.sku));
  t.same(
    await offers(url, "etm"),
    expected,
    "every code priced; stock the all row, else the other stores summed; stockByStore without the total",
  );
  assertClean(t, "tick output", first.text, sim, ["etm"]);
  assertClean(t, "runs and steps", await operatorText(url), sim, ["etm"]);
});
