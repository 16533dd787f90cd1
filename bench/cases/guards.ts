/**
 * What the guards cost on the write path (docs/connectors.md, Guards): one step of the store,
 * guards on against guards off, for an unchanged step and a step where every price
 * changed a little; and a step where every record is held (every price x100) against
 * an ordinary changed step. Steps alternate within each repetition, so the machine's
 * noise falls on both sides of every ratio alike.
 */
import type pg from "pg";
import type { GuardSettings, Offer, Page } from "../../internal/ingestion/ports.js";
import { commitPage } from "../../internal/store/offers.js";
import { closeRun, startRun } from "../../internal/store/runs.js";
import { resetTables } from "../database.js";
import { type Measurement, measurement, timed } from "../measure.js";
import type { CaseContext } from "./context.js";

const GUARDS: GuardSettings = {
  maxDelistRatio: 0.25,
  minDelistCount: 20,
  priceJumpFactor: 10,
  currencyChange: true,
};
const STEP = 5_000;
const SUPPLIER = "bench-guards";

const offers = (cents: (i: number) => number): Offer[] =>
  Array.from({ length: STEP }, (_, i) => {
    const c = cents(i);
    return {
      sku: `G-${String(i).padStart(7, "0")}`,
      name: `Offer ${i}`,
      price: `${Math.floor(c / 100)}.${String(c % 100).padStart(2, "0")}`,
      currency: "RUB",
      stock: i % 50,
    };
  });

/** One step of a fresh run (so each is a first commit of its step), closed without delisting. */
async function step(client: pg.ClientBase, page: Offer[], guards: GuardSettings | null): Promise<number> {
  const runId = await startRun(client, {
    supplier: SUPPLIER,
    slotStart: new Date(),
    trigger: "forced",
    owner: { hostname: "bench", pid: process.pid, bootId: "bench" },
  });
  const p: Page = { seq: 1, offers: page, rejects: [], httpAttempts: 1 };
  const { ms } = await timed(() => commitPage(client, { runId, supplier: SUPPLIER, page: p, guards }));
  await closeRun(client, { runId, walkComplete: false, errorCode: "BENCH", errorMessage: null, guards });
  return ms;
}

export async function measureGuards(ctx: CaseContext): Promise<Measurement[]> {
  await resetTables(ctx.pool);
  const client = await ctx.pool.connect();
  const base = offers((i) => 10_000 + i);
  const small = offers((i) => 10_001 + i);
  const jumped = offers((i) => (10_000 + i) * 100);
  const samples = { unchangedOn: [], unchangedOff: [], changedOn: [], changedOff: [], held: [] } as Record<
    string,
    number[]
  >;
  try {
    await step(client, base, GUARDS);
    for (let rep = 0; rep < Math.max(5, ctx.repetitions * 2); rep++) {
      // Stored: base. Unchanged on and off; then base -> small -> base (changed, on then off);
      // then every price x100 (held: the stored base stays).
      samples.unchangedOn?.push(await step(client, base, GUARDS));
      samples.unchangedOff?.push(await step(client, base, null));
      samples.changedOn?.push(await step(client, small, GUARDS));
      samples.changedOff?.push(await step(client, base, null));
      samples.held?.push(await step(client, jumped, GUARDS));
      // Decided between repetitions, so the next steps do not pay for superseding them.
      await client.query(
        "update ingestion_held set state = 'dismissed', decided_at = now(), decided_by = 'bench' where state = 'held'",
      );
    }
  } finally {
    client.release();
  }
  const rate = (ms: number[]) => ms.map((m) => STEP / (m / 1_000));
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
  const ratio = (a: string, b: string) => med(samples[a] ?? []) / med(samples[b] ?? []);
  ctx.progress(
    `guards: unchanged step on/off ${ratio("unchangedOn", "unchangedOff").toFixed(3)}, changed on/off ${ratio("changedOn", "changedOff").toFixed(3)}, held/changed ${ratio("held", "changedOn").toFixed(3)} (time)`,
  );
  return [
    measurement(
      "guards.unchanged_on",
      "guards on: unchanged step (5,000)",
      "rows/s",
      rate(samples.unchangedOn ?? []),
      {
        time_vs_guards_off: ratio("unchangedOn", "unchangedOff"),
      },
    ),
    measurement(
      "guards.unchanged_off",
      "guards off: unchanged step (5,000)",
      "rows/s",
      rate(samples.unchangedOff ?? []),
      {},
    ),
    measurement(
      "guards.changed_on",
      "guards on: every price changed (5,000)",
      "rows/s",
      rate(samples.changedOn ?? []),
      {
        time_vs_guards_off: ratio("changedOn", "changedOff"),
      },
    ),
    measurement(
      "guards.changed_off",
      "guards off: every price changed (5,000)",
      "rows/s",
      rate(samples.changedOff ?? []),
      {},
    ),
    measurement(
      "guards.held",
      "guards on: every price x100, all held (5,000)",
      "rows/s",
      rate(samples.held ?? []),
      {
        time_vs_changed_step: ratio("held", "changedOn"),
      },
    ),
  ];
}
