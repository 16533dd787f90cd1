import type pg from "pg";
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { until } from "../../test/helpers/fixtures.js";
import type { GuardSettings, Offer } from "../ingestion/ports.js";
import { decideHeld } from "../store/held.js";
import { commitPage } from "../store/offers.js";
import { inTransaction } from "../store/queryable.js";
import { closeRun, recoverAbandonedRuns, startRun } from "../store/runs.js";
import { EVENTS_CHANNEL, recordEvent } from "./outbox.js";

const OWNER = { hostname: "test-host", pid: 1, bootId: "boot" };
const GUARDS: GuardSettings = {
  maxDelistRatio: 0.25,
  minDelistCount: 20,
  priceJumpFactor: 10,
  currencyChange: true,
};

function offers(price: string): Offer[] {
  return ["A", "B"].map((sku) => ({ sku, name: sku, price, currency: "EUR", stock: 1 }));
}

interface EventRow {
  id: string;
  supplier: string;
  type: string;
  payload: Record<string, unknown>;
}

t.test("run events: written in the closing transaction, announced by NOTIFY with their id", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const client = await pool.connect();
  const listener = await pool.connect();
  t.teardown(() => {
    client.release();
    listener.release();
  });
  const notified: string[] = [];
  listener.on("notification", (n) => {
    if (n.channel === EVENTS_CHANNEL && n.payload) notified.push(n.payload);
  });
  await listener.query(`listen ${EVENTS_CHANNEL}`);
  const events = async () =>
    (await pool.query<EventRow>("select id::text, supplier, type, payload from ingestion_events order by id"))
      .rows;

  const walk = async (price: string, slot: string, guards: GuardSettings | null) => {
    const runId = await startRun(client, {
      supplier: "etm",
      slotStart: new Date(slot),
      trigger: "forced",
      owner: OWNER,
    });
    await commitPage(client, {
      runId,
      supplier: "etm",
      page: { seq: 1, offers: offers(price), rejects: [], httpAttempts: 1 },
      guards,
    });
    return {
      runId,
      closed: await closeRun(client, {
        runId,
        walkComplete: true,
        errorCode: null,
        errorMessage: null,
        guards,
      }),
    };
  };

  const first = await walk("10.00", "2025-01-01T00:00:00Z", GUARDS);
  t.equal(first.closed?.state, "succeeded");
  let rows = await events();
  t.equal(rows.length, 1, "one event for the close");
  const closedEvent = rows[0] as EventRow;
  t.equal(closedEvent.type, "run.closed");
  t.match(closedEvent.payload, {
    type: "run.closed",
    supplier: "etm",
    run_id: first.runId,
    state: "succeeded",
    error_code: null,
    counts: { pages: 1, seen: 2, inserted: 2, updated: 0, unchanged: 0, rejected: 0, delisted: 0 },
    held: 0,
  });
  t.ok(typeof closedEvent.payload.finished_at === "string", "finished_at");
  await until(() => notified.includes(closedEvent.id), 10_000, "the NOTIFY of the close");

  // A price jump ×100 is held: guard.held and run.closed (partial, GUARD), one transaction.
  const second = await walk("1000.00", "2025-01-02T00:00:00Z", GUARDS);
  t.equal(second.closed?.errorCode, "GUARD");
  rows = await events();
  t.same(
    rows.slice(1).map((r) => [r.type, r.payload.run_id]),
    [
      ["guard.held", second.runId],
      ["run.closed", second.runId],
    ],
  );
  t.match(rows[1]?.payload, { items: 2, kinds: { price_jump: 2 } });
  t.match(rows[2]?.payload, { state: "partial", error_code: "GUARD", held: 2 });

  // A decision is an event, in the decision's transaction.
  await inTransaction(client, (tx) =>
    decideHeld(tx, { runId: second.runId, decision: "dismiss", by: "test" }),
  );
  rows = await events();
  t.match(rows[3], { type: "held.dismissed", payload: { run_id: second.runId, by: "test" } });
  t.equal((rows[3]?.payload.items as unknown[] | undefined)?.length, 2);

  // An event whose transaction rolls back is neither stored nor announced. The decision's
  // NOTIFY arrives on its own time: wait for it first, so what comes after it is counted.
  await until(() => notified.includes(rows[3]?.id as string), 10_000, "the decision's NOTIFY");
  const before = notified.length;
  await client.query("begin");
  await recordEvent(client, { type: "supplier.paused", supplier: "etm", payload: { by: "test" } });
  await client.query("rollback");
  t.equal((await events()).length, 4, "no event from a rolled-back transaction");
  const runId = await startRun(client, {
    supplier: "etm",
    slotStart: new Date(0),
    trigger: "forced",
    owner: OWNER,
  });

  // Recovery closes the abandoned run: run.closed too (failed, INTERRUPTED).
  const recovered = await recoverAbandonedRuns(pool, "etm");
  t.same(
    recovered.map((r) => r.id),
    [runId],
  );
  rows = await events();
  t.match(rows[4], {
    type: "run.closed",
    payload: { run_id: runId, state: "failed", error_code: "INTERRUPTED" },
  });
  await until(
    () => notified.length >= before + 1 && notified.includes(rows[4]?.id as string),
    10_000,
    "recovery's NOTIFY",
  );
  t.same(notified.slice(before), [rows[4]?.id], "nothing was announced for the rolled-back transaction");
});

t.test("an event is visible only with its commit", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 4);
  const client: pg.PoolClient = await pool.connect();
  t.teardown(() => client.release());
  await client.query("begin");
  const id = await recordEvent(client, {
    type: "supplier.resumed",
    supplier: "iek",
    payload: { by: "test" },
  });
  const outside = await pool.query("select count(*)::int as n from ingestion_events");
  t.equal(outside.rows[0].n, 0, "not visible before its transaction commits");
  await client.query("commit");
  const after = await pool.query("select type, payload from ingestion_events where id = $1", [id]);
  t.same(after.rows, [
    { type: "supplier.resumed", payload: { type: "supplier.resumed", supplier: "iek", by: "test" } },
  ]);
});
