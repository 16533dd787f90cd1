import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { OffsetClock, systemClock } from "../platform/clock.js";
import { createLogger } from "../platform/logger.js";
import { SecretRegistry } from "../platform/redact.js";
import { DatabaseClock } from "../scheduler/database-clock.js";
import { databaseClockTimestamp, databaseNow } from "./db-clock.js";

t.test("now() is the transaction's start; clock_timestamp() moves", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 2);
  const client = await pool.connect();
  t.teardown(() => client.release());
  await client.query("begin");
  const a = await databaseNow(client);
  const c1 = await databaseClockTimestamp(client);
  await client.query("select pg_sleep(0.05)");
  const b = await databaseNow(client);
  const c2 = await databaseClockTimestamp(client);
  await client.query("commit");
  t.equal(a, b, "now() stands still within a transaction");
  t.ok(c2 - c1 >= 45, `clock_timestamp() moved ${c2 - c1} ms`);
  t.ok(Math.abs((await databaseNow(pool)) - Date.now()) < 1_000, "same host: within a second of Date.now()");
});

t.test("measured against a real server, a host clock 90 s behind is found 90 s behind", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 2);
  const clock = new DatabaseClock({
    host: new OffsetClock(systemClock, -90_000),
    readDatabaseMs: () => databaseClockTimestamp(pool),
    log: createLogger({ level: "silent", secrets: new SecretRegistry() }),
  });
  await clock.start();
  t.ok(Math.abs(clock.offsetMs - 90_000) < 50, `offset ${clock.offsetMs.toFixed(1)} ms`);
  t.ok(Math.abs(clock.now() - Date.now()) < 50, "the corrected clock reads the database's time");
  t.ok((clock.lastMeasurement?.roundTripMs ?? 99) < 50, "over a loopback round trip");
  await clock.stop();
});
