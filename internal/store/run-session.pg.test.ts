// The run session against a real PostgreSQL: one run per session in order, the
// heartbeat it owns, the lost-lease close from the pool, and PostgreSQL's failures
// classified as DatabaseError where they are born.
import { createServer } from "node:net";
import pg from "pg";
import t from "tap";
import { createTestDatabase, testPool, withDatabase } from "../../test/helpers/db.js";
import type { Page } from "../ingestion/ports.js";
import { acquireLease } from "../lease/lease.js";
import { systemClock } from "../platform/clock.js";
import { DatabaseError, IngestionError } from "../platform/errors.js";
import { createLogger } from "../platform/logger.js";
import { SecretRegistry } from "../platform/redact.js";
import { classifyDatabaseError } from "./database-error.js";
import { runSessions } from "./run-session.js";

const log = createLogger({ level: "silent", secrets: new SecretRegistry() });
const owner = { hostname: "test", pid: 1, bootId: "b" };
const page = (seq: number, price = "1.50"): Page => ({
  seq,
  offers: [{ sku: `SKU-${seq}`, name: null, price, currency: "EUR", stock: 1 }],
  rejects: [],
  httpAttempts: 1,
});

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => undefined,
    (e: unknown) => e,
  );
}

t.test("one run per session, in order; close derives the state; misuse throws", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 4);
  const sessions = runSessions(pool, (name) => acquireLease(pool, name, log), { clock: systemClock });
  const session = await sessions.open("etm", log);
  if (!session || "busyUntilMs" in session || "holderSlotStartMs" in session)
    throw new Error("lease not taken");
  t.equal(await sessions.open("etm", log), null, "the lease is held: a second session is busy");
  t.match(await rejection(session.commitPage(page(1))), /before the run session started a run/);
  t.equal(await session.isDue(new Date(0)), true);
  const runId = await session.start({ slotStart: new Date(0), trigger: "schedule", owner, guards: null });
  t.match(
    await rejection(session.start({ slotStart: new Date(0), trigger: "schedule", owner, guards: null })),
    /already/,
  );
  t.same(await session.commitPage(page(1)), {
    seen: 1,
    inserted: 1,
    updated: 0,
    unchanged: 0,
    rejected: 0,
    held: {},
  });
  await session.failStep({ seq: 2, errorCode: "HTTP_503", httpAttempts: 3 });
  const closed = await session.close({ walkComplete: false, errorCode: "HTTP_503", errorMessage: "503" });
  t.same(closed, { state: "partial", errorCode: "HTTP_503", delisted: 0, delistHeld: 0, heldFields: 0 });
  t.match(await rejection(session.commitPage(page(3))), /after run \d+ was closed/);
  await session.release();
  await session.release();
  const { rows } = await pool.query("select state, error_code, pages from ingestion_runs where id = $1", [
    runId,
  ]);
  t.same(rows, [{ state: "partial", error_code: "HTTP_503", pages: 1 }]);
  t.equal(pool.totalCount - pool.idleCount, 0, "the lease connection went back to the pool");
});

t.test("the session beats the run's heartbeat until close", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 4);
  const sessions = runSessions(pool, (name) => acquireLease(pool, name, log), {
    clock: systemClock,
    heartbeatMs: 20,
  });
  const session = await sessions.open("etm", log);
  if (!session || "busyUntilMs" in session || "holderSlotStartMs" in session)
    throw new Error("lease not taken");
  const runId = await session.start({ slotStart: new Date(0), trigger: "schedule", owner, guards: null });
  const beatAt = async () =>
    (
      await pool.query<{ at: Date }>("select heartbeat_at as at from ingestion_runs where id = $1", [runId])
    ).rows[0]?.at.getTime();
  const first = await beatAt();
  const deadline = Date.now() + 5_000;
  let later = first;
  while (later === first && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
    later = await beatAt();
  }
  t.ok(
    later !== undefined && first !== undefined && later > first,
    "heartbeat_at moved while the run was open",
  );
  await session.close({ walkComplete: false, errorCode: "SHUTDOWN", errorMessage: "stop" });
  await session.release();
});

t.test("after a lost lease the close goes through the pool, once", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 4);
  const sessions = runSessions(pool, (name) => acquireLease(pool, name, log), { clock: systemClock });
  const session = await sessions.open("etm", log);
  if (!session || "busyUntilMs" in session || "holderSlotStartMs" in session)
    throw new Error("lease not taken");
  const runId = await session.start({ slotStart: new Date(0), trigger: "schedule", owner, guards: null });
  await session.commitPage(page(1));
  const { rows } = await pool.query(
    "select pid from pg_locks where locktype = 'advisory' and granted and database = (select oid from pg_database where datname = current_database())",
  );
  const lost = new Promise<void>((resolve) => {
    if (session.signal.aborted) resolve();
    session.signal.addEventListener("abort", () => resolve(), { once: true });
  });
  await pool.query("select pg_terminate_backend($1)", [rows[0].pid]);
  await lost;
  t.ok(session.lost);
  const err = await rejection(session.commitPage(page(2)));
  t.ok(err instanceof IngestionError, "a write through the dead session fails typed");
  t.equal(await sessions.closeAfterLostLease(runId, "lease connection lost"), "partial");
  t.equal(await sessions.closeAfterLostLease(runId, "again"), null, "the compare-and-set matches once");
  await session.release();
  const run = await pool.query("select state, error_code from ingestion_runs where id = $1", [runId]);
  t.same(run.rows, [{ state: "partial", error_code: "LEASE_LOST" }]);
});

t.test("PostgreSQL's failures are DatabaseErrors with a kind, classified at the store", async (t) => {
  const url = await createTestDatabase(t);
  const pool = testPool(t, url, 4);
  const sessions = runSessions(pool, (name) => acquireLease(pool, name, log), { clock: systemClock });
  const session = await sessions.open("etm", log);
  if (!session || "busyUntilMs" in session || "holderSlotStartMs" in session)
    throw new Error("lease not taken");
  await session.start({ slotStart: new Date(0), trigger: "schedule", owner, guards: null });
  const overflow = await rejection(session.commitPage(page(1, "1e999999")));
  t.ok(overflow instanceof DatabaseError, "a statement PostgreSQL refuses");
  t.equal((overflow as DatabaseError).code, "DATABASE");
  t.equal((overflow as DatabaseError).kind, "failed");
  t.match((overflow as DatabaseError).sqlState, /^22/, "with its SQLSTATE (data exception)");
  await session.release();

  const missing = new pg.Client({ connectionString: withDatabase(url, "ss_no_such_database") });
  const noDb = classifyDatabaseError(await rejection(missing.connect()));
  t.equal((noDb as DatabaseError).kind, "unavailable", "an unknown database (3D000)");
  t.equal((noDb as DatabaseError).sqlState, "3D000");

  const port = await new Promise<number>((resolve) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address();
      srv.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
  const refused = new pg.Client({ host: "127.0.0.1", port, user: "postgres", database: "x" });
  const down = await rejection(
    runSessions(
      pool,
      async () => {
        await refused.connect();
        return null;
      },
      { clock: systemClock },
    ).open("etm", log),
  );
  t.ok(down instanceof DatabaseError, "opening a session on an unreachable server");
  t.equal((down as DatabaseError).kind, "unavailable", "connection refused");

  const passed = new IngestionError("LEASE_LOST", "gone");
  t.equal(classifyDatabaseError(passed), passed, "an error the store raised on purpose passes unchanged");
});
