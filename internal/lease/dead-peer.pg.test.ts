// A lease holder whose connection to PostgreSQL goes silent (docs/failure-modes.md, A
// holder cut off from the network): through a loopback TCP proxy that stops forwarding,
// the heartbeat misses its deadline, the lease is lost, the walk (its HTTP request in
// flight included) is aborted, the tick ends `lease_lost` within the heartbeat period
// plus the deadline, the dead connection is not returned to the pool, and after the
// network heals the next tick walks normally. The server-side half (PostgreSQL dropping
// the silent session within SUPPLIER_SYNC_LEASE_DEAD_PEER) needs a real network cut:
// test/chaos/partition.chaos.test.ts.
import http from "node:http";
import type { AddressInfo } from "node:net";
import pg from "pg";
import t, { type Test } from "tap";
import { createTestDatabase } from "../../test/helpers/db.js";
import { startTcpProxy, type TcpProxy } from "../../test/helpers/tcp-proxy.js";
import type { Connector, Page, WalkContext } from "../ingestion/ports.js";
import { runTick, type TickDeps, type TickResult } from "../ingestion/tick.js";
import { createMetrics } from "../observability/metrics.js";
import { systemClock } from "../platform/clock.js";
import { InfraError } from "../platform/errors.js";
import { createLogger } from "../platform/logger.js";
import { SecretRegistry } from "../platform/redact.js";
import { StatementDeadlineError, withPooledDeadline } from "../store/deadline.js";
import { MIGRATION_LOCK_KEY, runMigrations } from "../store/migrate.js";
import { inTransaction } from "../store/queryable.js";
import { runSessions } from "../store/run-session.js";
import { type LeaseDeadlines, leaseDeadlines } from "./deadlines.js";
import { acquireLease } from "./lease.js";
import { acquireTableLease, tryTableLease } from "./table-lease.js";

const log = createLogger({ level: "silent", secrets: new SecretRegistry() });
const owner = { hostname: "test", pid: 1, bootId: "b" };
/** The smallest SUPPLIER_SYNC_LEASE_DEAD_PEER: statement deadline 1 s, heartbeat every 1 s. */
const D: LeaseDeadlines = leaseDeadlines(3_000);
const TTL_MS = 3_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` every 20 ms until it holds; fails naming `what` after `timeoutMs`. */
async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

async function proxied(t: Test): Promise<{ proxy: TcpProxy; pool: pg.Pool; direct: pg.Pool }> {
  const url = await createTestDatabase(t);
  const u = new URL(url);
  const proxy = await startTcpProxy({ host: u.hostname, port: Number(u.port || 5432) });
  const pool = new pg.Pool({ connectionString: proxy.url(url), max: 4 });
  pool.on("error", () => {});
  const direct = new pg.Pool({ connectionString: url, max: 4 });
  direct.on("error", () => {});
  t.teardown(async () => {
    proxy.heal();
    await pool.end().catch(() => {});
    await direct.end().catch(() => {});
    await proxy.close();
  });
  return { proxy, pool, direct };
}

/** An HTTP server on loopback that answers `/page` at once and holds `/hold` until the client gives up. */
async function holdingServer(t: Test): Promise<{ url: string; aborted: Promise<number> }> {
  let resolveAborted: (at: number) => void = () => {};
  const aborted = new Promise<number>((r) => {
    resolveAborted = r;
  });
  const server = http.createServer((req, res) => {
    if (req.url === "/page") {
      res.end("{}");
      return;
    }
    req.socket.on("close", () => resolveAborted(Date.now()));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, aborted };
}

const page = (seq: number): Page => ({
  seq,
  offers: [{ sku: `SKU-${seq}`, name: `item ${seq}`, price: "1.50", currency: "EUR", stock: 1 }],
  rejects: [],
  httpAttempts: 1,
});

/** Page 1, then a real HTTP request that never answers (until the walk's signal aborts it); `onHang` runs when it is in flight. */
function hangingConnector(base: string, onHang: () => void): Connector {
  return {
    async *walk(ctx: WalkContext) {
      await fetch(`${base}/page`, { signal: ctx.signal }).then((r) => r.text());
      yield page(1);
      const inFlight = fetch(`${base}/hold`, { signal: ctx.signal });
      onHang();
      await inFlight;
      yield page(2);
    },
    async close() {},
  };
}

function completeConnector(): Connector {
  return {
    async *walk() {
      yield page(1);
      yield page(2);
    },
    async close() {},
  };
}

function deps(pool: pg.Pool, lease: "advisory" | "table"): TickDeps {
  return {
    sessions: runSessions(
      pool,
      (name) =>
        lease === "advisory"
          ? acquireLease(pool, name, log, D)
          : tryTableLease(pool, name, { ttlMs: TTL_MS, owner, clock: systemClock, log, deadlines: D }),
      { clock: systemClock, heartbeatMs: D.heartbeatMs, statementDeadlineMs: D.statementMs },
    ),
    log,
    metrics: createMetrics({ processMetrics: false }),
    clock: systemClock,
    owner,
  };
}

function tick(d: TickDeps, connector: Connector): Promise<TickResult> {
  return runTick(d, {
    supplier: { name: "etm", intervalMs: 3_600_000, enabled: true },
    trigger: "tick_once",
    force: true,
    connector: { kind: "ok", connector, maxRejectRatio: 0.5, runMs: 60_000, guards: null },
  });
}

t.test("deadlines follow SUPPLIER_SYNC_LEASE_DEAD_PEER", async (t) => {
  const d30 = leaseDeadlines(30_000);
  t.same(d30.server, {
    tcp_keepalives_idle: "10",
    tcp_keepalives_interval: "5",
    tcp_keepalives_count: "4",
    tcp_user_timeout: "30000",
  });
  t.equal(d30.statementMs, 10_000);
  t.equal(d30.heartbeatMs, 10_000);
  for (const ms of [3_000, 4_000, 7_000, 30_000, 45_000, 600_000, 3_600_000]) {
    const d = leaseDeadlines(ms);
    const s = d.server;
    const idleDrop =
      (Number(s.tcp_keepalives_idle) + Number(s.tcp_keepalives_interval) * Number(s.tcp_keepalives_count)) *
      1000;
    t.ok(
      idleDrop <= ms && Number(s.tcp_user_timeout) <= ms,
      `D=${ms}: a silent idle peer is dropped after ${idleDrop} ms`,
    );
    t.ok(
      d.heartbeatMs + d.statementMs < ms,
      `D=${ms}: the holder notices within ${d.heartbeatMs + d.statementMs} ms`,
    );
    t.ok(d.heartbeatMs <= 10_000);
  }
});

t.test("the advisory lease session carries the server-side dead-peer settings", async (t) => {
  const { pool } = await proxied(t);
  const lease = await acquireLease(pool, "etm", log, leaseDeadlines(30_000));
  t.ok(lease);
  const { rows } = await lease!.client.query(
    `select current_setting('tcp_keepalives_idle') as idle, current_setting('tcp_keepalives_interval') as intvl,
            current_setting('tcp_keepalives_count') as count, current_setting('tcp_user_timeout') as user_timeout`,
  );
  t.same(rows[0], { idle: "10", intvl: "5", count: "4", user_timeout: "30000" });
  await lease!.release();
});

t.test("the table lease sets them inside each fenced step", async (t) => {
  const { pool } = await proxied(t);
  const lease = await acquireTableLease(pool, "etm", {
    ttlMs: TTL_MS,
    owner,
    clock: systemClock,
    log,
    deadlines: D,
  });
  t.ok(lease);
  const inside = await inTransaction(lease!.client, async (tx) => {
    const { rows } = await tx.query(
      "select current_setting('tcp_keepalives_idle') as idle, current_setting('tcp_user_timeout') as user_timeout",
    );
    return rows[0];
  });
  t.same(inside, { idle: "1", user_timeout: "3000" });
  await lease!.release();
});

for (const lease of ["advisory", "table"] as const) {
  t.test(
    `${lease} lease: a silent network loses the lease, aborts the walk and ends the tick in time`,
    async (t) => {
      const { proxy, pool, direct } = await proxied(t);
      const http = await holdingServer(t);
      let cutAt = 0;
      const result = await tick(
        deps(pool, lease),
        hangingConnector(http.url, () => {
          cutAt = Date.now();
          proxy.freeze();
        }),
      );
      const endedAfter = Date.now() - cutAt;
      const abortedAfter = (await http.aborted) - cutAt;
      t.equal(result.outcome, "lease_lost");
      t.equal(result.errorCode, "LEASE_LOST");
      const bound = D.heartbeatMs + D.statementMs;
      // The close from a fresh connection (which the freeze does not affect) adds one round trip;
      // 3 s of slack for a loaded machine (a hang would last minutes: the OS TCP timeouts).
      t.ok(
        endedAfter < bound + 3_000,
        `the tick ended ${endedAfter} ms after the cut (bound ${bound} ms + slack)`,
      );
      t.ok(
        abortedAfter <= endedAfter + 50,
        `the HTTP request in flight was aborted ${abortedAfter} ms after the cut`,
      );
      t.equal(pool.totalCount - pool.idleCount, 0, "no connection left checked out");
      t.equal(pool.waitingCount, 0);
      const run = (
        await direct.query("select state, error_code, pages from ingestion_runs where id = $1", [
          result.runId,
        ])
      ).rows[0];
      t.same(
        run,
        { state: "partial", error_code: "LEASE_LOST", pages: 1 },
        "closed LEASE_LOST from a fresh connection",
      );

      proxy.heal();
      // The healed network: the next tick takes the lease (the dead session's lock is gone
      // once the server sees the destroyed socket) and walks to the end. Bounded polling:
      // PostgreSQL ends the old session when the proxy passes the close on.
      const deadline = Date.now() + 10_000;
      let next: TickResult;
      for (;;) {
        next = await tick(deps(pool, lease), completeConnector());
        if (next.outcome !== "lease_busy" && next.outcome !== "failed") break;
        if (Date.now() > deadline) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      t.equal(next.outcome, "success", "after the heal the next tick walks normally");
      t.equal(pool.totalCount - pool.idleCount, 0, "pool back to idle");
    },
  );
}

t.test("table lease: a step COMMIT held by the cut never lands after a takeover", async (t) => {
  const { proxy, pool, direct } = await proxied(t);
  await direct.query("create table fence_probe (x int)");
  const a = await acquireTableLease(pool, "etm", {
    ttlMs: TTL_MS,
    owner,
    clock: systemClock,
    log,
    deadlines: D,
  });
  t.ok(a);
  // The step writes, then the network goes silent just before its COMMIT leaves.
  let holderPid = 0;
  const step = inTransaction(a!.client, async (tx) => {
    holderPid = (await tx.query("select pg_backend_pid() as pid")).rows[0].pid;
    await tx.query("insert into fence_probe values (1)");
    proxy.freeze();
  }).then(
    () => "committed",
    (err: Error) => err.message,
  );
  const outcome = await step;
  t.match(outcome, /SUPPLIER_SYNC_LEASE_DEAD_PEER|terminated|ended/, `the holder's step failed: ${outcome}`);
  t.ok(a!.lost, "the holder lost its lease");
  // Another holder takes over once the TTL has passed: the held row lock ends with the
  // holder's session (idle_in_transaction_session_timeout = TTL).
  const deadline = Date.now() + 20_000;
  let b = null;
  while (!b && Date.now() < deadline) {
    b = await acquireTableLease(direct, "etm", { ttlMs: 60_000, owner, clock: systemClock, log });
    if (!b) await new Promise((r) => setTimeout(r, 200));
  }
  t.ok(b, "another holder took the lease over");
  t.ok(holderPid > 0, "the step ran on the holder's session");
  t.equal(proxy.open, 1, "the cut connection is still open, holding the COMMIT");
  proxy.heal();
  // Whatever the heal delivers (the held COMMIT) must not write. First the heal has
  // delivered it (the cut connection has passed on what it held, and closed) and the
  // session it was for has ended: anything that session committed would show by then.
  await until(() => proxy.open === 0, "the healed connection to deliver what it held and close");
  await until(
    async () =>
      (await direct.query("select 1 from pg_stat_activity where pid = $1", [holderPid])).rowCount === 0,
    "the cut-off holder's session to end",
  );
  const { rows } = await direct.query("select count(*)::int as n from fence_probe");
  t.equal(rows[0].n, 0, "nothing of the cut-off holder was written");
  await a!.release();
  await b?.release();
});

t.test(
  "a pooled statement stuck on a dead network (a table-lease renewal) fails in time, uncaught nothing",
  async (t) => {
    const { proxy, pool } = await proxied(t);
    await pool.query("select 1"); // one idle pooled connection, on the network about to go silent
    const removed = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error("the destroyed connection was not removed within 10 s")),
        10_000,
      );
      pool.once("remove", () => {
        clearTimeout(timer);
        resolve();
      });
    });
    proxy.freeze();
    const started = Date.now();
    const err = await withPooledDeadline(pool, 500, "a renewal", (c) => c.query("select 1")).then(
      () => undefined,
      (e: unknown) => e,
    );
    const after = Date.now() - started;
    t.type(err, StatementDeadlineError, "rejected with the deadline's error");
    t.match(String((err as Error).message), /a renewal: no answer to a statement within 500 ms/);
    t.ok(after < 1_500, `after ${after} ms`);
    // The destroyed connection reports its end on the client: that must not be an uncaught
    // exception. The pool removes the connection once it has ended.
    await removed;
    t.equal(pool.totalCount - pool.idleCount, 0, "nothing left checked out");
    proxy.heal();
    t.same((await pool.query("select 1 as one")).rows, [{ one: 1 }], "the pool works after the heal");
  },
);

t.test("the migration transaction on a dead network fails within its statement deadline", async (t) => {
  const { proxy, pool } = await proxied(t);
  await pool.query("select 1"); // the idle pooled connection the migration will get
  proxy.freeze();
  const started = Date.now();
  const err = await runMigrations(pool, { statementMs: 500, server: D.server }).then(
    () => undefined,
    (e: unknown) => e,
  );
  const after = Date.now() - started;
  t.type(err, InfraError);
  t.match(
    String((err as Error).message),
    /migrations failed: .*within 500 ms|migrations failed: Connection terminated/,
  );
  t.ok(after < 2_000, `failed after ${after} ms instead of waiting on the network`);
  proxy.heal();
  await runMigrations(pool, { statementMs: 10_000, server: D.server });
  t.pass("after the heal the migrations run (nothing left to apply)");
});

t.test(
  "waiting for another instance's migration lock: as long as it takes, yet a dead network is noticed",
  async (t) => {
    const { proxy, pool, direct } = await proxied(t);
    // Another instance migrating: it holds the migration lock in its transaction.
    const other = await direct.connect();
    t.teardown(() => other.release());
    await other.query("begin");
    await other.query("select pg_advisory_xact_lock(hashtext($1)::bigint)", [MIGRATION_LOCK_KEY]);

    // A wait longer than the deadline is fine while the network answers: the lock is polled.
    const waiting = runMigrations(pool, { statementMs: 500, server: D.server });
    let settled = false;
    waiting.then(
      () => {
        settled = true;
      },
      () => {
        settled = true;
      },
    );
    // The waiting migrator, seen from the server: its transaction polling the lock.
    const polling = async (forMs: number) =>
      (
        await direct.query(
          `select 1 from pg_stat_activity
            where datname = current_database() and pid <> pg_backend_pid()
              and query like '%pg_try_advisory_xact_lock%'
              and clock_timestamp() - xact_start > $1 * interval '1 millisecond'`,
          [forMs],
        )
      ).rowCount === 1;
    await until(async () => settled || (await polling(1_200)), "the migrator to poll the lock for 1.2 s");
    t.notOk(settled, "still waiting for the lock after 1.2 s (> the 500 ms deadline)");
    await other.query("commit");
    await waiting;
    t.pass("migrated once the other instance committed");

    // The same wait on a network that goes silent fails within the deadline.
    await other.query("begin");
    await other.query("select pg_advisory_xact_lock(hashtext($1)::bigint)", [MIGRATION_LOCK_KEY]);
    const started = Date.now();
    const cut = runMigrations(pool, { statementMs: 500, server: D.server }).then(
      () => undefined,
      (e: unknown) => e,
    );
    // Cut once it is waiting (polling the lock) on its connection.
    await until(() => polling(0), "the migrator to poll the lock again");
    proxy.freeze();
    const err = await cut;
    const after = Date.now() - started;
    t.type(err, InfraError, "the waiting migrator fails");
    t.ok(after < 3_000, `failed ${after} ms after it began waiting, not when the lock came free`);
    await other.query("commit");
    proxy.heal();
  },
);
