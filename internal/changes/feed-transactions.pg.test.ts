/**
 * The feed's index of transactions (`supplier_offer_feed_transactions`, migration 0008):
 * one row per writing transaction with its id range, kept by triggers; the feed reads
 * each transaction's rows by that range. Exactly-once under concurrency is tested in
 * feed.pg.test.ts; here, the parts that keep every row inside its transaction's range.
 */
import { readMigrationFiles } from "drizzle-orm/migrator";
import type pg from "pg";
import t from "tap";
import { createTestDatabase, type Teardown, testPool } from "../../test/helpers/db.js";
import { until } from "../../test/helpers/fixtures.js";
import type { Offer } from "../ingestion/ports.js";
import { migrationsFolder } from "../store/db.js";
import { runMigrations } from "../store/migrate.js";
import { commitPage } from "../store/offers.js";
import { closeRun, startRun } from "../store/runs.js";
import { type Change, type Cursor, FEED_START, parseCursor, readChanges } from "./feed.js";

const OWNER = { hostname: "test-host", pid: 1, bootId: "boot" };

function offers(skus: string[], price = "10.50"): Offer[] {
  return skus.map((sku) => ({ sku, name: `Offer ${sku}`, price, currency: "EUR", stock: 3 }));
}

/**
 * Every change after `since`, in feed order, read two at a time, once there are `n`: the feed
 * lags behind the oldest transaction running anywhere on the server (other test files' too).
 */
function drain(db: pg.Pool, since: Cursor, n: number): Promise<Change[]> {
  return until(
    async () => {
      const changes: Change[] = [];
      let cursor = since;
      for (let i = 0; i < 1000; i++) {
        const batch = await readChanges(db, { since: cursor, limit: 2 });
        if (batch.length === 0) return changes.length >= n ? changes : null;
        changes.push(...batch);
        cursor = parseCursor((batch.at(-1) as Change).cursor);
      }
      throw new Error("feed did not end");
    },
    30_000,
    `${n} changes in the feed`,
  );
}

/** The transactions' rows, and each observation with the range of its own transaction. */
async function ranges(db: pg.Pool) {
  const { rows } = await db.query<{ sku: string; txid: string; id: string; inside: boolean }>(
    `select o.sku, o.txid::text, o.id::text,
            exists (select 1 from supplier_offer_feed_transactions f
                     where f.txid = o.txid and o.id between f.min_id and f.max_id) as inside
       from supplier_offer_observations o order by o.txid, o.id`,
  );
  return rows;
}

t.test(
  "a row rewritten by a later transaction takes a new id, inside that transaction's range",
  async (t) => {
    const pool = testPool(t, await createTestDatabase(t), 4);
    const client = await pool.connect();
    t.teardown(() => client.release());
    const runId = await startRun(client, {
      supplier: "etm",
      slotStart: new Date(0),
      trigger: "forced",
      owner: OWNER,
    });
    await commitPage(client, {
      runId,
      supplier: "etm",
      page: { seq: 1, offers: offers(["A", "B", "C"]), rejects: [], httpAttempts: 1 },
    });
    const first = await ranges(pool);
    const b1 = first.find((r) => r.sku === "B");
    // Page 2 sees B again with a new price: the run's observation of B is rewritten.
    await commitPage(client, {
      runId,
      supplier: "etm",
      page: { seq: 2, offers: [...offers(["B"], "11.00"), ...offers(["D"])], rejects: [], httpAttempts: 1 },
    });
    const second = await ranges(pool);
    const b2 = second.find((r) => r.sku === "B");
    const d = second.find((r) => r.sku === "D");
    t.ok(b1 && b2 && d);
    t.not(b2?.txid, b1?.txid, "B moved to page 2's transaction");
    t.equal(b2?.txid, d?.txid);
    t.ok(BigInt(b2?.id ?? 0) > BigInt(first.at(-1)?.id ?? 0), "with an id newer than every id of page 1");
    t.same(
      second.filter((r) => !r.inside),
      [],
      "every observation lies inside its transaction's range",
    );
    const { rows: txns } = await pool.query(
      "select count(*)::int as n from supplier_offer_feed_transactions",
    );
    t.equal(txns[0].n, 2, "one row per writing transaction");
    await closeRun(client, { runId, walkComplete: true, errorCode: null, errorMessage: null });
    const feed = await drain(pool, FEED_START, 4);
    t.same(
      feed.slice(0, 2).map((c) => c.sku),
      ["A", "C"],
      "page 1's transaction: A and C",
    );
    t.same(
      feed
        .slice(2)
        .map((c) => [c.sku, c.price])
        .sort(),
      [
        ["B", "11.00"],
        ["D", "10.50"],
      ],
      "page 2's transaction: B once, in its final form, and D",
    );
  },
);

t.test("a transaction that writes through several statements: one row, its range widened", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 4);
  const client = await pool.connect();
  t.teardown(() => client.release());
  const insert = (skus: string[]) =>
    client.query(
      `insert into supplier_offer_observations (supplier, sku, run_id, content_hash, kind, txid)
       select 'etm', sku, 1, 'h', 'listed', pg_current_xact_id() from unnest($1::text[]) as sku`,
      [skus],
    );
  await insert(["X0"]); // another transaction first, so that the ranges are told apart
  await client.query("begin");
  await insert(["A", "B"]);
  await insert([]); // a statement that writes nothing leaves the range as it is
  await insert(["C"]);
  await client.query(
    `update supplier_offer_observations set price = 1, id = nextval('supplier_offer_observations_id_seq')
      where sku = 'A'`,
  );
  await client.query("commit");
  await insert(["Z"]);
  const { rows } = await pool.query<{ n: number; span: string }>(
    `select count(*)::int as n, max(max_id - min_id)::text as span from supplier_offer_feed_transactions`,
  );
  t.same(rows[0], { n: 3, span: "3" }, "three transactions; the middle one's range spans its 4 ids");
  t.same(
    (await ranges(pool)).filter((r) => !r.inside),
    [],
    "every observation inside its range",
  );
  const feed = await drain(pool, FEED_START, 5);
  t.same(
    feed.map((c) => c.sku),
    ["X0", "B", "C", "A", "Z"],
    "in (txid, id) order, A at its new id",
  );
  // A cursor inside the middle transaction reads the rest of it, then what follows.
  const afterB = parseCursor((feed[1] as Change).cursor);
  t.same(
    (await drain(pool, afterB, 3)).map((c) => c.sku),
    ["C", "A", "Z"],
  );
});

/** A database as builds before migration 0008 left it: migrations 0000–0007 applied and recorded. */
async function databaseBefore0008(t: Teardown): Promise<pg.Pool> {
  const url = await createTestDatabase(t, { migrated: false });
  const pool = testPool(t, url, 4);
  const migrations = readMigrationFiles({ migrationsFolder: migrationsFolder() });
  const before = migrations.slice(0, 8);
  for (const migration of before) {
    for (const statement of migration.sql) if (statement.trim() !== "") await pool.query(statement);
  }
  await pool.query(`create schema drizzle;
    create table drizzle.__drizzle_migrations (id serial primary key, hash text not null, created_at bigint)`);
  for (const migration of before) {
    await pool.query("insert into drizzle.__drizzle_migrations (hash, created_at) values ($1, $2)", [
      migration.hash,
      migration.folderMillis,
    ]);
  }
  return pool;
}

t.test(
  "history written before migration 0008 stays in the feed (backfilled); rows without txid stay out",
  async (t) => {
    const pool = await databaseBefore0008(t);
    const write = (skus: string[], txid = "pg_current_xact_id()") =>
      pool.query(
        `insert into supplier_offer_observations (supplier, sku, run_id, content_hash, kind, txid)
         select 'etm', sku, 1, 'h', 'listed', ${txid} from unnest($1::text[]) as sku`,
        [skus],
      );
    await write(["OLD"], "null"); // as written before 0006: no txid
    await write(["A", "B"]);
    await write(["C"]);
    const old = await pool.query(
      "select 1 from pg_class where relname = 'supplier_offer_observations_feed' and relkind = 'i'",
    );
    t.equal(old.rowCount, 1, "the 0006 (txid, id) index is there before");

    await runMigrations(pool);
    const { rows } = await pool.query("select count(*)::int as n from supplier_offer_feed_transactions");
    t.equal(rows[0].n, 2, "one row per transaction of the history");
    await write(["D"]);
    t.same(
      (await drain(pool, FEED_START, 4)).map((c) => c.sku),
      ["A", "B", "C", "D"],
      "the history and what follows, in order; the row without txid is not in the feed",
    );
    const gone = await pool.query(
      "select 1 from pg_class where relname = 'supplier_offer_observations_feed' and relkind = 'i'",
    );
    t.equal(gone.rowCount, 0, "the (txid, id) index is dropped");
  },
);

t.test("a transaction writing while migration 0008 runs: its rows are caught up, not lost", async (t) => {
  const pool = await databaseBefore0008(t);
  const writer = await pool.connect();
  t.teardown(() => writer.release());
  const insert = (skus: string[]) =>
    writer.query(
      `insert into supplier_offer_observations (supplier, sku, run_id, content_hash, kind, txid)
         select 'etm', sku, 1, 'h', 'listed', pg_current_xact_id() from unnest($1::text[]) as sku`,
      [skus],
    );
  // A page transaction of an older replica, open across the backfill: its rows are not
  // visible to the backfill, and its statement ran before the triggers existed.
  await writer.query("begin");
  await insert(["A", "B"]);
  const migrated = runMigrations(pool);
  migrated.catch(() => {});
  // The migration waits for the writer at its trigger (share row exclusive against the
  // writer's row exclusive lock), after the backfill.
  await until(
    async () =>
      (
        await pool.query(
          `select 1 from pg_stat_activity
              where wait_event_type = 'Lock' and btrim(query, E' \n') ilike 'create trigger%' and datname = current_database()`,
        )
      ).rowCount === 1 || null,
    10_000,
    "the migration waiting at its trigger",
  );
  t.equal(
    (await pool.query("select 1 from pg_class where relname = 'supplier_offer_feed_transactions'")).rowCount,
    0,
    "the migration has not committed: its table is not visible yet",
  );
  await insert(["C"]); // a second statement of the same transaction, still before the triggers
  const { rows: own } = await writer.query<{ txid: string }>("select pg_current_xact_id()::text as txid");
  await writer.query("commit");
  await migrated;
  const { rows } = await pool.query<{ txid: string; min_id: string; max_id: string }>(
    "select txid::text, min_id::text, max_id::text from supplier_offer_feed_transactions",
  );
  const ids = await pool.query<{ lo: string; hi: string }>(
    "select min(id)::text as lo, max(id)::text as hi from supplier_offer_observations",
  );
  t.same(
    rows,
    [{ txid: own[0]?.txid, min_id: ids.rows[0]?.lo, max_id: ids.rows[0]?.hi }],
    "the writer's transaction has its row, with the range of all three rows",
  );
  await insert(["D"]);
  t.same(
    (await drain(pool, FEED_START, 4)).map((c) => c.sku),
    ["A", "B", "C", "D"],
    "every row is in the feed, in order",
  );
});

t.test(
  "an unchanged page writes nothing: no observation, no transaction row, no new row version",
  async (t) => {
    const pool = testPool(t, await createTestDatabase(t), 4);
    const client = await pool.connect();
    t.teardown(() => client.release());
    const walk = async (slot: number) => {
      const runId = await startRun(client, {
        supplier: "etm",
        slotStart: new Date(slot),
        trigger: "forced",
        owner: OWNER,
      });
      await commitPage(client, {
        runId,
        supplier: "etm",
        page: { seq: 1, offers: offers(["A", "B"]), rejects: [], httpAttempts: 1 },
      });
      await closeRun(client, { runId, walkComplete: true, errorCode: null, errorMessage: null });
    };
    const state = async () =>
      (
        await pool.query(
          `select (select count(*)::int from supplier_offer_observations) as observations,
                (select count(*)::int from supplier_offer_feed_transactions) as transactions,
                (select string_agg(ctid::text || xmin::text, ',' order by sku) from supplier_offers) as versions`,
        )
      ).rows[0];
    await walk(0);
    const before = await state();
    t.same([before.observations, before.transactions], [2, 1]);
    await walk(86_400_000);
    t.same(await state(), before, "the second, unchanged walk wrote nothing the feed or the offers keep");
  },
);
