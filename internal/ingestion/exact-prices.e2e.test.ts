// Prices keep every digit (docs/architecture.md, The invariants (4); docs/connectors.md, Validation): decimals of any precision,
// sent by the simulator as JSON strings and as JSON number literals, go through a real
// tick (declarative connector over loopback HTTP, lease, page transaction) into a real
// PostgreSQL and read back exactly as sent; change detection follows the number.
import fc from "fast-check";
import type pg from "pg";
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { forcedTick, tickDeps } from "../../test/helpers/tick.js";
import { buildConnector, simDefinition } from "../connectors/test-support.js";
import { skuOf } from "../simulator/catalog.js";
import { startSimulator } from "../simulator/server.js";
import type { Simulator } from "../simulator/types.js";

/** One forced tick of `name` against the simulator; returns the run id. */
async function tick(
  t: { teardown(fn: () => unknown): void },
  pool: pg.Pool,
  sim: Simulator,
  name: string,
): Promise<{ runId: number; outcome: string }> {
  const { connector } = buildConnector(
    t,
    simDefinition(sim.baseUrl(name), { request: { path: "/v1/offers", query: { limit: "50" } } }),
    {
      supplier: name,
    },
  );
  const result = await forcedTick(tickDeps(pool), name, connector);
  return { runId: Number(result.runId), outcome: result.outcome };
}

/** A non-negative decimal of 1–60 digits, without superfluous leading zeros. */
const decimal = fc
  .tuple(
    fc.oneof(fc.constant("0"), fc.stringMatching(/^[1-9]\d{0,39}$/)),
    fc.oneof(fc.constant(""), fc.stringMatching(/^\d{1,40}$/)),
  )
  .filter(([integer, fraction]) => integer.length + fraction.length <= 60)
  .map(([integer, fraction]) => (fraction ? `${integer}.${fraction}` : integer));

t.test("random decimals of 1–60 digits, as strings and as JSON numbers, are stored as sent", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  const pool = testPool(t, await createTestDatabase(t), 4);
  let n = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(decimal, { minLength: 1, maxLength: 120 }),
      fc.constantFrom("string" as const, "number" as const),
      async (prices, priceFormat) => {
        const name = `p${n++}`;
        sim.configure(name, { size: prices.length, pageSize: 50, priceFormat });
        sim.mutate(name, { setPrices: Object.fromEntries(prices.map((p, i) => [skuOf(name, i), p])) });
        const { runId, outcome } = await tick(t, pool, sim, name);
        if (outcome !== "success") throw new Error(`tick ${name} ended ${outcome}`);
        const { rows } = await pool.query<{ sku: string; price: string; observed: string | null }>(
          `select o.sku, o.price::text as price, b.price::text as observed
             from supplier_offers o
             left join supplier_offer_observations b on b.supplier = o.supplier and b.sku = o.sku and b.run_id = $2
            where o.supplier = $1 order by o.sku`,
          [name, runId],
        );
        if (rows.length !== prices.length)
          throw new Error(`${rows.length} offers stored of ${prices.length}`);
        for (const [i, row] of rows.entries()) {
          const sent = prices[i] as string;
          // A JSON number that a double holds exactly is parsed as one: `1.50` arrives as 1.5.
          const expected = priceFormat === "number" ? await trimScale(pool, sent) : sent;
          const stored = priceFormat === "number" ? await trimScale(pool, row.price) : row.price;
          if (stored !== expected || row.observed !== row.price) {
            throw new Error(
              `${row.sku}: sent ${sent} (${priceFormat}), stored ${row.price}, observed ${row.observed}`,
            );
          }
        }
      },
    ),
    { numRuns: 30 },
  );
  t.pass("every price read back digit for digit (30 ticks)");
});

async function trimScale(pool: pg.Pool, text: string): Promise<string> {
  const { rows } = await pool.query<{ v: string }>("select trim_scale($1::numeric)::text as v", [text]);
  return rows[0]?.v ?? "";
}

for (const priceFormat of ["string", "number"] as const) {
  t.test(`change detection follows the number, not the text (${priceFormat})`, async (t) => {
    const sim = await startSimulator();
    t.teardown(() => sim.close());
    const pool = testPool(t, await createTestDatabase(t), 4);
    const name = `c${priceFormat}`;
    const sku = skuOf(name, 0);
    sim.configure(name, { size: 1, priceFormat });
    const observations = async () =>
      (
        await pool.query<{ price: string }>(
          "select price::text as price from supplier_offer_observations where supplier = $1 order by observed_at, run_id",
          [name],
        )
      ).rows.map((r) => r.price);
    const steps: [string, string, number][] = [
      // sent, runs' records_updated expected, observations in all after it
      ["1.5", "inserted", 1],
      ["1.50", "unchanged", 1],
      ["1.5000000000000000001", "updated", 2],
      ["1.50000000000000000010", "unchanged", 2],
      ["1.5e0", "updated", 3],
      ["15e-1", "unchanged", 3],
    ];
    for (const [sent, expected, count] of steps) {
      sim.mutate(name, { setPrices: { [sku]: sent } });
      const { runId, outcome } = await tick(t, pool, sim, name);
      t.equal(outcome, "success", `${sent}: tick succeeded`);
      const { rows } = await pool.query(
        "select records_inserted, records_updated, records_unchanged from ingestion_runs where id = $1",
        [runId],
      );
      const run = rows[0];
      const got = run.records_inserted ? "inserted" : run.records_updated ? "updated" : "unchanged";
      t.equal(got, expected, `${sent} after the previous: ${expected}`);
      t.equal((await observations()).length, count, `${sent}: ${count} observation(s)`);
    }
    t.same(
      await observations(),
      ["1.5", "1.5000000000000000001", "1.5"],
      "each observation holds the price as sent",
    );
  });
}

t.test("an invalid number literal is a reject whose raw payload keeps every digit", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  const pool = testPool(t, await createTestDatabase(t), 4);
  sim.configure("neg", { size: 4, priceFormat: "number" });
  sim.mutate("neg", {
    setPrices: {
      [skuOf("neg", 0)]: "-12345678901234567890.123456789",
      [skuOf("neg", 1)]: "68674.6235934470499303",
      [skuOf("neg", 2)]: "1e131072",
    },
  });
  const { runId, outcome } = await tick(t, pool, sim, "neg");
  t.equal(outcome, "success");
  const { rows } = await pool.query<{ reason: string; value: string }>(
    "select reason, (raw->'price'->'value')::text as value from ingestion_rejects where run_id = $1 order by id",
    [runId],
  );
  t.same(
    rows.map((r) => r.value),
    ["-12345678901234567890.123456789", '"1e131072"'],
    "raw kept: as a number, or as its text where jsonb's numeric cannot hold it",
  );
  t.match(rows[0]?.reason, /^price \(price\.value\) is negative: -12345678901234567890\.123456789$/);
  t.match(rows[1]?.reason, /^price \(price\.value\) is out of the range of PostgreSQL numeric: 1e131072$/);
  const { rows: stored } = await pool.query<{ sku: string; price: string }>(
    "select sku, price::text as price from supplier_offers order by sku",
  );
  t.same(
    stored.map((r) => r.sku),
    [skuOf("neg", 1), skuOf("neg", 3)],
  );
  t.equal(stored[0]?.price, "68674.6235934470499303", "the valid long literal is stored as sent");
});

t.test("the examples of the price rules, end to end", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  const pool = testPool(t, await createTestDatabase(t), 4);
  const cases: [string, "string" | "number", string[]][] = [
    ["s", "string", ["0.000345", "12345678901234567890.12345678901234567890", "1.5e3", "2E-7"]],
    ["n", "number", ["4821.1234567890123457", "1.5e3", "2E-7", "0.000345"]],
  ];
  for (const [name, priceFormat, prices] of cases) {
    sim.configure(name, { size: prices.length, priceFormat });
    sim.mutate(name, { setPrices: Object.fromEntries(prices.map((p, i) => [skuOf(name, i), p])) });
    t.equal((await tick(t, pool, sim, name)).outcome, "success");
  }
  const { rows } = await pool.query<{ supplier: string; price: string }>(
    "select supplier, price::text as price from supplier_offers order by supplier, sku",
  );
  t.same(
    rows.map((r) => `${r.supplier}:${r.price}`),
    [
      "n:4821.1234567890123457",
      "n:1500",
      "n:0.0000002",
      "n:0.000345",
      "s:0.000345",
      "s:12345678901234567890.12345678901234567890",
      "s:1500",
      "s:0.0000002",
    ],
  );
});
