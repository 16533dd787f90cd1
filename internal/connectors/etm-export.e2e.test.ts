// ETM's catalog export as public clients see it (docs/feeds.md, ETM's full catalog), through real
// ticks: the shipped config/suppliers/etm-catalog.json against the simulator's etm profile
// (its baseUrl, fast limits and the simulator's job options changed, nothing else): the job id
// at data.uuid, the state at data.rows[0].state as a number or a string, the product list
// downloaded from ETM's own origin with the session, priced 50 codes a request.
import { readFileSync } from "node:fs";
import type pg from "pg";
import t from "tap";
import { request } from "undici";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { forcedTick, tickDeps } from "../../test/helpers/tick.js";
import { etmProduct } from "../simulator/profile-etm.js";
import { startSimulator } from "../simulator/server.js";
import type { Simulator } from "../simulator/types.js";
import { connectorDefinitionSchema } from "./schema/connector-schema.js";
import { buildConnector } from "./test-support.js";

const LOGIN = "etm-user";
const PASSWORD = "etm-pass-0123456789";
const env: Record<string, string> = { ETM_LOGIN: LOGIN, ETM_PASSWORD: PASSWORD };

const shipped = JSON.parse(
  readFileSync(new URL("../../config/suppliers/etm-catalog.json", import.meta.url), "utf8"),
) as Record<string, unknown> & { export: { create: object; poll: object } };

let sim: Simulator;
let pool: pg.Pool;
t.before(async () => {
  sim = await startSimulator();
  pool = testPool(t, await createTestDatabase(t), 6);
});
t.teardown(() => sim.close());

function configure(name: string, size: number): void {
  sim.configure(name, {
    size,
    profile: "etm",
    auth: {
      type: "session",
      loginPath: "/api/v1/user/login",
      credentials: { log: LOGIN, pwd: PASSWORD },
      expiredAs: "body403",
    },
  });
}

/** The shipped file aimed at `name`, fast, with the simulator's job options on the create request. */
function definition(name: string, jobQuery: Record<string, string> = {}) {
  const def = structuredClone(shipped);
  return connectorDefinitionSchema.parse({
    ...def,
    baseUrl: sim.baseUrl(name),
    rateLimit: { requestsPerSecond: 1000, burst: 1000, maxConcurrency: 1 },
    auth: { ...(def.auth as object), minLoginIntervalMs: 0 },
    export: {
      ...def.export,
      create: { ...def.export.create, query: jobQuery },
      poll: { ...def.export.poll, intervalMs: 20 },
    },
  });
}

async function tick(
  tt: { teardown(fn: () => unknown): void },
  name: string,
  jobQuery?: Record<string, string>,
) {
  const { connector } = buildConnector(tt, definition(name, jobQuery), {
    supplier: name,
    readSecretEnv: (k) => env[k],
  });
  const result = await forcedTick(tickDeps(pool), name, connector);
  const { rows } = await pool.query<{ error_message: string | null }>(
    "select error_message from ingestion_runs where id = $1",
    [result.runId],
  );
  return { ...result, errorMessage: rows[0]?.error_message };
}

async function stored(supplier: string) {
  const { rows } = await pool.query(
    `select sku, name, price::text as price, currency, stock, attributes
       from supplier_offers where supplier = $1 order by sku`,
    [supplier],
  );
  return rows;
}

t.test("the job at data.uuid, ready at data.rows[0].state 1 sent as a string or as a number", async (t) => {
  // The simulator writes the state as a string on odd polls: "0", 0, "1" and "0", 1.
  for (const [name, readyAfter] of [
    ["etm-string", "3"],
    ["etm-number", "2"],
  ] as const) {
    configure(name, 12);
    const result = await tick(t, name, { readyAfter });
    t.equal(result.outcome, "success", `${name}: ${result.errorMessage}`);
    const [job] = sim.exportJobs(name);
    t.equal(job?.template, "40029846");
    t.equal(job?.polls, Number(readyAfter), `${name}: polled until ready, not past it`);
    t.equal((await stored(name)).length, 12, `${name}: every product`);
  }
});

t.test("the file is on ETM's own origin: downloaded with the session, which it needs", async (t) => {
  configure("etm-own", 5);
  const result = await tick(t, "etm-own");
  t.equal(result.outcome, "success", String(result.errorMessage));
  const [job] = sim.exportJobs("etm-own");
  t.same(job?.downloads, [{ credentials: ["query session-id"] }], "one download, carrying session-id");
  // Without the session ETM refuses the file: the session on the download is needed, not just sent.
  const bare = await request(`${sim.baseUrl("etm-own")}/report/${job?.id}/goods_report.json`);
  t.match(await bare.body.json(), { status: { code: 403 } });
});

t.test("state 2 fails the run SUPPLIER before any download", async (t) => {
  configure("etm-fail", 5);
  const result = await tick(t, "etm-fail", { fail: "1" });
  t.equal(result.state, "failed");
  t.equal(result.errorCode, "SUPPLIER");
  t.match(result.errorMessage, /export job .* failed \(data\.rows\.0\.state = "2"\)/);
  t.equal(sim.exportJobs("etm-fail")[0]?.downloads.length, 0);
});

t.test(
  "products without prices, priced 50 codes a request; manufacturer, article, characteristics kept",
  async (t) => {
    const n = 120;
    configure("etm-priced", n);
    const result = await tick(t, "etm-priced");
    t.equal(result.outcome, "success", String(result.errorMessage));
    const priceCalls = sim
      .stats("etm-priced")
      .urls.filter((u) => u.includes("/price?"))
      .map((u) => new URL(u, "http://x"));
    t.equal(priceCalls.length, Math.ceil(n / 50), "ceil(n/50) price requests");
    t.ok(
      priceCalls.every((u) => u.searchParams.get("type") === "etm"),
      "type=etm: the codes are ETM's",
    );
    const sizes = priceCalls.map(
      (u) => decodeURIComponent(u.pathname.split("/").at(-2) ?? "").split(",").length,
    );
    t.same(sizes, [50, 50, 20], "50 codes a request");
    const expected = sim
      .offers("etm-priced")
      .map((r) => {
        const p = etmProduct(r);
        return {
          sku: r.article,
          name: r.title,
          price: r.price.value,
          currency: "RUB",
          stock: null,
          attributes: {
            manufacturer: p.mnf_name,
            manufacturerCode: p.mnf_code,
            article: p.art,
            unit: p.edizm,
            minOrder: p.min_cnt,
            characteristics: p.gdsChars.map((c) => ({ name: c.gdsCharName, value: c.gdsCharVal })),
            priceWithVat: (Number(r.price.value) * 1.2).toFixed(2),
            priceTariff: r.price.value,
            priceRetail: (Number(r.price.value) * 1.5).toFixed(2),
          },
        };
      })
      .sort((a, b) => (a.sku < b.sku ? -1 : 1));
    t.same(await stored("etm-priced"), expected, "the catalog exactly, prices from the price endpoint");
    const { rows } = await pool.query<{ seq: number; records: number }>(
      "select seq, records from ingestion_run_steps where run_id = $1 order by seq",
      [result.runId],
    );
    t.same(
      rows.map((r) => r.records),
      [120],
      "pageSize 500: one step",
    );
  },
);

t.test("a server closing idle connections does not cut the file while steps are priced", async (t) => {
  // The file (460 KB) is written before the reader gets far; each step's ten price requests then
  // hold it still for a second, longer than this server keeps an idle keep-alive connection (100 ms).
  // Without the spool the run ends partial: "feed body broke off after 460891 bytes: other side closed".
  const strict = await startSimulator({ keepAliveTimeoutMs: 100 });
  t.teardown(() => strict.close());
  strict.configure("etm-strict", {
    size: 1_000,
    profile: "etm",
    auth: {
      type: "session",
      loginPath: "/api/v1/user/login",
      credentials: { log: LOGIN, pwd: PASSWORD },
      expiredAs: "body403",
    },
  });
  const def = structuredClone(shipped);
  const paced = connectorDefinitionSchema.parse({
    ...def,
    baseUrl: strict.baseUrl("etm-strict"),
    rateLimit: { requestsPerSecond: 10, burst: 1, maxConcurrency: 1 },
    auth: { ...(def.auth as object), minLoginIntervalMs: 0 },
    export: { ...def.export, poll: { ...def.export.poll, intervalMs: 20 } },
  });
  const { connector } = buildConnector(t, paced, { supplier: "etm-strict", readSecretEnv: (k) => env[k] });
  const result = await forcedTick(tickDeps(pool), "etm-strict", connector);
  t.equal(result.outcome, "success", JSON.stringify(result));
  t.equal(result.counts?.seen, 1_000, "every product of the file, in 2 steps of 500");
});
