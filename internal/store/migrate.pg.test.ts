import { readdirSync } from "node:fs";
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { migrationsFolder } from "./db.js";
import { runMigrations } from "./migrate.js";

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
