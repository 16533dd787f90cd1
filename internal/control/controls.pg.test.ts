// Pause, resume and trigger requests against a real PostgreSQL, and the tick's side of
// them under a real advisory lease (docs/operations.md, Pausing and triggering).
import type pg from "pg";
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { tickDeps } from "../../test/helpers/tick.js";
import type { Connector, Offer, Page } from "../ingestion/ports.js";
import { runTick } from "../ingestion/tick.js";
import { createLogger } from "../platform/logger.js";
import { SecretRegistry } from "../platform/redact.js";
import {
  claimTrigger,
  isKnownSupplier,
  pauseSupplier,
  readControls,
  requestTrigger,
  resumeSupplier,
} from "./controls.js";

const log = createLogger({ level: "silent", secrets: new SecretRegistry() });
const supplier = { name: "etm", intervalMs: 3_600_000, enabled: true };

const offers = (from: number, n: number): Offer[] =>
  Array.from({ length: n }, (_, i) => ({
    sku: `SKU-${from + i}`,
    name: `item ${from + i}`,
    price: "1.50",
    currency: "EUR",
    stock: 1,
  }));
const page = (seq: number, n = 10): Page => ({
  seq,
  offers: offers(seq * 1000, n),
  rejects: [],
  httpAttempts: 1,
});

function pages(n: number, between?: (seq: number) => Promise<void>): Connector {
  return {
    async *walk() {
      for (let seq = 1; seq <= n; seq++) {
        yield page(seq);
        await between?.(seq);
      }
    },
    async close() {},
  };
}

const loaded = (connector: Connector) =>
  ({ kind: "ok", connector, maxRejectRatio: 0.5, runMs: 60_000, guards: null }) as const;

async function count(pool: pg.Pool, sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(sql, params);
  return rows[0]?.n ?? -1;
}

t.test("pause keeps its first time, resume says what it ended, both durable", async (t) => {
  const pool = testPool(t, await createTestDatabase(t));
  t.equal(await isKnownSupplier(pool, "etm"), false, "unknown before anything names it");
  const first = await pauseSupplier(pool, { supplier: "etm", by: "cli:ops@host", reason: "API migration" });
  t.equal(first.already, false);
  const again = await pauseSupplier(pool, { supplier: "etm", by: "console", reason: null });
  t.equal(again.already, true);
  t.equal(again.pausedAt.getTime(), first.pausedAt.getTime(), "paused_at is the first pause's");
  t.equal(again.pausedBy, "console");
  t.equal(await isKnownSupplier(pool, "etm"), true);
  t.same([...(await readControls(pool)).paused.keys()], ["etm"]);
  const ended = await resumeSupplier(pool, "etm");
  t.equal(ended?.pausedAt.getTime(), first.pausedAt.getTime());
  t.equal(await resumeSupplier(pool, "etm"), null, "resuming twice: not paused");
  t.same([...(await readControls(pool)).paused.keys()], []);
  const events = await pool.query<{ type: string; supplier: string; payload: Record<string, unknown> }>(
    "select type, supplier, payload from ingestion_events order by id",
  );
  t.same(
    events.rows.map((e) => [e.type, e.supplier, e.payload.by]),
    [
      ["supplier.paused", "etm", "cli:ops@host"],
      ["supplier.resumed", "etm", "console"],
    ],
    "one supplier.paused for the new pause (not for pausing again), one supplier.resumed",
  );
  t.equal(events.rows[0]?.payload.reason, "API migration");
});

t.test("a trigger request is claimed exactly once by concurrent claimers", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 10);
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push((await requestTrigger(pool, { supplier: "etm", by: "cli" })).id);
  t.same((await readControls(pool)).pendingTriggers.get("etm"), 3);
  const claims = await Promise.all(
    Array.from({ length: 9 }, (_, i) =>
      (async () => {
        const client = await pool.connect();
        try {
          await client.query("begin");
          const id = await claimTrigger(client, "etm", 100 + i);
          await client.query("commit");
          return id;
        } finally {
          client.release();
        }
      })(),
    ),
  );
  const claimed = claims.filter((c): c is number => c !== null).sort((a, b) => a - b);
  t.same(claimed, ids, "each request claimed once, none twice");
  t.equal(await count(pool, "select count(*)::int as n from ingestion_triggers where taken_at is null"), 0);
});

t.test(
  "a paused supplier's tick ends paused with no run row; a pause mid-walk stops at the step boundary",
  async (t) => {
    const pool = testPool(t, await createTestDatabase(t), 6);
    const deps = tickDeps(pool, log, 50);
    const complete = await runTick(deps, {
      supplier,
      trigger: "schedule",
      force: false,
      connector: loaded(pages(3)),
    });
    t.equal(complete.outcome, "success");
    await pauseSupplier(pool, { supplier: "etm", by: "test" });
    const paused = await runTick(deps, {
      supplier,
      trigger: "schedule",
      force: true,
      connector: loaded(pages(3)),
    });
    t.equal(paused.outcome, "paused", "even --force waits for resume");
    t.equal(paused.runId, undefined);
    t.equal(
      await count(pool, "select count(*)::int as n from ingestion_runs"),
      1,
      "no run row for a paused tick",
    );
    await resumeSupplier(pool, "etm");

    // The operator pauses while page 2 of 3 is being fetched: that page is finished, page 3 never fetched.
    const pause = new AbortController();
    const walk = await runTick(deps, {
      supplier,
      trigger: "schedule",
      force: true,
      connector: loaded(
        pages(3, async (seq) => {
          if (seq === 1) pause.abort();
        }),
      ),
      pauseSignal: pause.signal,
    });
    t.equal(walk.outcome, "partial");
    t.equal(walk.errorCode, "PAUSED");
    const { rows } = await pool.query(
      "select state, error_code, pages, records_delisted from ingestion_runs where id = $1",
      [walk.runId],
    );
    t.match(rows[0], { state: "partial", error_code: "PAUSED", pages: 2, records_delisted: 0 });
    t.equal(
      await count(pool, "select count(*)::int as n from supplier_offers where delisted_at is not null"),
      0,
      "nothing delisted by the pause",
    );
  },
);

t.test("a manual tick serves a pending request once and leaves the slot's due gate open", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const deps = tickDeps(pool, log, 50);
  const nothing = await runTick(deps, {
    supplier,
    trigger: "manual",
    force: false,
    connector: loaded(pages(1)),
  });
  t.equal(nothing.outcome, "not_due", "no pending request: nothing to serve");
  const { id } = await requestTrigger(pool, { supplier: "etm", by: "test" });
  const served = await runTick(deps, {
    supplier,
    trigger: "manual",
    force: false,
    connector: loaded(pages(2)),
  });
  t.equal(served.outcome, "success");
  const { rows } = await pool.query("select run_id, taken_at from ingestion_triggers where id = $1", [id]);
  t.equal(Number(rows[0].run_id), served.runId, "the request names the run that served it");
  const { rows: run } = await pool.query("select trigger from ingestion_runs where id = $1", [served.runId]);
  t.equal(run[0].trigger, "manual");
  const again = await runTick(deps, {
    supplier,
    trigger: "manual",
    force: false,
    connector: loaded(pages(1)),
  });
  t.equal(again.outcome, "not_due", "served once");
  const scheduled = await runTick(deps, {
    supplier,
    trigger: "schedule",
    force: false,
    connector: loaded(pages(1)),
  });
  t.equal(
    scheduled.outcome,
    "success",
    "the slot's scheduled walk still runs (and the unique index allows it)",
  );
  const after = await runTick(deps, {
    supplier,
    trigger: "schedule",
    force: false,
    connector: loaded(pages(1)),
  });
  t.equal(after.outcome, "not_due");
});
