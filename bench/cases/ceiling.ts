/**
 * Case 1, the ceiling: what PostgreSQL itself absorbs. Raw `COPY … FROM STDIN`
 * (text format, over the pg protocol from this process: bench/pg-copy.ts) of the
 * same rows into a fresh table keyed `(supplier, sku)` like `supplier_offers`. The
 * COPY text is built before the clock starts, as `psql \copy` would read a file.
 *
 * Each repetition also measures the first-load bound: the least a first load can
 * cost under the public schema (README.md, Tables), where every new offer is one row in `supplier_offers`
 * and one in `supplier_offer_observations`. It is two raw COPYs of the same rows,
 * one into a copy of each real table (`like … including all`: same columns,
 * defaults, checks and primary key), with the content hash precomputed. No
 * pipeline that writes both rows can beat it, whatever it does about HTTP, parsing
 * or validation; its ratio to the ceiling is what "× ceiling" can reach at most.
 */
import { createHash } from "node:crypto";
import type pg from "pg";
import type { Offer } from "../../internal/ingestion/ports.js";
import { type Measurement, measurement, rowsPerSecond, timed } from "../measure.js";
import { copyField, copyFrom } from "../pg-copy.js";
import type { CaseContext } from "./context.js";

const TABLE = `create table bench_copy_ceiling (
  supplier text not null, sku text not null, name text, price numeric not null,
  currency char(3), stock integer, primary key (supplier, sku))`;

const BOUND_TABLES = [
  "create table bench_bound_offers (like supplier_offers including all)",
  "create table bench_bound_observations (like supplier_offer_observations including all)",
];
const DROP_ALL = "drop table if exists bench_copy_ceiling, bench_bound_offers, bench_bound_observations";

/** The run id written in the bound's rows (its tables have no foreign key). */
const BOUND_RUN_ID = 1;

function line(fields: (string | number | null)[]): string {
  return `${fields.map(copyField).join("\t")}\n`;
}

export async function measureCeiling(ctx: CaseContext): Promise<Measurement[]> {
  const { catalog } = ctx;
  const pages = catalog.pages();
  const supplier = catalog.supplier;
  const ceilingChunks = pages.map((page) =>
    Buffer.from(
      page.offers.map((o) => line([supplier, o.sku, o.name, o.price, o.currency, o.stock])).join(""),
    ),
  );
  const hashOf = (o: Offer) =>
    createHash("md5").update(`${o.name},${o.price},${o.currency},${o.stock}`).digest("hex");
  const offerChunks: Buffer[] = [];
  const observationChunks: Buffer[] = [];
  for (const page of pages) {
    const hashes = page.offers.map(hashOf);
    offerChunks.push(
      Buffer.from(
        page.offers
          .map((o, i) =>
            line([supplier, o.sku, o.name, o.price, o.currency, o.stock, hashes[i] ?? "", BOUND_RUN_ID]),
          )
          .join(""),
      ),
    );
    observationChunks.push(
      Buffer.from(
        page.offers
          .map((o, i) => line([supplier, o.sku, BOUND_RUN_ID, o.price, o.currency, o.stock, hashes[i] ?? ""]))
          .join(""),
      ),
    );
  }

  const ceiling: number[] = [];
  const bound: number[] = [];
  for (let rep = 1; rep <= ctx.repetitions; rep++) {
    const client = await ctx.pool.connect();
    try {
      await client.query(DROP_ALL);
      await client.query(TABLE);
      for (const ddl of BOUND_TABLES) await client.query(ddl);
      await client.query("checkpoint").catch(() => {});
      const copied = await timed(() =>
        copyAll(
          client,
          "copy bench_copy_ceiling (supplier, sku, name, price, currency, stock) from stdin",
          ceilingChunks,
        ),
      );
      await client.query("checkpoint").catch(() => {});
      const both = await timed(async () => {
        const offers = await copyAll(
          client,
          "copy bench_bound_offers (supplier, sku, name, price, currency, stock, content_hash, last_run_id) from stdin",
          offerChunks,
        );
        const observations = await copyAll(
          client,
          "copy bench_bound_observations (supplier, sku, run_id, price, currency, stock, content_hash) from stdin",
          observationChunks,
        );
        return Math.min(offers, observations);
      });
      for (const [what, rows] of [
        ["ceiling", copied.value],
        ["first-load bound", both.value],
      ] as const) {
        if (rows !== catalog.size)
          throw new Error(`${what}: COPY wrote ${rows} rows, expected ${catalog.size}`);
      }
      ceiling.push(rowsPerSecond(catalog.size, copied.ms));
      bound.push(rowsPerSecond(catalog.size, both.ms));
      ctx.progress(
        `ceiling rep ${rep}: ${Math.round(ceiling.at(-1) ?? 0)} rows/s; first-load bound ${Math.round(bound.at(-1) ?? 0)} rows/s`,
      );
    } finally {
      await client.query(DROP_ALL).catch(() => {});
      client.release();
    }
  }
  return [
    measurement("ceiling.copy", "Ceiling: raw COPY FROM STDIN, keyed table", "rows/s", ceiling, {
      rows: catalog.size,
    }),
    measurement(
      "ceiling.first_load_bound",
      "First-load bound: raw COPY into supplier_offers + supplier_offer_observations copies",
      "rows/s",
      bound,
      { rows: catalog.size },
    ),
  ];
}

function copyAll(client: pg.ClientBase, sql: string, chunks: Buffer[]): Promise<number> {
  return copyFrom(
    client,
    sql,
    (async function* () {
      yield* chunks;
    })(),
  );
}
