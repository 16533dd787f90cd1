import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { migrationsFolder } from "./db.js";
import { concurrentDrop, concurrentIndex, runMigrations } from "./migrate.js";

t.test("migrations apply on an empty database and are idempotent", async (t) => {
  const url = await createTestDatabase(t, { migrated: false });
  const pool = testPool(t, url);
  await Promise.all([runMigrations(pool), runMigrations(pool), runMigrations(pool)]);
  const { rows } = await pool.query(
    "select count(*)::int as n from information_schema.tables where table_schema = 'public' and table_name in ('supplier_offers','supplier_offer_observations','ingestion_runs','ingestion_run_steps','ingestion_rejects')",
  );
  t.equal(rows[0].n, 5);
  const applied = await pool.query("select count(*)::int as n from drizzle.__drizzle_migrations");
  const files = readdirSync(migrationsFolder()).filter((f) => f.endsWith(".sql"));
  t.equal(applied.rows[0].n, files.length, "each migration recorded once");
});

t.test(
  "no migration after the first rewrites supplier_offers (it upgrades in place, docs/architecture.md, The store)",
  async (t) => {
    const journal = JSON.parse(readFileSync(join(migrationsFolder(), "meta", "_journal.json"), "utf8")) as {
      entries: { tag: string }[];
    };
    // What PostgreSQL does in place, holding the lock only for a catalog update.
    const inPlace =
      /^ALTER TABLE "supplier_offers" (ADD COLUMN "\w+" [\w ]+(\[\])?|ALTER COLUMN "\w+" DROP NOT NULL)$/;
    for (const { tag } of journal.entries.slice(1)) {
      const statements = readFileSync(join(migrationsFolder(), `${tag}.sql`), "utf8")
        .split("--> statement-breakpoint")
        .map((x) => x.trim().replace(/;$/, ""));
      const touching = statements.filter((x) => /"supplier_offers"/.test(x));
      t.same(
        touching.filter(
          (x) => !inPlace.test(x) || /\b(NOT NULL|DEFAULT)\b/.test(x.replace(/DROP NOT NULL$/, "")),
        ),
        [],
        `${tag}: every change to supplier_offers is an in-place one (nullable column without default, dropped NOT NULL)`,
      );
    }
  },
);

t.test(
  "online indexes: built after the migration's transaction, rebuilt when missing or invalid",
  async (t) => {
    const url = await createTestDatabase(t);
    const pool = testPool(t, url);
    const feedIndex = async () =>
      (
        await pool.query<{ valid: boolean }>(
          "select i.indisvalid as valid from pg_class c join pg_index i on i.indexrelid = c.oid where c.relname = 'supplier_offer_observations_id_brin'",
        )
      ).rows[0];
    t.same(await feedIndex(), { valid: true }, "the template's migrations built it");
    t.equal(
      concurrentIndex(
        'CREATE INDEX CONCURRENTLY IF NOT EXISTS "supplier_offer_observations_feed" ON "x" ("a")',
      ),
      "supplier_offer_observations_feed",
    );
    t.equal(concurrentIndex('CREATE INDEX "ingestion_events_created" ON "x" ("a")'), null);

    await pool.query("drop index supplier_offer_observations_id_brin");
    await runMigrations(pool);
    t.same(await feedIndex(), { valid: true }, "a missing index is built on the next start");

    // An invalid index, as a concurrent build that died half-way leaves it.
    await pool.query(
      "update pg_index set indisvalid = false where indexrelid = 'supplier_offer_observations_id_brin'::regclass",
    );
    t.same(await feedIndex(), { valid: false });
    await runMigrations(pool);
    t.same(await feedIndex(), { valid: true }, "an invalid index is dropped and built again");
  },
);

t.test(
  "online drops: an index a later migration drops is dropped after the commit, and never built again",
  async (t) => {
    t.equal(
      concurrentDrop('DROP INDEX CONCURRENTLY IF EXISTS "supplier_offer_observations_feed"'),
      "supplier_offer_observations_feed",
    );
    t.equal(concurrentDrop('DROP INDEX "supplier_offer_observations_feed"'), null);
    const url = await createTestDatabase(t);
    const pool = testPool(t, url);
    const oldIndex = async () =>
      (
        await pool.query(
          "select 1 from pg_class where relname = 'supplier_offer_observations_feed' and relkind = 'i'",
        )
      ).rowCount;
    t.equal(await oldIndex(), 0, "0006's (txid, id) index: not built on a new database (0008 drops it)");
    // A database migrated by a build before 0008 has it: the next start drops it, once.
    await pool.query(
      "create index supplier_offer_observations_feed on supplier_offer_observations (txid, id)",
    );
    await runMigrations(pool);
    t.equal(await oldIndex(), 0, "dropped on the next start");
    await runMigrations(pool);
    t.equal(await oldIndex(), 0, "and not built again on the one after");
  },
);

t.test(
  "three instances migrating an empty database at once, round after round: all succeed, every index valid",
  async (t) => {
    // Before the builds retried PostgreSQL's "tuple concurrently updated", 8 of 180
    // `migrate` processes failed in 60 rounds of three; in one process, one round in 40.
    const rounds = Number(process.env.MIGRATE_RACE_ROUNDS ?? 12);
    for (let round = 1; round <= rounds; round++) {
      const url = await createTestDatabase(t, { migrated: false });
      const pools = [1, 2, 3].map(() => testPool(t, url));
      const results = await Promise.allSettled(pools.map((pool) => runMigrations(pool)));
      const failed = results.flatMap((r) => (r.status === "rejected" ? [String(r.reason)] : []));
      t.same(failed, [], `round ${round}: every instance migrated`);
      const { rows } = await testPool(t, url).query<{ invalid: number; online: number }>(
        `select count(*) filter (where not i.indisvalid)::int as invalid,
                count(*) filter (where c.relname in ('supplier_offer_observations_id_brin', 'ingestion_runs_supplier_state_trigger_id'))::int as online
           from pg_index i join pg_class c on c.oid = i.indexrelid
          where c.relnamespace = 'public'::regnamespace`,
      );
      t.same(
        rows[0],
        { invalid: 0, online: 2 },
        `round ${round}: both online indexes built once, none invalid`,
      );
    }
  },
);
