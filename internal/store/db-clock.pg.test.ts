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
  // The offset is known to half the round trip of the sample it comes from (plus 1 ms of
  // Date.now()'s whole milliseconds); the bound follows that round trip, which is long
  // when the machine is loaded (CI runs two suites side by side).
  const roundTripMs = clock.lastMeasurement?.roundTripMs ?? Number.POSITIVE_INFINITY;
  t.ok(roundTripMs < 1_000, `over a loopback round trip (${roundTripMs} ms)`);
  const bound = roundTripMs / 2 + 1;
  t.ok(
    Math.abs(clock.offsetMs - 90_000) <= bound,
    `offset ${clock.offsetMs.toFixed(1)} ms, 90,000 within ${bound.toFixed(1)} ms`,
  );
  t.ok(Math.abs(clock.now() - Date.now()) <= bound + 1, "the corrected clock reads the database's time");
  await clock.stop();
});
