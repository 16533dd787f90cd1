import t from "tap";
import { ManualClock } from "../platform/clock.js";
import { createLogger } from "../platform/logger.js";
import { SecretRegistry } from "../platform/redact.js";
import { DatabaseClock } from "./database-clock.js";

const MIN = 60_000;

/** Lets a measurement that a clock step started finish (it takes a few turns of the event loop). */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

function sink() {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({
    secrets: new SecretRegistry(),
    level: "debug",
    destination: { write: (s: string) => lines.push(JSON.parse(s) as Record<string, unknown>) },
  });
  return { log, lines };
}

/**
 * A database server whose clock is `offsetMs` ahead of the host's, answering after
 * `toServer` ms and replying in `back` ms (per sample, cycling): the host's clock only
 * moves through the ManualClock.
 */
function server(host: ManualClock, offsetMs: () => number, legs: [number, number][]) {
  let i = 0;
  let calls = 0;
  return {
    get calls() {
      return calls;
    },
    async read(): Promise<number> {
      calls++;
      const [toServer, back] = legs[i++ % legs.length] ?? [0, 0];
      await host.advance(toServer);
      const at = host.now() + offsetMs();
      await host.advance(back);
      return at;
    },
  };
}

t.test("the offset comes from the sample with the shortest round trip", async (t) => {
  const host = new ManualClock(1_000_000);
  // Asymmetric slow legs would bias the midpoint; the 2 ms round trip bounds the error to 1 ms.
  const db = server(host, () => -90_000, [
    [40, 2],
    [1, 1],
    [30, 5],
  ]);
  const { log, lines } = sink();
  const clock = new DatabaseClock({ host, readDatabaseMs: () => db.read(), log, samples: 3 });
  await clock.start();
  t.equal(clock.offsetMs, -90_000, "offset of the 1 ms + 1 ms sample, exactly");
  t.equal(clock.lastMeasurement?.roundTripMs, 2);
  t.equal(clock.now(), host.now() - 90_000, "now() is the host clock plus the offset");
  const warn = lines.find((l) => l.level === 40);
  t.match(warn, { offset_ms: -90_000, threshold_ms: 1_000 }, "an offset over 1 s is a warning");
  t.match(String(warn?.msg), /scheduling by the database clock/);
  await clock.stop();
  await clock.stop();
});

t.test("an offset within 1 s is logged at info, not as a warning", async (t) => {
  const host = new ManualClock(5_000);
  const db = server(host, () => 400, [[1, 1]]);
  const { log, lines } = sink();
  const clock = new DatabaseClock({ host, readDatabaseMs: () => db.read(), log });
  await clock.start();
  t.equal(clock.offsetMs, 400);
  t.same(
    lines.filter((l) => (l.level as number) >= 40),
    [],
    "no warning",
  );
  t.match(
    lines.find((l) => l.msg === "database clock offset measured"),
    { level: 30, offset_ms: 400 },
  );
  await clock.stop();
});

t.test("re-measured every 10 minutes: a host clock that steps is followed", async (t) => {
  const host = new ManualClock(0);
  let offset = 250;
  const db = server(host, () => offset, [[0, 0]]);
  const { log, lines } = sink();
  const clock = new DatabaseClock({ host, readDatabaseMs: () => db.read(), log, samples: 2 });
  await clock.start();
  t.equal(db.calls, 2, "one measurement at start");
  t.equal(clock.offsetMs, 250);
  offset = 5_250; // the host's clock stepped 5 s back (or the database's forward)
  await host.advance(10 * MIN - 1);
  await settle();
  t.equal(db.calls, 2, "not before 10 minutes");
  t.equal(clock.offsetMs, 250);
  await host.advance(1);
  await settle();
  t.equal(db.calls, 4, "measured again at 10 minutes");
  t.equal(clock.offsetMs, 5_250, "the new offset is in force");
  t.ok(
    lines.some((l) => l.level === 40 && l.offset_ms === 5_250),
    "and, being over 1 s, warned about",
  );
  await host.advance(10 * MIN);
  await settle();
  t.equal(db.calls, 6, "and every 10 minutes after");
  await clock.stop();
  await host.advance(30 * MIN);
  await settle();
  t.equal(db.calls, 6, "never after stop()");
  t.equal(host.pendingSleepers, 0, "no timer left behind");
});

t.test("a failed measurement keeps the previous offset and is logged", async (t) => {
  const host = new ManualClock(0);
  let fail = false;
  const db = server(host, () => 3_000, [[1, 1]]);
  const { log, lines } = sink();
  const clock = new DatabaseClock({
    host,
    readDatabaseMs: async () => {
      if (fail) throw new Error("connection refused");
      return db.read();
    },
    log,
    samples: 1,
  });
  await clock.start();
  t.equal(clock.offsetMs, 3_000);
  fail = true;
  t.equal(await clock.resync(), undefined, "no measurement");
  t.equal(clock.offsetMs, 3_000, "the offset did not jump back to 0");
  t.ok(lines.some((l) => l.msg === "could not measure the database clock; keeping the previous offset"));
  await clock.stop();
});

t.test("concurrent resyncs share one measurement; stop before start is safe", async (t) => {
  const host = new ManualClock(0);
  const db = server(host, () => 10, [[0, 0]]);
  const clock = new DatabaseClock({
    host,
    readDatabaseMs: () => db.read(),
    log: createLogger({ level: "silent", secrets: new SecretRegistry() }),
    samples: 1,
  });
  await Promise.all([clock.resync(), clock.resync(), clock.resync()]);
  t.equal(db.calls, 1);
  const never = new DatabaseClock({
    host,
    readDatabaseMs: () => db.read(),
    log: createLogger({ level: "silent", secrets: new SecretRegistry() }),
  });
  await never.stop();
  await never.start();
  t.equal(db.calls, 1, "a stopped clock does not start");
});
