/**
 * Case 8, the peers: what a user would otherwise write, on the same data, pages and
 * table, each into an empty `supplier_offers`: a drizzle `onConflictDoUpdate` loop
 * (one builder statement per page) and a hand-written multi-row `VALUES … ON
 * CONFLICT DO UPDATE` loop. Both hash in JS (node:crypto md5), as such code would.
 * Neither writes observations, steps or runs, so they do less than the product.
 */
import { createHash } from "node:crypto";
import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/node-postgres";
import type { Offer, Page } from "../../internal/ingestion/ports.js";
import { supplierOffers } from "../../internal/store/schema.js";
import { resetTables } from "../database.js";
import { type Measurement, measurement, rowsPerSecond, timed } from "../measure.js";
import type { CaseContext } from "./context.js";

function hashOf(o: Offer): string {
  return createHash("md5")
    .update(JSON.stringify([o.name, o.price, o.currency, o.stock]))
    .digest("hex");
}

async function drizzleLoop(ctx: CaseContext, pages: Page[]): Promise<number> {
  const db = drizzle(ctx.pool);
  let rows = 0;
  for (const page of pages) {
    await db
      .insert(supplierOffers)
      .values(
        page.offers.map((o) => ({
          supplier: ctx.catalog.supplier,
          sku: o.sku,
          name: o.name,
          price: o.price,
          currency: o.currency,
          stock: o.stock,
          contentHash: hashOf(o),
          lastRunId: 1,
        })),
      )
      .onConflictDoUpdate({
        target: [supplierOffers.supplier, supplierOffers.sku],
        set: {
          name: sql`excluded.name`,
          price: sql`excluded.price`,
          currency: sql`excluded.currency`,
          stock: sql`excluded.stock`,
          contentHash: sql`excluded.content_hash`,
          lastChangedAt: sql`now()`,
        },
      });
    rows += page.offers.length;
  }
  return rows;
}

async function valuesLoop(ctx: CaseContext, pages: Page[]): Promise<number> {
  let rows = 0;
  for (const page of pages) {
    const params: unknown[] = [];
    const tuples = page.offers.map((o) => {
      const n = params.push(ctx.catalog.supplier, o.sku, o.name, o.price, o.currency, o.stock, hashOf(o));
      const b = n - 7;
      return `($${b + 1}, $${b + 2}, $${b + 3}, $${b + 4}, $${b + 5}, $${b + 6}, $${b + 7}, 1)`;
    });
    await ctx.pool.query(
      `insert into supplier_offers (supplier, sku, name, price, currency, stock, content_hash, last_run_id)
       values ${tuples.join(", ")}
       on conflict (supplier, sku) do update
          set name = excluded.name, price = excluded.price, currency = excluded.currency,
              stock = excluded.stock, content_hash = excluded.content_hash, last_changed_at = now()`,
      params,
    );
    rows += page.offers.length;
  }
  return rows;
}

async function measureLoop(
  ctx: CaseContext,
  id: string,
  label: string,
  loop: (ctx: CaseContext, pages: Page[]) => Promise<number>,
): Promise<Measurement> {
  const samples: number[] = [];
  for (let rep = 1; rep <= ctx.repetitions; rep++) {
    await resetTables(ctx.pool);
    const pages = ctx.catalog.pages();
    const { ms, value: rows } = await timed(() => loop(ctx, pages));
    samples.push(rowsPerSecond(rows, ms));
    ctx.progress(`${id} rep ${rep}: ${Math.round(samples.at(-1) ?? 0)} rows/s`);
  }
  return measurement(id, label, "rows/s", samples, { rows: ctx.catalog.size });
}

export async function measurePeers(ctx: CaseContext): Promise<Measurement[]> {
  return [
    await measureLoop(ctx, "peer.values", "Peer: multi-row VALUES … ON CONFLICT loop", valuesLoop),
    await measureLoop(ctx, "peer.drizzle", "Peer: drizzle onConflictDoUpdate loop", drizzleLoop),
  ];
}
