import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import type { Connector, Page } from "../ingestion/ports.js";
import { runTick } from "../ingestion/tick.js";
import { createMetrics } from "../observability/metrics.js";
import { systemClock } from "../platform/clock.js";
import { createLogger } from "../platform/logger.js";
import { SecretRegistry } from "../platform/redact.js";
import { inTransaction } from "../store/queryable.js";
import { type Lease, runSessions } from "../store/run-session.js";
import { acquireLease } from "./lease.js";

const log = createLogger({ level: "silent", secrets: new SecretRegistry() });

t.test("one holder per supplier; release frees it; suppliers are independent", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const a = await acquireLease(pool, "etm", log);
  t.ok(a, "first holder gets the lease");
  t.equal(await acquireLease(pool, "etm", log), null, "second is busy, not an error");
  const other = await acquireLease(pool, "iek", log);
  t.ok(other, "another supplier is not blocked");
  await a!.release();
  await a!.release();
  const b = await acquireLease(pool, "etm", log);
  t.ok(b, "released lease can be taken again");
  await b!.release();
  await other!.release();
  t.equal(pool.totalCount - pool.idleCount, 0, "every connection returned");
});

t.test("the lock key is the contract's hashtext('ingestion:' || supplier)", async (t) => {
  const pool = testPool(t, await createTestDatabase(t));
  const lease = await acquireLease(pool, "etm", log);
  const { rows } = await pool.query(
    "select pg_try_advisory_lock(hashtext('ingestion:' || 'etm')::bigint) as ok",
  );
  t.equal(rows[0].ok, false, "an outside session sees the lock held");
  await lease!.release();
});

t.test("a terminated lease connection aborts the signal within 1 s and is not reused", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 4);
  const lease = await acquireLease(pool, "etm", log);
  t.ok(lease);
  const { rows } = await lease!.client.query("select pg_backend_pid() as pid");
  const pid = rows[0].pid as number;
  const aborted = new Promise<number>((resolve) => {
    const start = Date.now();
    lease!.signal.addEventListener("abort", () => resolve(Date.now() - start), { once: true });
  });
  await pool.query("select pg_terminate_backend($1)", [pid]);
  const within = await Promise.race([aborted, new Promise<number>((r) => setTimeout(() => r(-1), 2_000))]);
  t.ok(within >= 0 && within < 1_000, `aborted after ${within} ms`);
  t.ok(lease!.lost);
  t.equal((lease!.signal.reason as { code?: string }).code, "LEASE_LOST");
  await lease!.release();
  // pg_terminate_backend only signals the backend: wait, bounded, until it has exited (and its
  // lock with it), or a loaded machine finds the lease still held.
  for (let i = 0; ; i++) {
    const alive = await pool.query("select 1 from pg_stat_activity where pid = $1", [pid]);
    if (alive.rowCount === 0) break;
    if (i >= 500) throw new Error("the terminated backend did not exit within 5 s");
    await new Promise((r) => setTimeout(r, 10));
  }
  const again = await acquireLease(pool, "etm", log);
  t.ok(again, "the lock died with the session; a new holder takes it");
  const { rows: r2 } = await again!.client.query("select pg_backend_pid() as pid");
  t.not(r2[0].pid, pid, "the dead connection was not returned to the pool");
  await again!.release();
});

t.test("a transaction that no longer reaches the lock's session is refused (LEASE_LOST)", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 4);
  const lease = await acquireLease(pool, "etm", log);
  await inTransaction(lease!.client, (tx) => tx.query("select 1"));
  t.pass("the session that took the lock passes the check");
  // What a pooler's reset does to a session it hands to someone else: locks and settings gone.
  await lease!.client.query("discard all");
  const err = await inTransaction(lease!.client, (tx) =>
    tx.query("create table should_not_exist (x int)"),
  ).then(
    () => undefined,
    (e: unknown) => e as { code?: string; message: string },
  );
  t.equal(err?.code, "LEASE_LOST");
  t.match(err?.message, /SUPPLIER_SYNC_LEASE=table/, "names the way out");
  t.ok(lease!.lost);
  t.equal((lease!.signal.reason as { code?: string }).code, "LEASE_LOST");
  const { rows } = await pool.query("select to_regclass('should_not_exist') is null as absent");
  t.equal(rows[0].absent, true, "nothing written");
  await lease!.release();
});

t.test(
  "a tick whose lease connection changed session ends LEASE_LOST at the next step's commit",
  async (t) => {
    const pool = testPool(t, await createTestDatabase(t), 6);
    let held: Lease | null = null;
    const page = (seq: number): Page => ({
      seq,
      offers: [{ sku: `SKU-${seq}`, name: null, price: "1", currency: null, stock: null }],
      rejects: [],
      httpAttempts: 1,
    });
    const connector: Connector = {
      async *walk() {
        yield page(1);
        await held!.client.query("discard all");
        yield page(2);
        yield page(3);
      },
      async close() {},
    };
    const result = await runTick(
      {
        sessions: runSessions(
          pool,
          async (name) => {
            held = await acquireLease(pool, name, log);
            return held;
          },
          { clock: systemClock },
        ),
        log,
        metrics: createMetrics({ processMetrics: false }),
        clock: systemClock,
        owner: { hostname: "test", pid: 1, bootId: "b" },
      },
      {
        supplier: { name: "etm", intervalMs: 3_600_000, enabled: true },
        trigger: "tick_once",
        force: false,
        connector: { kind: "ok", connector, maxRejectRatio: 0.5, runMs: 60_000, guards: null },
      },
    );
    t.equal(result.outcome, "lease_lost");
    const steps = await pool.query("select seq, state from ingestion_run_steps order by seq");
    t.same(steps.rows, [{ seq: 1, state: "succeeded" }], "page 2 was not committed");
    const run = await pool.query("select state, error_code from ingestion_runs");
    t.same(run.rows, [{ state: "partial", error_code: "LEASE_LOST" }]);
  },
);
