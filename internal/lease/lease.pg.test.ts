import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { createLogger } from "../platform/logger.js";
import { acquireLease } from "./lease.js";

const log = createLogger({ level: "silent" });

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
  const again = await acquireLease(pool, "etm", log);
  t.ok(again, "the lock died with the session; a new holder takes it");
  const { rows: r2 } = await again!.client.query("select pg_backend_pid() as pid");
  t.not(r2[0].pid, pid, "the dead connection was not returned to the pool");
  await again!.release();
});
