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
  while (!b) {
    b = await acquireTableLease(pool, "etm", options(ttlMs, 2));
    if (!b) await sleep(50);
  }
  const waited = Date.now() - startedAt;
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
  for (let i = 0; i < 8; i++) {
    await sleep(a!.renewEveryMs!);
    await a!.renew!();
    t.equal(
      await acquireTableLease(pool, "etm", options(ttlMs, 2)),
      null,
      `still held after ${i + 1} renewals`,
    );
  }
  t.notOk(a!.lost);
  await inTransaction(a!.client, (tx) => tx.query("select 1"));
  t.pass("a renewed holder's transactions pass the fence");
  await sleep(ttlMs + 100);
  const b = await acquireTableLease(pool, "etm", options(ttlMs, 2));
  t.ok(b, "taken over once renewals stop");
  await a!.renew!();
  t.ok(a!.lost, "the old holder's next renewal finds the token gone");
  await a!.release();
  await b!.release();
});

t.test("a takeover waits for the holder's open step transaction, which commits first", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const ttlMs = 1_000;
  const a = await acquireTableLease(pool, "etm", options(ttlMs, 1));
  const order: string[] = [];
  await sleep(700);
  // Fenced while live; the lease expires while the step is still open (for less than the TTL).
  const step = inTransaction(a!.client, async (tx) => {
    await sleep(600);
    await tx.query(
      "insert into ingestion_leases (supplier, holder, token, expires_at) values ('x', 'a', 1, now())",
    );
    order.push("step committed");
  });
  await sleep(400);
  const b = await acquireTableLease(pool, "etm", options(ttlMs, 2));
  order.push("taken over");
  await step;
  t.ok(b, "the takeover succeeded after the step");
  t.same(order, ["step committed", "taken over"]);
  await a!.release();
  await b!.release();
});

t.test("a holder paused inside a step transaction past the TTL is cut off by the server", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const ttlMs = 1_000;
  const a = await acquireTableLease(pool, "etm", options(ttlMs, 1));
  const step = inTransaction(a!.client, async (tx) => {
    await sleep(ttlMs + 1_000);
    await tx.query(
      "insert into ingestion_leases (supplier, holder, token, expires_at) values ('x', 'a', 1, now())",
    );
  }).then(
    () => "committed",
    (e: unknown) => `failed: ${e}`,
  );
  const startedAt = Date.now();
  let b = null;
  while (!b) {
    b = await acquireTableLease(pool, "etm", options(ttlMs, 2));
    if (!b) await sleep(50);
  }
  const waited = Date.now() - startedAt;
  t.ok(waited < ttlMs + 800, `taken over after ${waited} ms, not after the pause ends`);
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
