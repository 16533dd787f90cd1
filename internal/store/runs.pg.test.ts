import type pg from "pg";
import t from "tap";
import { createTestDatabase, type Teardown, testPool } from "../../test/helpers/db.js";
import type { Offer, Page } from "../ingestion/ports.js";
import { commitPage, recordFailedStep } from "./offers.js";
import {
  closeRun,
  ERROR_MESSAGE_MAX_CHARS,
  hasCompleteWalkInSlot,
  heartbeatRun,
  recoverAbandonedRuns,
  startRun,
} from "./runs.js";

const OWNER = { hostname: "test-host", pid: 1, bootId: "boot" };
const SLOT = new Date("2025-01-01T00:00:00Z");

async function setup(t: Teardown) {
  const pool = testPool(t, await createTestDatabase(t));
  const client = await pool.connect();
  t.teardown(() => client.release());
  return { pool, client };
}

function offers(from: number, to: number): Offer[] {
  return Array.from({ length: to - from }, (_, i) => ({
    sku: `S${from + i}`,
    name: null,
    price: "1.00",
    currency: "EUR",
    stock: 1,
  }));
}

function page(seq: number, list: Offer[]): Page {
  return { seq, offers: list, rejects: [], httpAttempts: 1 };
}

async function run(db: pg.ClientBase, supplier = "etm", slotStart = SLOT): Promise<number> {
  return startRun(db, { supplier, slotStart, trigger: "schedule", owner: OWNER });
}

async function runRow(pool: pg.Pool, id: number) {
  const { rows } = await pool.query(
    "select state, error_code, error_message, pages, records_delisted, finished_at from ingestion_runs where id = $1",
    [id],
  );
  return rows[0];
}

const ok = { walkComplete: true, errorCode: null, errorMessage: null };

t.test("startRun writes a running row with owner, slot and trigger; heartbeat refreshes it", async (t) => {
  const { pool, client } = await setup(t);
  const id = await startRun(client, { supplier: "etm", slotStart: SLOT, trigger: "tick_once", owner: OWNER });
  t.type(id, "number");
  await pool.query("update ingestion_runs set heartbeat_at = now() - interval '1 hour' where id = $1", [id]);
  await heartbeatRun(client, id);
  const { rows } = await pool.query(
    "select state, trigger, owner, slot_start, heartbeat_at > now() - interval '1 minute' as fresh from ingestion_runs where id = $1",
    [id],
  );
  t.same(rows[0], { state: "running", trigger: "tick_once", owner: OWNER, slot_start: SLOT, fresh: true });
});

t.test("startRun's started_at is the time the slot was read when given, else now()", async (t) => {
  const { pool, client } = await setup(t);
  // A tick that read its slot 1 ms before the slot's end records that time, not its insert's now().
  const readAt = new Date(SLOT.getTime() + 3_599_999);
  const given = await startRun(client, {
    supplier: "etm",
    slotStart: SLOT,
    startedAt: readAt,
    trigger: "schedule",
    owner: OWNER,
  });
  const absent = await run(client);
  const { rows } = await pool.query<{ id: string; started_at: Date; recent: boolean }>(
    "select id, started_at, started_at > now() - interval '1 minute' as recent from ingestion_runs where id = any($1) order by id",
    [[given, absent]],
  );
  t.same(rows[0]?.started_at, readAt, "the slot's read time");
  t.equal(rows[1]?.recent, true, "now() when absent");
});

t.test("recovery closes abandoned runs from their committed steps", async (t) => {
  const { pool, client } = await setup(t);
  const withSteps = await run(client);
  for (const seq of [1, 2, 3]) {
    await commitPage(client, {
      runId: withSteps,
      supplier: "etm",
      page: page(seq, offers(seq * 10, seq * 10 + 5)),
    });
  }
  const without = await run(client);
  const otherSupplier = await run(client, "iek");
  const closedOne = await run(client);
  await closeRun(client, { runId: closedOne, walkComplete: false, errorCode: "NETWORK", errorMessage: "x" });

  const recovered = await recoverAbandonedRuns(pool, "etm");
  t.same(
    recovered.sort((a, b) => a.id - b.id),
    [
      { id: withSteps, state: "partial", pages: 3 },
      { id: without, state: "failed", pages: 0 },
    ],
  );
  t.match(await runRow(pool, withSteps), { state: "partial", error_code: "INTERRUPTED", pages: 3 });
  t.match(await runRow(pool, without), { state: "failed", error_code: "INTERRUPTED", finished_at: Date });
  t.match(await runRow(pool, otherSupplier), { state: "running" }, "another supplier's run is not touched");
  t.match(
    await runRow(pool, closedOne),
    { state: "failed", error_code: "NETWORK" },
    "closed runs are not touched",
  );
  t.same(await recoverAbandonedRuns(pool, "etm"), [], "nothing left to recover");
  t.equal(
    await closeRun(client, { runId: withSteps, ...ok }),
    null,
    "the CAS close of a recovered run matches nothing",
  );
  t.match(await runRow(pool, withSteps), { state: "partial", error_code: "INTERRUPTED" });
});

t.test("closeRun derives the outcome from the steps and never reports a false success", async (t) => {
  const { pool, client } = await setup(t);
  const withPage = async () => {
    const id = await run(client);
    await commitPage(client, { runId: id, supplier: "etm", page: page(1, offers(0, 3)) });
    return id;
  };
  const incomplete = await withPage();
  t.equal((await closeRun(client, { runId: incomplete, ...ok, walkComplete: false }))?.state, "partial");

  const stepFailed = await withPage();
  await recordFailedStep(client, {
    runId: stepFailed,
    supplier: "etm",
    seq: 2,
    errorCode: "HTTP_500",
    httpAttempts: 5,
  });
  t.equal((await closeRun(client, { runId: stepFailed, ...ok }))?.state, "partial", "a failed step");

  const withError = await withPage();
  const long = "e".repeat(5000);
  t.equal(
    (await closeRun(client, { runId: withError, ...ok, errorCode: "SHUTDOWN", errorMessage: long }))?.state,
    "partial",
    "an error code",
  );
  const row = await runRow(pool, withError);
  t.equal(row?.error_code, "SHUTDOWN");
  t.equal(row?.error_message.length, ERROR_MESSAGE_MAX_CHARS, "message truncated");

  const empty = await run(client);
  t.equal((await closeRun(client, { runId: empty, ...ok }))?.state, "failed", "no step succeeded");
  const onlyFailed = await run(client);
  await recordFailedStep(client, {
    runId: onlyFailed,
    supplier: "etm",
    seq: 1,
    errorCode: "AUTH",
    httpAttempts: 1,
  });
  t.equal(
    (await closeRun(client, { runId: onlyFailed, ...ok, errorCode: "AUTH", errorMessage: "401" }))?.state,
    "failed",
  );

  const good = await withPage();
  const closed = await closeRun(client, { runId: good, ...ok });
  t.match(closed, { state: "succeeded", counts: { pages: 1, recordsSeen: 3 } });
  t.equal(await closeRun(client, { runId: good, ...ok }), null, "second close matches nothing");
  t.equal(await hasCompleteWalkInSlot(pool, "etm", SLOT), true);
  t.equal(await hasCompleteWalkInSlot(pool, "etm", new Date("2025-01-01T06:00:00Z")), false);
  t.equal(await hasCompleteWalkInSlot(pool, "iek", SLOT), false);
});

t.test("delisting after a succeeded run only, and re-appearing offers are relisted", async (t) => {
  const { pool, client } = await setup(t);
  const delisted = async () =>
    (
      await pool.query<{ n: number }>(
        "select count(*)::int as n from supplier_offers where delisted_at is not null",
      )
    ).rows[0]?.n;

  const first = await run(client, "etm", new Date("2025-01-01T00:00:00Z"));
  await commitPage(client, { runId: first, supplier: "etm", page: page(1, offers(0, 500)) });
  await commitPage(client, { runId: first, supplier: "etm", page: page(2, offers(500, 1000)) });
  t.match(await closeRun(client, { runId: first, ...ok }), {
    state: "succeeded",
    counts: { recordsDelisted: 0 },
  });
  const other = await run(client, "iek");
  await commitPage(client, { runId: other, supplier: "iek", page: page(1, offers(0, 10)) });
  await closeRun(client, { runId: other, ...ok });

  // A partial run that saw only half the catalog delists nothing.
  const partial = await run(client, "etm", new Date("2025-01-01T06:00:00Z"));
  await commitPage(client, { runId: partial, supplier: "etm", page: page(1, offers(0, 500)) });
  const partialClose = await closeRun(client, { runId: partial, ...ok, walkComplete: false });
  t.match(partialClose, { state: "partial", counts: { recordsDelisted: 0 } });
  t.equal(await delisted(), 0, "nothing delisted after a partial run");

  // A complete run without the last 50 SKUs: unchanged offers are seen without being written.
  const second = await run(client, "etm", new Date("2025-01-01T12:00:00Z"));
  await commitPage(client, { runId: second, supplier: "etm", page: page(1, offers(0, 500)) });
  await commitPage(client, { runId: second, supplier: "etm", page: page(2, offers(500, 950)) });
  const closed = await closeRun(client, { runId: second, ...ok });
  t.match(closed, { state: "succeeded", counts: { recordsDelisted: 50, recordsUnchanged: 950 } });
  t.equal((await runRow(pool, second))?.records_delisted, 50);
  t.equal(await delisted(), 50);
  const gone = await pool.query(
    "select min(sku) as lo, max(sku) as hi from supplier_offers where delisted_at is not null",
  );
  t.same(gone.rows[0], { lo: "S950", hi: "S999" });
  t.equal(
    (
      await pool.query(
        "select delisted_at from supplier_offers where supplier = 'iek' and delisted_at is not null",
      )
    ).rowCount,
    0,
    "another supplier's offers are never delisted",
  );

  // They come back unchanged (and one changed) in the next complete run: delisted_at is cleared.
  const third = await run(client, "etm", new Date("2025-01-01T18:00:00Z"));
  const back = offers(900, 1000);
  back[99] = { ...back[99]!, price: "2.00" };
  await commitPage(client, { runId: third, supplier: "etm", page: page(1, offers(0, 900)) });
  await commitPage(client, { runId: third, supplier: "etm", page: page(2, back) });
  t.match(await closeRun(client, { runId: third, ...ok }), {
    state: "succeeded",
    counts: { recordsDelisted: 0 },
  });
  t.equal(await delisted(), 0, "re-appearing offers relisted");
});

t.test("a SKU on two pages of a run counts once: relisted once, never delisted", async (t) => {
  const { pool, client } = await setup(t);
  const first = await run(client, "etm", new Date("2025-01-01T00:00:00Z"));
  await commitPage(client, { runId: first, supplier: "etm", page: page(1, offers(0, 20)) });
  await closeRun(client, { runId: first, ...ok });
  const second = await run(client, "etm", new Date("2025-01-01T06:00:00Z"));
  await commitPage(client, { runId: second, supplier: "etm", page: page(1, offers(0, 15)) });
  t.match(await closeRun(client, { runId: second, ...ok }), { counts: { recordsDelisted: 5 } });

  // S15..S19 come back, each on both pages (an unstable page order); S0..S14 on one page each,
  // S10..S14 on both as well, so every repeated SKU is listed or was delisted.
  const third = await run(client, "etm", new Date("2025-01-01T12:00:00Z"));
  await commitPage(client, { runId: third, supplier: "etm", page: page(1, offers(0, 20)) });
  await commitPage(client, { runId: third, supplier: "etm", page: page(2, offers(10, 20)) });
  t.match(await closeRun(client, { runId: third, ...ok }), {
    state: "succeeded",
    counts: { recordsDelisted: 0 },
  });
  const { rows } = await pool.query<{ listed: number; relisted: number }>(
    `select (select count(*)::int from supplier_offers where supplier = 'etm' and delisted_at is null) as listed,
            (select count(*)::int from supplier_offer_observations where run_id = $1 and kind = 'relisted') as relisted`,
    [third],
  );
  t.same(rows[0], { listed: 20, relisted: 5 }, "one relisting observation per offer");

  // A run that repeats some SKUs and misses others delists exactly the missed ones.
  const fourth = await run(client, "etm", new Date("2025-01-01T18:00:00Z"));
  await commitPage(client, { runId: fourth, supplier: "etm", page: page(1, offers(0, 12)) });
  await commitPage(client, { runId: fourth, supplier: "etm", page: page(2, offers(5, 12)) });
  t.match(await closeRun(client, { runId: fourth, ...ok }), { counts: { recordsDelisted: 8 } });
  const gone = await pool.query<{ skus: string[] }>(
    "select array_agg(sku order by sku) as skus from supplier_offers where delisted_at is not null",
  );
  t.same(gone.rows[0]?.skus, ["S12", "S13", "S14", "S15", "S16", "S17", "S18", "S19"]);
});

t.test(
  "delisting needs the run's seen set: closing elsewhere, or leftovers of another run, never delist falsely",
  async (t) => {
    const { pool, client } = await setup(t);
    const seed = await run(client, "etm", new Date("2025-01-01T00:00:00Z"));
    await commitPage(client, { runId: seed, supplier: "etm", page: page(1, offers(0, 100)) });
    await closeRun(client, { runId: seed, ...ok });

    // Closed through the pool (another session): the seen set is not there, so no delisting.
    const elsewhere = await run(client, "etm", new Date("2025-01-01T06:00:00Z"));
    await commitPage(client, { runId: elsewhere, supplier: "etm", page: page(1, offers(0, 10)) });
    t.match(await closeRun(pool, { runId: elsewhere, ...ok }), {
      state: "succeeded",
      counts: { recordsDelisted: 0 },
    });

    // Run A staged SKUs on this session and was closed by recovery elsewhere; run B on the same session
    // must not count A's SKUs as seen.
    const a = await run(client, "etm", new Date("2025-01-01T12:00:00Z"));
    await commitPage(client, { runId: a, supplier: "etm", page: page(1, offers(0, 100)) });
    await recoverAbandonedRuns(pool, "etm");
    const b = await run(client, "etm", new Date("2025-01-01T18:00:00Z"));
    await commitPage(client, { runId: b, supplier: "etm", page: page(1, offers(0, 60)) });
    t.match(await closeRun(client, { runId: b, ...ok }), {
      state: "succeeded",
      counts: { recordsDelisted: 40 },
    });
    const staged = await client.query<{ n: number }>(
      "select count(*)::int as n from pg_temp.supplier_sync_run_seen",
    );
    t.equal(staged.rows[0]?.n, 0, "the session's seen set is emptied when the run closes");
  },
);
