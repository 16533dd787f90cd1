// The guards through real ticks (docs/connectors.md, Guards): the declarative connector
// over loopback HTTP against the simulator, the advisory lease, the page transactions and
// the close, in a real PostgreSQL. Each guard trips at its boundary and not below it; and
// for random catalogs and random supplier changes, hold-then-approve stores exactly what
// the same walks store with the guards off.
import fc from "fast-check";
import type pg from "pg";
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { forcedTick, tickDeps } from "../../test/helpers/tick.js";
import { buildConnector, simDefinition } from "../connectors/test-support.js";
import { skuOf } from "../simulator/catalog.js";
import { startSimulator } from "../simulator/server.js";
import type { Simulator } from "../simulator/types.js";
import { decideHeld, listHeld } from "../store/held.js";
import { inTransaction } from "../store/queryable.js";
import type { GuardSettings } from "./ports.js";
import type { TickDeps } from "./tick.js";

const GUARDS: GuardSettings = {
  maxDelistRatio: 0.25,
  minDelistCount: 20,
  priceJumpFactor: 10,
  currencyChange: true,
};

/** One forced tick of `name` against the simulator, with `guards`. */
async function tick(
  t: { teardown(fn: () => unknown): void },
  deps: TickDeps,
  sim: Simulator,
  name: string,
  guards: GuardSettings | null,
) {
  const { connector } = buildConnector(
    t,
    simDefinition(sim.baseUrl(name), { request: { path: "/v1/offers", query: { limit: "50" } } }),
    { supplier: name },
  );
  return forcedTick(deps, name, connector, guards);
}

async function priceOf(pool: pg.Pool, name: string, i: number): Promise<string | undefined> {
  const { rows } = await pool.query<{ price: string }>(
    "select price::text as price from supplier_offers where supplier = $1 and sku = $2",
    [name, skuOf(name, i)],
  );
  return rows[0]?.price;
}

t.test("through real ticks: each guard at its boundary", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  const pool = testPool(t, await createTestDatabase(t), 4);
  const deps = tickDeps(pool);
  sim.configure("acme", { size: 200, pageSize: 50 });
  const prices = (entries: [number, string][]) =>
    sim.mutate("acme", { setPrices: Object.fromEntries(entries.map(([i, p]) => [skuOf("acme", i), p])) });
  prices([
    [0, "12.50"],
    [1, "12.50"],
    [2, "7.00"],
  ]);
  const first = await tick(t, deps, sim, "acme", GUARDS);
  t.equal(first.outcome, "success");

  // x10 exactly is held, just below is applied; a currency switch is held.
  prices([
    [0, "125.00"],
    [1, "124.99"],
  ]);
  sim.mutate("acme", { setCurrencies: { [skuOf("acme", 2)]: "USD" } });
  const jump = await tick(t, deps, sim, "acme", GUARDS);
  t.same([jump.outcome, jump.state, jump.errorCode], ["partial", "partial", "GUARD"]);
  t.equal(jump.counts?.held, 2);
  t.equal(await priceOf(pool, "acme", 0), "12.50", "held: the stored price stays");
  t.equal(await priceOf(pool, "acme", 1), "124.99", "applied");
  t.same(
    (await listHeld(pool, { runId: Number(jump.runId) })).map((i) => [i.kind, i.reason]),
    [
      ["price_jump", "price 12.50 -> 125.00 (x10)"],
      ["currency", "currency EUR -> USD"],
    ],
  );
  const metrics = await deps.metrics.registry.getSingleMetricAsString("ingestion_guard_held_total");
  t.match(metrics, /ingestion_guard_held_total\{supplier="acme",kind="price_jump"\} 1$/m);
  t.match(metrics, /ingestion_guard_held_total\{supplier="acme",kind="currency"\} 1$/m);

  // Delisting: 50 of 200 missing is exactly 25 %: delisted. Then 38 of 150 (25.3 %, > 20): held.
  sim.mutate("acme", { remove: 50 });
  const quarter = await tick(t, deps, sim, "acme", GUARDS);
  t.equal(quarter.counts?.delisted, 50);
  sim.mutate("acme", { remove: 38 });
  const held = await tick(t, deps, sim, "acme", GUARDS);
  t.same([held.outcome, held.errorCode, held.counts?.delisted], ["partial", "GUARD", 0]);
  const { rows } = await pool.query<{ n: number }>(
    "select count(*)::int as n from supplier_offers where supplier = 'acme' and delisted_at is null",
  );
  t.equal(rows[0]?.n, 150, "nothing delisted");
  t.match(
    await deps.metrics.registry.getSingleMetricAsString("ingestion_guard_held_total"),
    /kind="delist"\} 1$/m,
  );
});

t.test(
  "through real ticks: a field the supplier renamed is kept, held once per run, and emptied on approval",
  async (t) => {
    const sim = await startSimulator();
    t.teardown(() => sim.close());
    const pool = testPool(t, await createTestDatabase(t), 4);
    const deps = tickDeps(pool);
    sim.configure("renamer", { size: 120, pageSize: 50 });
    const first = await tick(t, deps, sim, "renamer", GUARDS);
    t.equal(first.outcome, "success");
    const stocked = await pool.query<{ n: number }>(
      "select count(*)::int as n from supplier_offers where supplier = 'renamer' and stock is not null",
    );
    t.equal(stocked.rows[0]?.n, 120);
    // Same catalog, `stock.total` now sent as `stock.amount`: the connector's path matches nothing.
    sim.configure("renamer", {
      size: 120,
      pageSize: 50,
      renameField: { from: "stock.total", to: "stock.amount" },
    });
    const held = await tick(t, deps, sim, "renamer", GUARDS);
    t.same([held.outcome, held.errorCode, held.counts?.held], ["partial", "GUARD", 1]);
    t.equal(held.counts?.updated, 0, "a change of the vanished field alone writes nothing");
    const still = await pool.query<{ n: number }>(
      "select count(*)::int as n from supplier_offers where supplier = 'renamer' and stock is not null",
    );
    t.equal(still.rows[0]?.n, 120, "every stored stock kept");
    const [item] = await listHeld(pool, { runId: Number(held.runId) });
    t.same(
      [item?.kind, item?.field, item?.reason],
      [
        "field",
        "stock",
        "stock: stock.total matched nothing in 120 of 120 records (120 offers have it stored)",
      ],
      "one item for the run, its counts summed over its three steps",
    );
    const { rows } = await pool.query("select field_coverage from ingestion_runs where id = $1", [
      held.runId,
    ]);
    t.match(rows[0]?.field_coverage, {
      stock: { source: "stock.total", records: 120, withValue: 0 },
      price: { records: 120, withValue: 120 },
    });
    t.match(
      await deps.metrics.registry.getSingleMetricAsString("ingestion_guard_held_total"),
      /kind="field"\} 1$/m,
    );
    await inTransaction(pool, (tx) =>
      decideHeld(tx, { runId: Number(held.runId), decision: "approve", by: "test" }),
    );
    const emptied = await pool.query<{ n: number; observed: number }>(
      `select (select count(*)::int from supplier_offers where supplier = 'renamer' and stock is not null) as n,
            (select count(*)::int from supplier_offer_observations where run_id = $1) as observed`,
      [held.runId],
    );
    t.same(
      emptied.rows[0],
      { n: 0, observed: 120 },
      "approval writes the absence, observed with the held run's id",
    );
    const next = await tick(t, deps, sim, "renamer", GUARDS);
    t.same([next.outcome, next.counts?.held], ["success", 0], "nothing stored to keep any more");
  },
);

/** The catalog as stored, for comparing two databases walked alike. */
async function catalogOf(pool: pg.Pool, name: string): Promise<unknown[]> {
  const { rows } = await pool.query(
    `select sku, name, trim_scale(price)::text as price, currency, stock, attributes, delisted_at is null as listed
       from supplier_offers where supplier = $1 order by sku`,
    [name],
  );
  return rows;
}

/** A supplier's change between two walks, applied to the simulator. */
type Change =
  | { kind: "jump"; at: number; factor: "100" | "0.01" }
  | { kind: "price"; at: number; cents: number }
  | { kind: "currency"; at: number }
  | { kind: "remove"; n: number }
  | { kind: "add"; n: number };

const change: fc.Arbitrary<Change> = fc.oneof(
  fc.record({
    kind: fc.constant("jump" as const),
    at: fc.nat(200),
    factor: fc.constantFrom("100" as const, "0.01" as const),
  }),
  fc.record({
    kind: fc.constant("price" as const),
    at: fc.nat(200),
    cents: fc.integer({ min: 1, max: 999_999 }),
  }),
  fc.record({ kind: fc.constant("currency" as const), at: fc.nat(200) }),
  fc.record({ kind: fc.constant("remove" as const), n: fc.integer({ min: 1, max: 80 }) }),
  fc.record({ kind: fc.constant("add" as const), n: fc.integer({ min: 1, max: 20 }) }),
);

function applyChange(sim: Simulator, name: string, c: Change): void {
  const live = sim.offers(name);
  if (c.kind === "remove") sim.mutate(name, { remove: Math.min(c.n, Math.max(0, live.length - 1)) });
  else if (c.kind === "add") sim.mutate(name, { add: c.n });
  else {
    const record = live[c.at % live.length];
    if (!record) return;
    if (c.kind === "currency") sim.mutate(name, { setCurrencies: { [record.article]: "USD" } });
    else {
      const [units = "0", fraction = "00"] = record.price.value.split(".");
      const text =
        c.kind === "price"
          ? `${Math.floor(c.cents / 100)}.${String(c.cents % 100).padStart(2, "0")}`
          : c.factor === "100"
            ? `${units}${fraction.padEnd(2, "0")}`
            : `0.${"0".repeat(Math.max(0, 2 - units.length))}${units}${fraction}`;
      sim.mutate(name, { setPrices: { [record.article]: text } });
    }
  }
}

t.test("hold-then-approve stores what the same walks store with guards off", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  const guarded = testPool(t, await createTestDatabase(t), 4);
  const open = testPool(t, await createTestDatabase(t), 4);
  const guardedDeps = tickDeps(guarded);
  const openDeps = tickDeps(open);
  let n = 0;
  let heldRounds = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 40, max: 200 }),
      fc.array(fc.array(change, { minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 3 }),
      async (size, rounds) => {
        const name = `prop${n++}`;
        sim.configure(name, { size, pageSize: 50 });
        for (const deps of [guardedDeps, openDeps]) {
          const r = await tick(t, deps, sim, name, deps === guardedDeps ? GUARDS : null);
          if (r.outcome !== "success") throw new Error(`first walk of ${name}: ${r.outcome}`);
        }
        for (const changes of rounds) {
          for (const c of changes) applyChange(sim, name, c);
          const g = await tick(t, guardedDeps, sim, name, GUARDS);
          const o = await tick(t, openDeps, sim, name, null);
          if (o.outcome !== "success") throw new Error(`guards off: ${o.outcome} ${o.errorCode}`);
          if (g.errorCode === "GUARD") {
            heldRounds++;
            await inTransaction(guarded, (tx) =>
              decideHeld(tx, { runId: Number(g.runId), decision: "approve", by: "property" }),
            );
          } else if (g.outcome !== "success") throw new Error(`guarded: ${g.outcome} ${g.errorCode}`);
          const [a, b] = [await catalogOf(guarded, name), await catalogOf(open, name)];
          if (JSON.stringify(a) !== JSON.stringify(b)) {
            throw new Error(`${name}: catalogs differ after ${JSON.stringify(changes)}`);
          }
        }
      },
    ),
    { numRuns: 25 },
  );
  t.ok(heldRounds > 5, `the guards held in ${heldRounds} rounds: the property was exercised`);
});
