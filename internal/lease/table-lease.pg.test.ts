// The table lease against a real PostgreSQL, and through a real PgBouncer in
// transaction mode: acquire, busy, fencing tokens, renewal, takeover, release, and a
// whole tick (delisting included) where no session state survives a transaction.
import type pg from "pg";
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { pgbouncerMissing, startPgBouncer } from "../../test/helpers/pgbouncer.js";
import type { Connector, Page } from "../ingestion/ports.js";
import { runTick, type TickDeps } from "../ingestion/tick.js";
import { createMetrics } from "../observability/metrics.js";
import { systemClock } from "../platform/clock.js";
import { createLogger } from "../platform/logger.js";
import { SecretRegistry } from "../platform/redact.js";
import { inTransaction } from "../store/queryable.js";
import { runSessions } from "../store/run-session.js";
import { acquireTableLease, type TableLeaseOptions } from "./table-lease.js";

const log = createLogger({ level: "silent", secrets: new SecretRegistry() });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const options = (ttlMs: number, pid = 1): TableLeaseOptions => ({
  ttlMs,
  owner: { hostname: "test", pid, bootId: `boot-${pid}` },
  clock: systemClock,
  log,
});

/** Polls `check` every 50 ms until it holds; fails naming `what` after `timeoutMs`. */
async function until(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

/** Whether the lease row has expired by the database's clock (what a takeover goes by). */
async function expired(db: pg.Pool | pg.PoolClient, supplier: string): Promise<boolean> {
  const { rows } = await db.query(
    "select expires_at < clock_timestamp() as expired from ingestion_leases where supplier = $1",
    [supplier],
  );
  return rows[0]?.expired === true;
}

async function leaseRow(pool: pg.Pool, supplier: string) {
  const { rows } = await pool.query(
    "select holder, token::int as token, expires_at > now() as live from ingestion_leases where supplier = $1",
    [supplier],
  );
  return rows[0] as { holder: string; token: number; live: boolean } | undefined;
}

t.test("one holder per supplier; release frees it at once; the token counts acquisitions", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const a = await acquireTableLease(pool, "etm", options(60_000, 1));
  t.ok(a, "first holder gets the lease");
  t.same(await leaseRow(pool, "etm"), { holder: "test/1/boot-1", token: 1, live: true });
  t.equal(await acquireTableLease(pool, "etm", options(60_000, 2)), null, "second is busy, not an error");
  const other = await acquireTableLease(pool, "iek", options(60_000, 2));
  t.ok(other, "another supplier is not blocked");
  await a!.release();
  await a!.release();
  t.equal((await leaseRow(pool, "etm"))?.live, false, "release expires the row");
  const b = await acquireTableLease(pool, "etm", options(60_000, 2));
  t.ok(b, "a released lease is taken at once");
  t.same(await leaseRow(pool, "etm"), { holder: "test/2/boot-2", token: 2, live: true }, "token incremented");
  await b!.release();
  await other!.release();
  t.equal(pool.totalCount - pool.idleCount, 0, "every connection returned");
});

t.test("racing acquirers: exactly one wins", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 12);
  const leases = await Promise.all(
    Array.from({ length: 10 }, (_, i) => acquireTableLease(pool, "etm", options(60_000, i))),
  );
  t.equal(leases.filter(Boolean).length, 1);
  for (const l of leases) await l?.release();
});

t.test("an unrenewed lease is taken over after its TTL; the old holder is fenced off", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const ttlMs = 1_000;
  const a = await acquireTableLease(pool, "etm", options(ttlMs, 1));
  t.ok(a);
  const startedAt = Date.now();
  let b = null;
  while (!b && Date.now() - startedAt < 10_000) {
    b = await acquireTableLease(pool, "etm", options(ttlMs, 2));
    if (!b) await sleep(50);
  }
  const waited = Date.now() - startedAt;
  if (!b) {
    await a!.release();
    t.fail("the unrenewed lease was not taken over within 10 s");
    return;
  }
  t.ok(waited >= ttlMs - 50 && waited < ttlMs + 500, `taken over after ${waited} ms (TTL ${ttlMs})`);
  t.equal((await leaseRow(pool, "etm"))?.token, 2);

  const writes = () =>
    inTransaction(a!.client, (tx) =>
      tx.query(
        "insert into ingestion_leases (supplier, holder, token, expires_at) values ('x', 'a', 1, now())",
      ),
    );
  const err = await writes().then(
    () => undefined,
    (e: unknown) => e as { code?: string },
  );
  t.equal(err?.code, "LEASE_LOST", "the old holder's transaction is refused");
  t.ok(a!.lost, "and its lease is marked lost");
  t.equal((a!.signal.reason as { code?: string }).code, "LEASE_LOST", "its signal aborted");
  const { rows } = await pool.query("select count(*)::int as n from ingestion_leases where supplier = 'x'");
  t.equal(rows[0].n, 0, "nothing of the refused transaction was written");
  await a!.renew?.();
  await a!.release();
  t.equal((await leaseRow(pool, "etm"))?.token, 2, "the old holder's release leaves the new lease alone");
  t.equal((await leaseRow(pool, "etm"))?.live, true);
  await b.release();
});

t.test("renewal keeps the lease past its TTL; a renewal after a takeover loses it", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const ttlMs = 900;
  const a = await acquireTableLease(pool, "etm", options(ttlMs, 1));
  t.equal(a?.renewEveryMs, 300, "renewed every third of the TTL");
  const expiresAt = async () =>
    (await pool.query("select expires_at::text as at from ingestion_leases where supplier = 'etm'")).rows[0]
      .at as string;
  const acquiredExpiry = await expiresAt();
  let previous = acquiredExpiry;
  let b: Awaited<ReturnType<typeof acquireTableLease>> = null;
  try {
    for (let i = 0; i < 8; i++) {
      await sleep(a!.renewEveryMs!); // the run heartbeat's period
      const before = (await pool.query("select clock_timestamp()::text as at")).rows[0].at as string;
      await a!.renew!();
      // The renewal seen in the table first: expires_at moved forward, to one TTL after the renewal.
      const { rows } = await pool.query(
        `select expires_at::text as at, expires_at > $1::timestamptz as moved,
              expires_at >= $2::timestamptz + $3 * interval '1 millisecond'
          and expires_at <= clock_timestamp() + $3 * interval '1 millisecond' as one_ttl
         from ingestion_leases where supplier = 'etm'`,
        [previous, before, ttlMs],
      );
      t.ok(rows[0].moved && rows[0].one_ttl, `renewal ${i + 1} moved expires_at one TTL ahead`);
      previous = rows[0].at;
      t.equal(
        await acquireTableLease(pool, "etm", options(ttlMs, 2)),
        null,
        `still held after ${i + 1} renewals`,
      );
    }
    const { rows: past } = await pool.query("select clock_timestamp() > $1::timestamptz as past", [
      acquiredExpiry,
    ]);
    t.ok(past[0].past, "held past the expiry it was acquired with");
    t.notOk(a!.lost);
    await inTransaction(a!.client, (tx) => tx.query("select 1"));
    t.pass("a renewed holder's transactions pass the fence");
    await until(() => expired(pool, "etm"), "the lease to expire once renewals stopped");
    b = await acquireTableLease(pool, "etm", options(ttlMs, 2));
    t.ok(b, "taken over once renewals stop");
    await a!.renew!();
    t.ok(a!.lost, "the old holder's next renewal finds the token gone");
  } finally {
    await a!.release();
    await b?.release();
  }
});

t.test("a takeover waits for the holder's open step transaction, which commits first", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const ttlMs = 1_000;
  const a = await acquireTableLease(pool, "etm", options(ttlMs, 1));
  const order: string[] = [];
  let taking: Promise<Awaited<ReturnType<typeof acquireTableLease>>> | undefined;
  // Fenced while live; the lease expires while the step is still open (and working: a step
  // idle in its transaction for the TTL would be ended by the server).
  const step = inTransaction(a!.client, async (tx) => {
    const { rows } = await tx.query("select pg_backend_pid() as pid");
    const stepPid = rows[0].pid as number;
    await until(
      async () =>
        (
          await tx.query(
            "select expires_at < clock_timestamp() as expired from ingestion_leases where supplier = 'etm'",
          )
        ).rows[0].expired === true,
      "the lease to expire while the step is open",
    );
    taking = acquireTableLease(pool, "etm", options(ttlMs, 2)).then((b) => {
      order.push("taken over");
      return b;
    });
    // The takeover is under way and waits for this step's row lock.
    await until(async () => {
      await tx.query("select 1");
      const { rows } = await pool.query(
        "select count(*)::int as n from pg_stat_activity where $1 = any(pg_blocking_pids(pid))",
        [stepPid],
      );
      return rows[0].n > 0;
    }, "the takeover to wait for the step's row lock");
    await tx.query(
      "insert into ingestion_leases (supplier, holder, token, expires_at) values ('x', 'a', 1, now())",
    );
    order.push("step committed");
  });
  try {
    await step;
    t.ok(await taking, "the takeover succeeded after the step");
    t.same(order, ["step committed", "taken over"]);
  } finally {
    // Also when a wait above timed out: a connection left checked out would hold the pool's end.
    await step.catch(() => {});
    await a!.release();
    await (await taking)?.release();
  }
});

t.test("a holder paused inside a step transaction past the TTL is cut off by the server", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const ttlMs = 1_000;
  const a = await acquireTableLease(pool, "etm", options(ttlMs, 1));
  // The pause ends once another holder has taken over; without a takeover, after 5 s (far
  // past the TTL, and before the takeover's own statement deadline).
  let resume = () => {};
  const paused = new Promise<void>((r) => {
    const timer = setTimeout(r, 5_000);
    resume = () => {
      clearTimeout(timer);
      r();
    };
  });
  const step = inTransaction(a!.client, async (tx) => {
    await paused;
    await tx.query(
      "insert into ingestion_leases (supplier, holder, token, expires_at) values ('x', 'a', 1, now())",
    );
  }).then(
    () => "committed",
    (e: unknown) => `failed: ${e}`,
  );
  const startedAt = Date.now();
  let b = null;
  while (!b && Date.now() - startedAt < 10_000) {
    b = await acquireTableLease(pool, "etm", options(ttlMs, 2));
    if (!b) await sleep(50);
  }
  const waited = Date.now() - startedAt;
  resume();
  if (!b) {
    await step;
    await a!.release();
    t.fail("the paused holder's lease was not taken over within 10 s");
    return;
  }
  t.ok(waited < ttlMs + 800, `taken over after ${waited} ms, while the holder is still paused`);
  t.match(await step, /^failed/, "the paused step did not commit");
  t.ok(a!.lost, "the paused holder's lease is lost");
  const { rows } = await pool.query("select count(*)::int as n from ingestion_leases where supplier = 'x'");
  t.equal(rows[0].n, 0, "nothing written");
  await a!.release();
  await b.release();
});

function catalog(skus: string[], pageSize = 3): Connector {
  return {
    async *walk() {
      for (let i = 0, seq = 1; i < skus.length; i += pageSize, seq++) {
        const page: Page = {
          seq,
          offers: skus.slice(i, i + pageSize).map((sku) => ({
            sku,
            name: sku,
            price: "1.50",
            currency: "EUR",
            stock: 1,
          })),
          rejects: [],
          httpAttempts: 1,
        };
        yield page;
      }
    },
    async close() {},
  };
}

t.test("a whole tick through PgBouncer in transaction mode", { skip: pgbouncerMissing() }, async (t) => {
  const url = await createTestDatabase(t);
  const bouncer = await startPgBouncer(t, { poolMode: "transaction" });
  const pool = testPool(t, bouncer.url(url), 6);
  const direct = testPool(t, url, 2);
  // Other clients keep the pooler's server sessions busy, so the tick's transactions
  // land on different sessions.
  const noise = testPool(t, bouncer.url(url), 4);
  let noisy = true;
  const noiseLoop = Promise.all(
    [1, 2, 3].map(async () => {
      while (noisy) await noise.query("select pg_sleep(0.002)");
    }),
  );
  const deps: TickDeps = {
    sessions: runSessions(pool, (name) => acquireTableLease(pool, name, options(5_000)), {
      clock: systemClock,
      heartbeatMs: 20,
    }),
    log,
    metrics: createMetrics({ processMetrics: false }),
    clock: systemClock,
    owner: { hostname: "test", pid: 1, bootId: "b" },
  };
  const supplier = { name: "etm", intervalMs: 3_600_000, enabled: true };
  const all = Array.from({ length: 30 }, (_, i) => `SKU-${String(i).padStart(3, "0")}`);
  const tick = (skus: string[]) =>
    runTick(deps, {
      supplier,
      trigger: "tick_once",
      force: true,
      connector: { kind: "ok", connector: catalog(skus), maxRejectRatio: 0.5, runMs: 60_000, guards: null },
    });
  const first = await tick(all);
  t.equal(first.outcome, "success", JSON.stringify(first));
  const second = await tick(all.slice(0, 24));
  t.equal(second.outcome, "success");
  t.equal(second.counts?.delisted, 6, "the durable seen set delists what the walk did not see");
  noisy = false;
  await noiseLoop;
  const { rows } = await direct.query(
    "select count(*) filter (where delisted_at is null)::int as live, count(*)::int as n from supplier_offers",
  );
  t.same(rows[0], { live: 24, n: 30 });
  const seen = await direct.query("select count(*)::int as n from ingestion_run_seen");
  t.equal(seen.rows[0].n, 0, "seen sets are deleted when their runs close");
  const backends = await direct.query(
    "select count(distinct pid)::int as n from pg_stat_activity where datname = current_database() and backend_type = 'client backend'",
  );
  t.ok(backends.rows[0].n >= 2, `the pooler spread the work over ${backends.rows[0].n} server sessions`);
});
