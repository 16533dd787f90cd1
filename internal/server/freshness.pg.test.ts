import type pg from "pg";
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { ManualClock, systemClock } from "../platform/clock.js";
import { createFreshnessCache, readLastSuccesses } from "./freshness.js";
import { deadDatabasePool, hungDatabasePool, insertSuccess } from "./test-support.js";

t.test("readLastSuccesses takes the newest complete walk per supplier, null for none", async (t) => {
  const db = testPool(t, await createTestDatabase(t));
  await insertSuccess(db, "etm", new Date("2025-01-01T06:00:00Z"));
  await insertSuccess(db, "etm", new Date("2025-01-01T12:00:00Z"));
  await insertSuccess(db, "other", new Date("2025-01-02T00:00:00Z"));
  // Later runs that did not succeed do not count.
  await db.query(
    `insert into ingestion_runs (supplier, slot_start, trigger, state, owner, finished_at)
     values ('etm', '2025-01-01T18:00:00Z', 'schedule', 'failed', '{}'::jsonb, '2025-01-01T18:05:00Z'),
            ('etm', '2025-01-02T00:00:00Z', 'schedule', 'running', '{}'::jsonb, null),
            ('iek', '2025-01-02T00:00:00Z', 'schedule', 'partial', '{}'::jsonb, '2025-01-02T00:01:00Z')`,
  );
  const result = (await readLastSuccesses(db, ["etm", "iek"])).lastSuccess;
  t.same([...result.keys()], ["etm", "iek"], "only the suppliers asked for");
  t.equal(result.get("etm")?.toISOString(), "2025-01-01T12:00:00.000Z");
  t.equal(result.get("iek"), null);
  t.same((await readLastSuccesses(db, [])).lastSuccess, new Map());
});

/** The real query, counted. */
function countingRead() {
  const counter = {
    calls: 0,
    read: (db: pg.Pool, suppliers: string[]) => {
      counter.calls++;
      return readLastSuccesses(db, suppliers);
    },
  };
  return counter;
}

t.test("a read is reused for cacheMs: one query, an insert inside the window unseen", async (t) => {
  const db = testPool(t, await createTestDatabase(t));
  const clock = new ManualClock(Date.parse("2025-01-01T00:00:00Z"));
  const counter = countingRead();
  const cache = createFreshnessCache({
    db,
    suppliers: ["etm"],
    clock,
    cacheMs: 5_000,
    queryTimeoutMs: 2_000,
    read: counter.read,
  });

  const [a, b] = await Promise.all([cache.get(), cache.get()]);
  t.equal(counter.calls, 1, "concurrent reads share one query");
  t.equal(a, b);
  t.equal(a.database, "ok");
  t.equal(a.lastSuccess.get("etm"), null);

  await insertSuccess(db, "etm", new Date("2024-12-31T23:00:00Z"));
  await clock.advance(4_999);
  const cached = await cache.get();
  t.equal(counter.calls, 1, "no second query inside the window");
  t.equal(cached.lastSuccess.get("etm"), null, "the insert is not seen inside the window");

  await clock.advance(1);
  const fresh = await cache.get();
  t.equal(counter.calls, 2, "one query once the window has passed");
  t.equal(fresh.lastSuccess.get("etm")?.toISOString(), "2024-12-31T23:00:00.000Z");
});

t.test("an unreachable database is reported, keeping the last known values", async (t) => {
  const good = testPool(t, await createTestDatabase(t));
  await insertSuccess(good, "etm", new Date("2025-01-01T00:00:00Z"));
  const dead = await deadDatabasePool(t);
  let db = good;
  const clock = new ManualClock(Date.parse("2025-01-01T01:00:00Z"));
  const cache = createFreshnessCache({
    db: good,
    suppliers: ["etm"],
    clock,
    cacheMs: 1_000,
    queryTimeoutMs: 2_000,
    read: (_db, suppliers) => readLastSuccesses(db, suppliers),
  });
  t.equal((await cache.get()).database, "ok");
  db = dead;
  await clock.advance(1_000);
  const down = await cache.get();
  t.equal(down.database, "unreachable");
  t.match(down.error, /ECONNREFUSED|connect/);
  t.equal(down.lastSuccess.get("etm")?.toISOString(), "2025-01-01T00:00:00.000Z");
  db = good;
  await clock.advance(1_000);
  t.equal((await cache.get()).database, "ok", "recovers after the window");
});

t.test("a hung database answers unreachable within the bound, with one query outstanding", async (t) => {
  const db = await hungDatabasePool(t);
  const counter = countingRead();
  let now = 0;
  // Real sleeps for the bound, a hand-moved `now` for the cache window.
  const clock = { now: () => now, sleep: systemClock.sleep };
  const cache = createFreshnessCache({
    db,
    suppliers: ["etm"],
    clock,
    cacheMs: 1_000,
    queryTimeoutMs: 200,
    read: counter.read,
  });
  const started = performance.now();
  const first = await cache.get();
  const elapsed = performance.now() - started;
  t.equal(first.database, "unreachable");
  t.match(first.error, /did not answer within 200 ms/);
  t.ok(elapsed >= 190 && elapsed < 1_500, `answered after ${Math.round(elapsed)} ms`);

  now += 1_000;
  t.equal((await cache.get()).database, "unreachable");
  t.equal(counter.calls, 1, "the hung query is awaited again, not duplicated");
});
