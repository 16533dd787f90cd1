// runTick against a real PostgreSQL with scripted connectors: every error path ends in
// a durable, honest run record and none of them can be recorded `succeeded`.
import type pg from "pg";
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { tickDeps } from "../../test/helpers/tick.js";
import { acquireLease } from "../lease/lease.js";
import { createMetrics } from "../observability/metrics.js";
import { OffsetClock, systemClock } from "../platform/clock.js";
import { IngestionError } from "../platform/errors.js";
import { createLogger } from "../platform/logger.js";
import { SecretRegistry } from "../platform/redact.js";
import { commitPage } from "../store/offers.js";
import { startRun } from "../store/runs.js";
import type { Connector, Offer, Page, WalkContext } from "./ports.js";
import { type LoadedConnector, runTick, type TickDeps } from "./tick.js";

const log = createLogger({ level: "silent", secrets: new SecretRegistry() });
const supplier = { name: "etm", intervalMs: 3_600_000, enabled: true };

function offers(from: number, n: number): Offer[] {
  return Array.from({ length: n }, (_, i) => ({
    sku: `SKU-${from + i}`,
    name: `item ${from + i}`,
    price: `${(from + i) % 1000}.50`,
    currency: "EUR",
    stock: (from + i) % 7,
  }));
}

type Step = Page | { fail: IngestionError } | { hang: true };

function scripted(steps: Step[]): Connector {
  return {
    async *walk(ctx: WalkContext) {
      for (const step of steps) {
        if ("fail" in step) throw step.fail;
        if ("hang" in step) {
          await new Promise((_, reject) => {
            ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason), { once: true });
          });
        }
        yield step as Page;
      }
    },
    async close() {},
  };
}

const page = (seq: number, n = 10, rejects = 0): Page => ({
  seq,
  offers: offers(seq * 1000, n),
  rejects: Array.from({ length: rejects }, (_, i) => ({ reason: "price: not a decimal", raw: { i } })),
  httpAttempts: 1,
});

function loaded(connector: Connector, runMs = 60_000): LoadedConnector {
  return { kind: "ok", connector, maxRejectRatio: 0.5, runMs, guards: null };
}

function deps(pool: pg.Pool): TickDeps {
  return tickDeps(pool, log, 50);
}

async function runRow(pool: pg.Pool, id: number | undefined) {
  const { rows } = await pool.query("select * from ingestion_runs where id = $1", [id]);
  return rows[0];
}

t.test("a complete walk succeeds; the due gate then skips; --force runs again", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const d = deps(pool);
  const r1 = await runTick(d, {
    supplier,
    trigger: "schedule",
    force: false,
    connector: loaded(scripted([page(1), page(2)])),
  });
  t.equal(r1.outcome, "success");
  const row = await runRow(pool, r1.runId);
  t.equal(row.state, "succeeded");
  t.equal(row.pages, 2);
  t.equal(row.records_inserted, 20);
  const r2 = await runTick(d, {
    supplier,
    trigger: "schedule",
    force: false,
    connector: loaded(scripted([page(1)])),
  });
  t.equal(r2.outcome, "not_due");
  t.equal(r2.runId, undefined, "not_due writes no run row");
  const r3 = await runTick(d, {
    supplier,
    trigger: "schedule",
    force: true,
    connector: loaded(scripted([page(1), page(2)])),
  });
  t.equal(r3.outcome, "success");
  t.equal((await runRow(pool, r3.runId)).trigger, "forced");
  t.equal((await runRow(pool, r3.runId)).records_unchanged, 20);
});

t.test("the slot is cut from PostgreSQL's now() under the lease, not from the host's clock", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const dbSlot = async () =>
    (
      await pool.query<{ ms: number }>(
        "select floor(extract(epoch from now())::float8 * 1000 / 3600000) * 3600000 as ms",
      )
    ).rows[0]?.ms;
  // Two hosts, one clock two hours behind and one two hours ahead of the database's.
  const behind = { ...deps(pool), clock: new OffsetClock(systemClock, -2 * 3_600_000) };
  const ahead = { ...deps(pool), clock: new OffsetClock(systemClock, 2 * 3_600_000) };
  const before = await dbSlot();
  const r1 = await runTick(behind, {
    supplier,
    trigger: "schedule",
    force: false,
    connector: loaded(scripted([page(1)])),
  });
  const r2 = await runTick(ahead, {
    supplier,
    trigger: "schedule",
    force: false,
    connector: loaded(scripted([page(1)])),
  });
  const after = await dbSlot();
  t.equal(before, after, "no hour boundary crossed during the test (rerun if it fails here)");
  t.equal(r1.outcome, "success");
  t.equal(r1.slotStart?.getTime(), before, "the tick reports the database's slot");
  t.equal((await runRow(pool, r1.runId)).slot_start.getTime(), before, "and records it");
  t.equal(r2.outcome, "not_due", "the other host agrees on the slot: the due gate holds");
  t.equal(r2.slotStart?.getTime(), before);
});

t.test("a busy lease is lease_busy with no run row", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const held = await acquireLease(pool, "etm", log);
  const r = await runTick(deps(pool), {
    supplier,
    trigger: "schedule",
    force: true,
    connector: loaded(scripted([page(1)])),
  });
  t.equal(r.outcome, "lease_busy");
  await held!.release();
  const { rows } = await pool.query("select count(*)::int as n from ingestion_runs");
  t.equal(rows[0].n, 0);
});

t.test(
  "a busy advisory lease whose holder walks an earlier slot says so; one walking this slot does not",
  async (t) => {
    const pool = testPool(t, await createTestDatabase(t), 6);
    const held = await acquireLease(pool, "etm", log);
    t.teardown(() => held?.release());
    const tick = () =>
      runTick(deps(pool), {
        supplier,
        trigger: "schedule",
        force: false,
        connector: loaded(scripted([page(1)])),
      });
    const holding = async (slot: string) => {
      await pool.query("delete from ingestion_runs");
      await pool.query(
        `insert into ingestion_runs (supplier, slot_start, trigger, state, owner)
       values ('etm', ${slot}, 'schedule', 'running', '{}'::jsonb)`,
      );
    };
    const none = await tick();
    t.same(
      [none.outcome, none.leaseHolderBehind],
      ["lease_busy", undefined],
      "no running run: the holder is at its due gate",
    );
    await holding("to_timestamp(floor(extract(epoch from now()) / 3600) * 3600)");
    const current = await tick();
    t.same(
      [current.outcome, current.leaseHolderBehind],
      ["lease_busy", undefined],
      "the holder walks this slot",
    );
    await holding("to_timestamp(floor(extract(epoch from now()) / 3600) * 3600) - interval '1 hour'");
    const behind = await tick();
    t.same(
      [behind.outcome, behind.leaseHolderBehind],
      ["lease_busy", true],
      "the holder walks the previous slot",
    );
    const { rows } = await pool.query("select count(*)::int as n from ingestion_runs");
    t.equal(rows[0].n, 1, "no run row written by the busy ticks");
  },
);

const failures: [string, Step[], string, string][] = [
  ["fetch error on the first page", [{ fail: new IngestionError("HTTP_503", "503") }], "failed", "HTTP_503"],
  [
    "contract error after two pages",
    [page(1), page(2), { fail: new IngestionError("CONTRACT", "bad body") }],
    "partial",
    "CONTRACT",
  ],
  ["auth error", [{ fail: new IngestionError("AUTH", "401") }], "failed", "AUTH"],
  ["too many invalid records on a page", [page(1), page(2, 4, 6)], "partial", "CONTRACT"],
];
for (const [name, steps, state, code] of failures) {
  t.test(`never succeeded: ${name}`, async (t) => {
    const pool = testPool(t, await createTestDatabase(t), 6);
    const r = await runTick(deps(pool), {
      supplier,
      trigger: "schedule",
      force: false,
      connector: loaded(scripted(steps)),
    });
    const row = await runRow(pool, r.runId);
    t.equal(row.state, state);
    t.equal(row.error_code, code);
    t.not(r.outcome, "success");
    const failed = await pool.query(
      "select seq, error_code from ingestion_run_steps where run_id = $1 and state = 'failed'",
      [r.runId],
    );
    t.equal(failed.rowCount, 1, "the failing page is a failed step");
  });
}

t.test("rejects below the ratio are kept and the run succeeds", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const r = await runTick(deps(pool), {
    supplier,
    trigger: "schedule",
    force: false,
    connector: loaded(scripted([page(1, 19, 1)])),
  });
  t.equal(r.outcome, "success");
  const { rows } = await pool.query("select reason, raw from ingestion_rejects where run_id = $1", [r.runId]);
  t.equal(rows.length, 1);
  t.same(rows[0].raw, { i: 0 });
});

t.test("run deadline: DEADLINE, never succeeded", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const r = await runTick(deps(pool), {
    supplier,
    trigger: "schedule",
    force: false,
    connector: loaded(scripted([page(1), { hang: true }]), 300),
  });
  const row = await runRow(pool, r.runId);
  t.equal(row.error_code, "DEADLINE");
  t.equal(row.state, "partial");
});

t.test("shutdown stops at the page boundary: SHUTDOWN, never succeeded", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const stop = new AbortController();
  const connector: Connector = {
    async *walk() {
      yield page(1);
      stop.abort();
      yield page(2);
      yield page(3);
    },
    async close() {},
  };
  const r = await runTick(deps(pool), {
    supplier,
    trigger: "schedule",
    force: false,
    connector: loaded(connector),
    stopSignal: stop.signal,
  });
  const row = await runRow(pool, r.runId);
  t.equal(row.error_code, "SHUTDOWN");
  t.equal(row.state, "partial");
  t.equal(row.pages, 2, "the page in hand is finished, no more");
});

t.test("upsert failure (database error on a page): never succeeded", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const bad: Page = {
    seq: 2,
    offers: [{ sku: "X", name: null, price: "1e999999", currency: "EUR", stock: 1 }],
    rejects: [],
    httpAttempts: 1,
  };
  const r = await runTick(deps(pool), {
    supplier,
    trigger: "schedule",
    force: false,
    connector: loaded(scripted([page(1), bad, page(3)])),
  });
  const row = await runRow(pool, r.runId);
  t.not(row.state, "succeeded");
  t.equal(row.state, "partial");
  t.equal(row.error_code, "DATABASE");
});

t.test("lease loss mid-run: lease_lost, closed LEASE_LOST, nothing written after the kill", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const d = deps(pool);
  let killed = false;
  const connector: Connector = {
    async *walk(ctx) {
      yield page(1);
      const { rows } = await pool.query(
        // This database's lock only: test files running beside this one lock 'etm' in theirs.
        "select pid from pg_locks where locktype = 'advisory' and granted and database = (select oid from pg_database where datname = current_database()) and objid = (hashtext('ingestion:etm')::bigint & 4294967295)::oid",
      );
      await pool.query("select pg_terminate_backend($1)", [rows[0].pid]);
      killed = true;
      // The lease connection may see its session end before this query's answer arrives.
      await new Promise((_, reject) => {
        if (ctx.signal.aborted) reject(ctx.signal.reason);
        ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason), { once: true });
      });
      yield page(2);
    },
    async close() {},
  };
  const r = await runTick(d, { supplier, trigger: "schedule", force: false, connector: loaded(connector) });
  t.ok(killed);
  t.equal(r.outcome, "lease_lost");
  const row = await runRow(pool, r.runId);
  t.equal(row.error_code, "LEASE_LOST");
  t.not(row.state, "succeeded");
  const steps = await pool.query("select count(*)::int as n from ingestion_run_steps where run_id = $1", [
    r.runId,
  ]);
  t.equal(steps.rows[0].n, 1, "only the page committed before the kill");
  const next = await runTick(d, {
    supplier,
    trigger: "retry",
    force: false,
    connector: loaded(scripted([page(1), page(2)])),
  });
  t.equal(next.outcome, "success", "the next tick works");
});

t.test("a missing connector is a failed CONNECTOR_MISSING run for that supplier only", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const r = await runTick(deps(pool), {
    supplier,
    trigger: "schedule",
    force: false,
    connector: { kind: "missing", reason: "no file" },
  });
  t.equal(r.outcome, "connector_missing");
  const row = await runRow(pool, r.runId);
  t.equal(row.state, "failed");
  t.equal(row.error_code, "CONNECTOR_MISSING");
});

t.test(
  "recovery: a running run of a dead holder is closed INTERRUPTED when the lease is taken",
  async (t) => {
    const pool = testPool(t, await createTestDatabase(t), 6);
    const lease = await acquireLease(pool, "etm", log);
    const runId = await startRun(lease!.client, {
      supplier: "etm",
      slotStart: new Date(0),
      trigger: "schedule",
      owner: { hostname: "h", pid: 2, bootId: "x" },
    });
    await commitPage(lease!.client, { runId, supplier: "etm", page: page(1) });
    const { rows } = await lease!.client.query<{ pid: number }>("select pg_backend_pid() as pid");
    // The holder dies: its session ends without closing the run.
    lease!.client.release(true);
    // Destroying the socket does not wait for the server to end the session (and drop its
    // advisory lock): wait, bounded, until it is gone, or the tick below finds the lease busy.
    for (let i = 0; ; i++) {
      const alive = await pool.query("select 1 from pg_stat_activity where pid = $1", [rows[0]?.pid]);
      if (alive.rowCount === 0) break;
      if (i >= 500) throw new Error("the dead holder's session did not end within 5 s");
      await new Promise((r) => setTimeout(r, 10));
    }
    const metrics = createMetrics({ processMetrics: false });
    const r = await runTick(
      { ...deps(pool), metrics },
      { supplier, trigger: "schedule", force: false, connector: loaded(scripted([page(1)])) },
    );
    t.equal(r.outcome, "success");
    const old = await runRow(pool, runId);
    t.equal(old.state, "partial");
    t.equal(old.error_code, "INTERRUPTED");
    const recovered = await metrics.runsRecovered.get();
    t.equal(recovered.values[0]?.value, 1);
  },
);
