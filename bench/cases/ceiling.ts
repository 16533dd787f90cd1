/**
 * Case 1, the ceiling: what PostgreSQL itself absorbs. Raw `COPY … FROM STDIN`
 * (text format, over the pg protocol from this process: bench/pg-copy.ts) of the
 * same rows into a fresh table keyed `(supplier, sku)` like `supplier_offers`. The
 * COPY text is built before the clock starts, as `psql \copy` would read a file.
 */

import { type Measurement, measurement, rowsPerSecond, timed } from "../measure.js";
import { copyField, copyFrom } from "../pg-copy.js";
import type { CaseContext } from "./context.js";

const TABLE = `create table bench_copy_ceiling (
  supplier text not null, sku text not null, name text, price numeric not null,
  currency char(3), stock integer, primary key (supplier, sku))`;

export async function measureCeiling(ctx: CaseContext): Promise<Measurement> {
  const { catalog } = ctx;
  const chunks = catalog
    .pages()
    .map((page) =>
      Buffer.from(
        page.offers
          .map(
            (o) =>
              `${copyField(catalog.supplier)}\t${copyField(o.sku)}\t${copyField(o.name)}\t${copyField(o.price)}\t${copyField(o.currency)}\t${copyField(o.stock)}\n`,
          )
          .join(""),
      ),
    );
  const samples: number[] = [];
  for (let rep = 1; rep <= ctx.repetitions; rep++) {
    const client = await ctx.pool.connect();
    try {
      await client.query("drop table if exists bench_copy_ceiling");
      await client.query(TABLE);
      await client.query("checkpoint").catch(() => {});
      const { ms, value: rows } = await timed(() =>
        copyFrom(
          client,
          "copy bench_copy_ceiling (supplier, sku, name, price, currency, stock) from stdin",
          (async function* () {
            yield* chunks;
          })(),
        ),
      );
      if (rows !== catalog.size)
        throw new Error(`ceiling: COPY wrote ${rows} rows, expected ${catalog.size}`);
      samples.push(rowsPerSecond(rows, ms));
      ctx.progress(`ceiling rep ${rep}: ${Math.round(samples.at(-1) ?? 0)} rows/s`);
    } finally {
      await client.query("drop table if exists bench_copy_ceiling").catch(() => {});
      client.release();
    }
  }
  return measurement("ceiling.copy", "Ceiling: raw COPY FROM STDIN, keyed table", "rows/s", samples, {
    rows: catalog.size,
  });
}
