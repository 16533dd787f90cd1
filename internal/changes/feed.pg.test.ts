import { PassThrough } from "node:stream";
import fc from "fast-check";
import type pg from "pg";
import t from "tap";
import { createTestDatabase, type Teardown, testPool } from "../../test/helpers/db.js";
import { until } from "../../test/helpers/fixtures.js";
import type { Offer, Page } from "../ingestion/ports.js";
import { ConfigError } from "../platform/errors.js";
import { commitPage } from "../store/offers.js";
import { closeRun, startRun } from "../store/runs.js";
import {
  type Change,
  type Cursor,
  FEED_START,
  formatCursor,
  parseCursor,
  readChanges,
  streamChanges,
} from "./feed.js";

const OWNER = { hostname: "test-host", pid: 1, bootId: "boot" };

function offers(skus: string[], price = "10.50"): Offer[] {
  return skus.map((sku) => ({ sku, name: `Offer ${sku}`, price, currency: "EUR", stock: 3 }));
}

function page(seq: number, list: Offer[]): Page {
  return { seq, offers: list, rejects: [], httpAttempts: 1 };
}

async function setup(t: Teardown) {
  const pool = testPool(t, await createTestDatabase(t), 8);
  const client = await pool.connect();
  t.teardown(() => client.release());
  return { pool, client };
}

/** One complete walk of `supplier` that saw `pages` (each a list of offers), closed. */
async function walk(
  client: pg.ClientBase,
  supplier: string,
  pages: Offer[][],
  slot: string,
): Promise<number> {
  const runId = await startRun(client, {
    supplier,
    slotStart: new Date(slot),
    trigger: "forced",
    owner: OWNER,
  });
  for (const [i, list] of pages.entries()) {
    await commitPage(client, { runId, supplier, page: page(i + 1, list) });
  }
  await closeRun(client, { runId, walkComplete: true, errorCode: null, errorMessage: null });
  return runId;
}

/** Follows the cursor until the feed has nothing more (bounded). */
async function drain(
  db: pg.Pool,
  since: Cursor,
  limit = 1000,
): Promise<{ changes: Change[]; cursor: Cursor }> {
  const changes: Change[] = [];
  let cursor = since;
  for (let i = 0; i < 10_000; i++) {
    const batch = await readChanges(db, { since: cursor, limit });
    if (batch.length === 0) return { changes, cursor };
    changes.push(...batch);
    cursor = parseCursor((batch.at(-1) as Change).cursor);
  }
  throw new Error("feed did not end");
}

/** One batch through `streamChanges` (the CLI's chunked COPY), as `{ cursor, sku }` of its JSON lines. */
async function streamBatch(
  pool: pg.Pool,
  q: { since: Cursor; limit: number; supplier?: string },
): Promise<{ rows: { cursor: string; sku: string }[]; cursor: Cursor; count: number }> {
  const client = await pool.connect();
  try {
    const out = new PassThrough();
    const chunks: Buffer[] = [];
    out.on("data", (c: Buffer) => chunks.push(c));
    const result = await streamChanges(client, q, out, { json: true });
    const text = Buffer.concat(chunks).toString("utf8");
    const rows =
      text === ""
        ? []
        : text
            .trimEnd()
            .split("\n")
            .map((l) => JSON.parse(l) as Change);
    return {
      rows: rows.map((r) => ({ cursor: r.cursor, sku: r.sku })),
      cursor: result.cursor,
      count: result.count,
    };
  } finally {
    client.release();
  }
}

/**
 * {@link drain} once the feed holds at least `n` changes after `since`: the feed lags
 * behind the oldest transaction running anywhere on the server (other test files' too).
 */
function drainAtLeast(db: pg.Pool, since: Cursor, n: number): Promise<{ changes: Change[]; cursor: Cursor }> {
  return until(
    async () => {
      const d = await drain(db, since);
      return d.changes.length >= n ? d : null;
    },
    30_000,
    `${n} changes in the feed`,
  );
}

t.test("cursors: parsed, formatted, and a bad one named", async (t) => {
  t.same(parseCursor("7741:120455"), { txid: 7741n, id: 120455n });
  t.equal(formatCursor({ txid: 18446744073709551615n, id: 1n }), "18446744073709551615:1");
  for (const bad of ["", "12", "12:", "a:1", "1:2:3", "-1:2", "99999999999999999999:1"]) {
    t.throws(() => parseCursor(bad), ConfigError, `"${bad}" refused`);
  }
  t.match(
    (() => {
      try {
        parseCursor("12-3");
      } catch (err) {
        return (err as Error).message;
      }
    })(),
    /--since "12-3" is not a cursor/,
  );
});

t.test(
  "observations carry kind and txid: listed, changed, delisted, relisted, in commit order",
  async (t) => {
    const { pool, client } = await setup(t);
    const run1 = await walk(client, "etm", [offers(["A", "B"]), offers(["C"])], "2025-01-01T00:00:00Z");
    const first = await drainAtLeast(pool, FEED_START, 3);
    t.same(
      first.changes.map((c) => [c.sku, c.kind, c.run_id]),
      [
        ["A", "listed", run1],
        ["B", "listed", run1],
        ["C", "listed", run1],
      ],
    );
    // B changed, C gone (delisted at the close, in the close's transaction).
    const run2 = await walk(
      client,
      "etm",
      [[...offers(["A"]), ...offers(["B"], "11.00")]],
      "2025-01-02T00:00:00Z",
    );
    const second = await drainAtLeast(pool, first.cursor, 2);
    t.same(
      second.changes.map((c) => [c.sku, c.kind, c.run_id, c.price]),
      [
        ["B", "changed", run2, "11.00"],
        ["C", "delisted", run2, "10.50"],
      ],
    );
    const [changed, delisted] = second.changes as [Change, Change];
    t.ok(
      parseCursor(delisted.cursor).txid > parseCursor(changed.cursor).txid,
      "the close is a later transaction",
    );
    const closeTx = await pool.query<{ txid: string }>(
      "select txid::text from supplier_offer_observations where sku = 'C' and run_id = $1",
      [run2],
    );
    t.equal(closeTx.rows[0]?.txid, parseCursor(delisted.cursor).txid.toString());
    const stored = await pool.query("select delisted_at from supplier_offers where sku = 'C'");
    t.not(stored.rows[0].delisted_at, null, "the offer is delisted");

    // C back unchanged: relisted at the close (no page observation: its content did not change).
    // D back with a new price in the same run: its page observation becomes the relisting.
    const run3 = await walk(
      client,
      "etm",
      [[...offers(["A"]), ...offers(["B"], "11.00"), ...offers(["C"])]],
      "2025-01-03T00:00:00Z",
    );
    const third = await drainAtLeast(pool, second.cursor, 1);
    t.same(
      third.changes.map((c) => [c.sku, c.kind, c.run_id]),
      [["C", "relisted", run3]],
    );
    await walk(client, "etm", [[...offers(["A"]), ...offers(["B"], "11.00")]], "2025-01-04T00:00:00Z");
    const fourth = await drainAtLeast(pool, third.cursor, 1);
    const run5 = await walk(
      client,
      "etm",
      [[...offers(["A"]), ...offers(["B"], "11.00"), ...offers(["C"], "12.00")]],
      "2025-01-05T00:00:00Z",
    );
    const fifth = await drainAtLeast(pool, fourth.cursor, 1);
    t.same(
      fifth.changes.map((c) => [c.sku, c.kind, c.run_id, c.price]),
      [["C", "relisted", run5, "12.00"]],
      "a relisted offer with new values: one observation, relisted, with the values",
    );
    t.equal((await drain(pool, fifth.cursor)).changes.length, 0, "nothing more");

    // The streamed form (COPY … TO STDOUT) gives the same rows and cursor.
    const out = new PassThrough();
    const chunks: Buffer[] = [];
    out.on("data", (c: Buffer) => chunks.push(c));
    const streamed = await streamChanges(client, { since: FEED_START, limit: 1000 }, out, { json: true });
    const lines = Buffer.concat(chunks).toString("utf8").trimEnd().split("\n");
    const all = await drain(pool, FEED_START);
    t.equal(streamed.count, all.changes.length);
    t.equal(formatCursor(streamed.cursor), formatCursor(all.cursor));
    t.same(
      lines.map((l) => {
        const o = JSON.parse(l) as Change;
        return [o.cursor, o.sku, o.kind, o.price, new Date(o.observed_at).toISOString(), o.run_id, o.stock];
      }),
      all.changes.map((c) => [c.cursor, c.sku, c.kind, c.price, c.observed_at, c.run_id, c.stock]),
    );
    t.match(lines[0], /"observed_at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"/, "ISO 8601 in UTC");
    const bySupplier = await readChanges(pool, { since: FEED_START, supplier: "iek", limit: 10 });
    t.equal(bySupplier.length, 0, "--supplier filters");
  },
);

/** Waits until the backend `pid` waits on a lock (bounded). */
async function blockedOnLock(pool: pg.Pool, pid: number): Promise<void> {
  await until(
    async () =>
      (await pool.query("select 1 from pg_stat_activity where pid = $1 and wait_event_type = 'Lock'", [pid]))
        .rowCount === 1,
    20_000,
    `backend ${pid} to wait on the test's row lock`,
  );
}

t.test(
  "exactly once when a transaction that began earlier commits after a later one (a row lock delays it)",
  async (t) => {
    const { pool, client: a } = await setup(t);
    const b = await pool.connect();
    const locker = await pool.connect();
    t.teardown(() => {
      b.release();
      locker.release();
    });
    const runA = await startRun(a, {
      supplier: "etm",
      slotStart: new Date(0),
      trigger: "forced",
      owner: OWNER,
    });
    const runB = await startRun(b, {
      supplier: "iek",
      slotStart: new Date(0),
      trigger: "forced",
      owner: OWNER,
    });
    const before = await drain(pool, FEED_START);
    // Timestamps as text: microseconds, which a JS Date would cut to milliseconds.
    const lastBefore = await pool.query<{ at: string }>(
      "select coalesce(max(observed_at), '-infinity')::text as at from supplier_offer_observations",
    );
    // The test holds the lock of etm's run row: etm's page statement writes its observations
    // (its txid and ids are taken) and then waits to update the run's counters.
    await locker.query("begin");
    await locker.query("select 1 from ingestion_runs where id = $1 for update", [runA]);
    const pidA = (await a.query<{ pid: number }>("select pg_backend_pid() as pid")).rows[0]?.pid as number;
    const slowA = commitPage(a, { runId: runA, supplier: "etm", page: page(1, offers(["A1", "A2"])) });
    await blockedOnLock(pool, pidA);
    await commitPage(b, { runId: runB, supplier: "iek", page: page(1, offers(["B1", "B2"])) });

    // iek's rows are committed, and etm's transaction began earlier (its observed_at is
    // smaller): an observed_at cursor reads iek's rows and moves past etm's.
    const byTime = await pool.query<{ sku: string; at: string }>(
      "select sku, observed_at::text as at from supplier_offer_observations where observed_at > $1::timestamptz order by observed_at",
      [lastBefore.rows[0]?.at],
    );
    t.same(
      byTime.rows.map((r) => r.sku),
      ["B1", "B2"],
      "an observed_at cursor already sees the later transaction",
    );
    const timeCursor = byTime.rows.at(-1)?.at as string;
    const early = await readChanges(pool, { since: before.cursor, limit: 100 });
    t.same(early, [], "the feed returns nothing while the earlier transaction is still running");

    await locker.query("commit");
    await slowA;
    const missed = await pool.query<{ sku: string }>(
      "select sku from supplier_offer_observations where observed_at > $1::timestamptz order by observed_at",
      [timeCursor],
    );
    t.same(missed.rows, [], "the observed_at cursor has missed etm's rows for good");

    const after = await until(
      async () => {
        const d = await drain(pool, before.cursor, 1);
        return d.changes.length === 4 ? d : null;
      },
      30_000,
      "both transactions in the feed",
    );
    t.same(
      after.changes.map((c) => c.sku),
      ["A1", "A2", "B1", "B2"],
      "every change exactly once, in commit order of the transactions' ids",
    );
    t.equal((await drain(pool, after.cursor)).changes.length, 0);
  },
);

type Action =
  | { kind: "write"; writer: number; rows: number }
  | { kind: "commit"; writer: number }
  | { kind: "rollback"; writer: number }
  | { kind: "read"; limit: number; stream: boolean };

t.test(
  "property: over random interleavings of concurrent writers, a cursor reader sees each row once",
  async (t) => {
    const { pool } = await setup(t);
    const WRITERS = 3;
    const clients = await Promise.all(Array.from({ length: WRITERS }, () => pool.connect()));
    t.teardown(() => {
      for (const c of clients) c.release();
    });
    let sku = 0;
    const actionArb: fc.Arbitrary<Action> = fc.oneof(
      fc.record({
        kind: fc.constant("write" as const),
        writer: fc.nat(WRITERS - 1),
        rows: fc.integer({ min: 1, max: 3 }),
      }),
      fc.record({ kind: fc.constant("commit" as const), writer: fc.nat(WRITERS - 1) }),
      fc.record({ kind: fc.constant("rollback" as const), writer: fc.nat(WRITERS - 1) }),
      fc.record({
        kind: fc.constant("read" as const),
        limit: fc.integer({ min: 1, max: 4 }),
        stream: fc.boolean(),
      }),
    );
    let cursor: Cursor = (await drain(pool, FEED_START)).cursor;
    await fc.assert(
      fc.asyncProperty(fc.array(actionArb, { minLength: 5, maxLength: 40 }), async (actions) => {
        const open = new Map<number, string[]>();
        const committed = new Set<string>();
        const read: string[] = [];
        // The documented SQL (readChanges) and the CLI's chunked COPY (streamChanges), mixed.
        const readBatch = async (limit: number, stream = false) => {
          if (stream) {
            const batch = await streamBatch(pool, { since: cursor, limit });
            for (const c of batch.rows) read.push(c.sku);
            if (batch.rows.length > 0) t.equal(formatCursor(batch.cursor), batch.rows.at(-1)?.cursor);
            cursor = batch.cursor;
            return;
          }
          const batch = await readChanges(pool, { since: cursor, limit });
          for (const c of batch) read.push(c.sku);
          if (batch.length > 0) cursor = parseCursor((batch.at(-1) as Change).cursor);
        };
        for (const action of actions) {
          if (action.kind === "read") {
            await readBatch(action.limit, action.stream);
            continue;
          }
          const client = clients[action.writer] as pg.PoolClient;
          const pending = open.get(action.writer);
          if (action.kind === "write") {
            if (!pending) await client.query("begin");
            const skus = Array.from({ length: action.rows }, () => `P-${++sku}`);
            await client.query(
              `insert into supplier_offer_observations (supplier, sku, run_id, content_hash, kind, txid)
             select 'w' || $1::int, s, 1, 'h', 'changed', pg_current_xact_id() from unnest($2::text[]) s`,
              [action.writer, skus],
            );
            open.set(action.writer, [...(pending ?? []), ...skus]);
          } else if (pending) {
            await client.query(action.kind);
            if (action.kind === "commit") for (const s of pending) committed.add(s);
            open.delete(action.writer);
          }
        }
        for (const [writer, pending] of open) {
          await (clients[writer] as pg.PoolClient).query("commit");
          for (const s of pending) committed.add(s);
        }
        await until(
          async () => {
            await readBatch(1000);
            return read.length >= committed.size;
          },
          30_000,
          "the feed to catch up",
        );
        await readBatch(1000);
        t.equal(new Set(read).size, read.length, "no row read twice");
        t.same([...read].sort(), [...committed].sort(), "every committed row read, no rolled-back one");
        return new Set(read).size === read.length && read.length === committed.size;
      }),
      { numRuns: 25 },
    );
  },
);

t.test(
  "the CLI's chunked read passes over transactions whose rows were all rewritten later, past one look-up",
  async (t) => {
    const { pool } = await setup(t);
    const before = (await drain(pool, FEED_START)).cursor;
    // 1,050 transactions each rewriting the same observation, as a later page of a run does
    // (on conflict: the row takes the rewriting transaction's txid and a new id): all but the
    // last are left with no row, more than one look-up of 1,000 transactions.
    for (let i = 0; i < 1050; i++) {
      await pool.query(
        `insert into supplier_offer_observations (supplier, sku, run_id, content_hash, kind, txid)
         values ('etm', 'A', 1, $1, 'changed', pg_current_xact_id())
         on conflict (supplier, sku, run_id) do update
            set content_hash = excluded.content_hash, txid = excluded.txid, id = excluded.id`,
        [`h${i}`],
      );
    }
    await pool.query(
      `insert into supplier_offer_observations (supplier, sku, run_id, content_hash, kind, txid)
       values ('etm', 'B', 1, 'h', 'listed', pg_current_xact_id())`,
    );
    const read = await until(
      async () => {
        const batch = await streamBatch(pool, { since: before, limit: 1 });
        return batch.count === 1 ? batch : null;
      },
      30_000,
      "the rewritten row in the feed",
    );
    t.same(
      read.rows.map((r) => r.sku),
      ["A"],
      "the row in its last transaction, after 1,049 empty ones",
    );
    const next = await until(
      async () => {
        const batch = await streamBatch(pool, { since: read.cursor, limit: 5 });
        return batch.count === 1 ? batch : null;
      },
      30_000,
      "the next transaction's row",
    );
    t.same(
      next.rows.map((r) => r.sku),
      ["B"],
    );
    const end = await streamBatch(pool, { since: next.cursor, limit: 5 });
    t.same(
      [end.count, formatCursor(end.cursor)],
      [0, formatCursor(next.cursor)],
      "nothing more: the cursor stays",
    );
    const content = await pool.query("select content_hash from supplier_offer_observations where sku = 'A'");
    t.equal(content.rows[0]?.content_hash, "h1049", "the last version");
  },
);

t.test(
  "the CLI's chunked read: transactions spanning several chunks, in batches, as the SQL reads them",
  async (t) => {
    const { pool } = await setup(t);
    const before = (await drain(pool, FEED_START)).cursor;
    // Four transactions of 6,000 rows (a chunk ends past 20,000 ids), then two writers at
    // once, each one's rows inside the other's id range.
    for (let i = 0; i < 4; i++) {
      await pool.query(
        `insert into supplier_offer_observations (supplier, sku, run_id, content_hash, kind, txid)
       select 'etm', 'T${i}-' || lpad(n::text, 5, '0'), 1, 'h', 'listed', pg_current_xact_id()
         from generate_series(1, 6000) n`,
      );
    }
    const a = await pool.connect();
    const b = await pool.connect();
    t.teardown(() => {
      a.release();
      b.release();
    });
    await a.query("begin");
    await b.query("begin");
    // A takes its transaction id first, B writes first: the later transaction holds the
    // smaller ids, so the chunk's ids begin at the later transaction's.
    await a.query("select pg_current_xact_id()");
    for (let k = 0; k < 3; k++) {
      for (const [client, name] of [
        [b, "B"],
        [a, "A"],
      ] as const) {
        await client.query(
          `insert into supplier_offer_observations (supplier, sku, run_id, content_hash, kind, txid)
         select $1, $1 || '${k}-' || lpad(n::text, 5, '0'), 1, 'h', 'listed', pg_current_xact_id()
           from generate_series(1, 700) n`,
          [name === "A" ? "iek" : "dkc"],
        );
      }
    }
    await b.query("commit");
    await a.query("commit");
    const expected = await until(
      async () => {
        const all = await drain(pool, before, 10_000);
        return all.changes.length === 24_000 + 4200 ? all : null;
      },
      30_000,
      "every row in the feed",
    );
    const streamed: { cursor: string; sku: string }[] = [];
    let cursor = before;
    for (const limit of [1, 7000, 13, 9999, 20_000, 20_000]) {
      const batch = await streamBatch(pool, { since: cursor, limit });
      t.ok(batch.count <= limit, `at most ${limit}`);
      streamed.push(...batch.rows);
      cursor = batch.cursor;
    }
    t.equal(streamed.length, expected.changes.length, "every row once");
    t.same(
      streamed.map((r) => r.cursor),
      expected.changes.map((c) => c.cursor),
      "in the feed's order, the cursors of the documented SQL",
    );
    const whole = await streamBatch(pool, { since: before, limit: 100_000 });
    t.same(
      whole.rows.map((r) => r.cursor),
      expected.changes.map((c) => c.cursor),
      "in one batch too (the two writers in a chunk of their own)",
    );
    const iek = await streamBatch(pool, { since: before, limit: 100_000, supplier: "iek" });
    t.equal(iek.count, 2100, "--supplier: one writer's rows only");
  },
);

t.test("the CLI's chunked read orders transactions as numbers: 9 before 10, 99 before 100", async (t) => {
  const { pool } = await setup(t);
  // Transaction ids written as they are (below any cluster's first xmin after initdb, so
  // finished for every snapshot), one statement each so that the triggers note each one's range.
  for (const txid of ["100", "9", "99", "10"]) {
    await pool.query(
      `insert into supplier_offer_observations (supplier, sku, run_id, content_hash, kind, txid)
       select 'etm', $1 || '-' || n, 1, 'h', 'listed', $1::xid8 from generate_series(1, 2) n`,
      [txid],
    );
  }
  const expected = (await drain(pool, FEED_START)).changes.map((c) => c.sku);
  t.same(expected.slice(0, 8), ["9-1", "9-2", "10-1", "10-2", "99-1", "99-2", "100-1", "100-2"]);
  const streamed = await streamBatch(pool, { since: FEED_START, limit: 1000 });
  t.same(
    streamed.rows.map((r) => r.sku),
    expected,
    "the same rows in the same order as the documented SQL",
  );
});

t.test("the CLI's chunked read streams a transaction larger than it holds in memory, in order", async (t) => {
  const { pool } = await setup(t);
  const before = (await drain(pool, FEED_START)).cursor;
  // One transaction of 100,000 rows: a chunk of its own, ~13 MB of COPY text, past the 8 MB
  // held back before the next chunk's COPY is sent; then a small one after it.
  await pool.query(
    `insert into supplier_offer_observations (supplier, sku, run_id, content_hash, kind, txid)
     select 'etm', 'L-' || lpad(n::text, 6, '0'), 1, md5(n::text), 'listed', pg_current_xact_id()
       from generate_series(1, 100000) n`,
  );
  await pool.query(
    `insert into supplier_offer_observations (supplier, sku, run_id, content_hash, kind, txid)
     values ('etm', 'S-1', 1, 'h', 'listed', pg_current_xact_id())`,
  );
  const expected = await until(
    async () => {
      const all = await drain(pool, before, 20_000);
      return all.changes.length === 100_001 ? all : null;
    },
    30_000,
    "every row in the feed",
  );
  const streamed = await streamBatch(pool, { since: before, limit: 200_000 });
  t.equal(streamed.count, 100_001);
  t.ok(
    streamed.rows.every((r, i) => r.cursor === expected.changes[i]?.cursor),
    "every row once, in the documented SQL's order",
  );
  t.equal(streamed.rows.at(-1)?.sku, "S-1");
});
