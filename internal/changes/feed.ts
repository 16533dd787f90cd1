/**
 * The change feed (docs/changes.md, Consuming changes): offer observations in commit
 * order, with a cursor, for `supplier-sync changes` and for consumers reading SQL.
 *
 * Invariants:
 * - Position: every observation carries `txid` (the id of the transaction that wrote
 *   it, `pg_current_xact_id()`) and `id` (a sequence). The feed is ordered by
 *   `(txid, id)` and a cursor is the last position read, `"TXID:ID"`.
 * - Gap-free: the feed returns only rows whose transaction is finished for every
 *   snapshot, `txid < pg_snapshot_xmin(pg_current_snapshot())`. Every transaction
 *   that starts later gets a larger id, so the set of rows below that bound never
 *   grows again: a reader that moved past a position never has a row appear behind
 *   it, even when a transaction that began earlier (smaller txid) commits after a
 *   later one. An `id` or `observed_at` cursor misses exactly those rows.
 * - A row rewritten later (the run's next page changed the offer again, a relisting
 *   at the close) takes the rewriting transaction's id: it moves forward and is read
 *   again in its final form. Each change is read exactly once; a rewritten row once
 *   per version a reader happened to catch.
 * - The bound is the oldest transaction running anywhere in the cluster: a long
 *   transaction delays the feed (never loses a row).
 * - Read by transaction: `supplier_offer_feed_transactions` holds one row per writing
 *   transaction with the smallest and largest `id` it wrote (statement-level triggers keep
 *   it, in the writing transaction). The feed walks those rows in `txid` order and reads
 *   each one's observations by its id range (a BRIN index on `id`) and its `txid`: no
 *   per-row index entry is written on the page's path. A rewritten row takes a new `id`
 *   from its new transaction (`id = excluded.id` in every `on conflict` of the writers) so
 *   it falls in that transaction's range; were it to keep an old one, the trigger would
 *   widen the range to cover it (slower to read, never a missed row).
 */
import { Transform, type Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import pg from "pg";
import { to as copyTo } from "pg-copy-streams";
import { ConfigError } from "../platform/errors.js";
import { CopyTextToJsonLines, JSON_COLUMNS } from "./json-lines.js";

/** A position in the feed: after `(txid, id)`. `0:0` is the start. */
export interface Cursor {
  txid: bigint;
  id: bigint;
}

export const FEED_START: Cursor = { txid: 0n, id: 0n };

const CURSOR = /^(\d{1,20}):(\d{1,19})$/;

/** Parses `"TXID:ID"`; a `ConfigError` naming the token when it is not one. */
export function parseCursor(text: string): Cursor {
  const match = CURSOR.exec(text.trim());
  if (!match) throw new ConfigError(`--since "${text}" is not a cursor: expected TXID:ID, e.g. 7741:120455`);
  const txid = BigInt(match[1] as string);
  const id = BigInt(match[2] as string);
  if (txid > 0xffff_ffff_ffff_ffffn || id > 0x7fff_ffff_ffff_ffffn) {
    throw new ConfigError(`--since "${text}" is out of range for a cursor`);
  }
  return { txid, id };
}

export function formatCursor(c: Cursor): string {
  return `${c.txid}:${c.id}`;
}

/** One change as `supplier-sync changes --json` prints it (one object per line). */
export interface Change {
  cursor: string;
  supplier: string;
  sku: string;
  kind: "listed" | "changed" | "delisted" | "relisted" | null;
  run_id: number;
  observed_at: string;
  price: string | null;
  currency: string | null;
  stock: number | null;
  attributes: Record<string, unknown> | null;
  content_hash: string;
}

export interface FeedQuery {
  since: Cursor;
  supplier?: string | undefined;
  limit: number;
}

/**
 * The feed's query, as documented for SQL consumers (docs/changes.md). `$1`/`$2`: the
 * cursor's txid and id, `$3`: a supplier or null, `$4`: the limit.
 *
 * Plan (EXPLAIN on 1,000,000 observations): an index scan of the transactions in `txid`
 * order, for each a bitmap scan of the BRIN on `id` with `txid` as a filter, an
 * incremental sort on `id` within each transaction, the limit. `offset 0` keeps the
 * subquery from being merged into a join: merged, the planner hashed the whole table and
 * sorted it all even for a limit of 1,000. An `order by id limit` inside it did the same
 * job with one more sort of every row (15-20 % more server CPU for 1M rows).
 */
export const FEED_SQL = `select o.txid, o.id, o.supplier, o.sku, o.kind, o.run_id, o.observed_at,
       o.price, o.currency, o.stock, o.attributes, o.content_hash
  from supplier_offer_feed_transactions t
 cross join lateral (
       select * from supplier_offer_observations o
        where o.txid = t.txid and o.id <= t.max_id
          and o.id > case when t.txid = $1::text::xid8 then greatest(t.min_id - 1, $2::bigint) else t.min_id - 1 end
          and ($3::text is null or o.supplier = $3)
        offset 0) o
 where t.txid >= $1::text::xid8
   and t.txid < pg_snapshot_xmin(pg_current_snapshot())
 order by t.txid, o.id
 limit $4`;

/**
 * The selected columns, in COPY's text format (tab-separated, `\N` for null, control
 * characters escaped). Text: the printed columns. `--json`: the columns the JSON object
 * is built from in Node ({@link CopyTextToJsonLines}); building it in SQL kept the
 * server's one core busy for longer than the COPY itself (bench/README.md, Change feed).
 */
function selectList(json: boolean): string {
  if (json) return JSON_COLUMNS;
  return "o.txid::text || ':' || o.id, o.kind, o.supplier, o.sku, o.price, o.currency, o.stock, o.observed_at";
}

/**
 * Transactions one look-up of `supplier_offer_feed_transactions` takes, and the ids a
 * chunk of consecutive transactions spans before the next chunk begins (a transaction
 * larger than that is a chunk of its own). {@link streamChanges} reads each chunk with
 * one `COPY`: one scan of the BRIN on `id` over the chunk's ids and one sort. Read one
 * transaction at a time, as {@link FEED_SQL} does, every transaction costs a scan of the
 * whole BRIN and whole 32-page ranges of heap: 1M observations written 50 a transaction
 * (a 1 % changed page) read at 0.08× a bare `COPY`, against ~0.5× in transactions of
 * 1,000 (bench/README.md, Change feed). The sort of a chunk stays within the reading
 * transaction's `work_mem` ({@link READ_WORK_MEM}).
 */
const CANDIDATES = 1000;
const CHUNK_IDS = 20_000n;
const READ_WORK_MEM = "set local work_mem = '64MB'";
/**
 * At most this much of a chunk's COPY output is held in memory before it is passed on (a
 * larger chunk, one large transaction, streams through). Reading 1M observations of
 * 1,000-row transactions as `--json`, holding a chunk while the next one is read took
 * the ratio to a bare COPY from 0.44-0.53 to 0.56-0.62 (bench/README.md, Change feed).
 */
const HELD_BYTES = 8 * 1024 * 1024;

interface TransactionRow {
  txid: string;
  min_id: string;
  max_id: string;
}

/** Consecutive finished transactions: their `txid` range and the ids to read, `(afterId, maxId]`. */
interface Chunk {
  first: string;
  last: string;
  afterId: bigint;
  maxId: bigint;
}

/**
 * The chunks after `since`, in `txid` order, looked up {@link CANDIDATES} transactions
 * at a time as the reader asks for more. Each look-up takes the transactions finished
 * for every snapshot (`txid < pg_snapshot_xmin(pg_current_snapshot())`) after the last
 * one it returned. A transaction whose rows were all rewritten later has none left to
 * read: it is passed over, never taken for the end of the feed.
 */
async function* chunksAfter(client: pg.ClientBase, since: Cursor): AsyncGenerator<Chunk> {
  let after: string | null = null;
  for (;;) {
    const { rows }: { rows: TransactionRow[] } = await client.query<TransactionRow>(
      // Ordered by the xid8 column itself (`t.txid`): a bare `txid` would name the text
      // output column, and '10000' sorts before '9999'.
      `select t.txid::text as txid, t.min_id::text as min_id, t.max_id::text as max_id
         from supplier_offer_feed_transactions t
        where ${after === null ? "t.txid >= $1::text::xid8" : "t.txid > $1::text::xid8"}
          and t.txid < pg_snapshot_xmin(pg_current_snapshot())
        order by t.txid
        limit $2`,
      [after ?? String(since.txid), CANDIDATES],
    );
    let chunk: Chunk | null = null;
    let span = 0n;
    for (const row of rows) {
      const minId = BigInt(row.min_id);
      const maxId = BigInt(row.max_id);
      let afterId = minId - 1n;
      if (row.txid === String(since.txid) && since.id > afterId) afterId = since.id;
      if (chunk !== null && span >= CHUNK_IDS) {
        yield chunk;
        chunk = null;
      }
      if (chunk === null) {
        chunk = { first: row.txid, last: row.txid, afterId, maxId };
        span = 0n;
      } else {
        chunk.last = row.txid;
        if (afterId < chunk.afterId) chunk.afterId = afterId;
        if (maxId > chunk.maxId) chunk.maxId = maxId;
      }
      span += maxId - minId + 1n;
    }
    if (chunk !== null) yield chunk;
    if (rows.length < CANDIDATES) return;
    after = (rows.at(-1) as TransactionRow).txid;
  }
}

/**
 * The `COPY` of one chunk's rows after `since`, in `(txid, id)` order, at most `limit`.
 * A row in the chunk's id and `txid` ranges belongs to one of the chunk's transactions
 * (every finished writing transaction between its first and last has its row, and so its
 * place, in the chunk), and every observation lies in its transaction's id range: each
 * row after the cursor is read once, in order. The values are inlined (`COPY` takes no
 * bind parameters): integers the database returned or the cursor's validated ones, and
 * the supplier quoted by the driver.
 */
function chunkCopy(client: pg.ClientBase, q: FeedQuery, c: Chunk, limit: number, json: boolean): string {
  const supplier =
    q.supplier === undefined ? "" : `\n     and o.supplier = ${client.escapeLiteral(q.supplier)}`;
  return `copy (select ${selectList(json)}
    from supplier_offer_observations o
   where o.id > ${c.afterId} and o.id <= ${c.maxId}
     and o.txid between '${c.first}'::xid8 and '${c.last}'::xid8
     and (o.txid > '${q.since.txid}'::xid8 or o.id > ${q.since.id})${supplier}
   order by o.txid, o.id
   limit ${limit}) to stdout`;
}

function positionCursor(text: string | null): Cursor | null {
  const match = /^(\d+):(\d+)/.exec(text ?? "");
  return match ? { txid: BigInt(match[1] as string), id: BigInt(match[2] as string) } : null;
}

/** Text form: counts lines and keeps the start of the last one (its cursor) while passing the bytes through untouched. */
class LastCursor extends Transform {
  private pending = "";
  private last = "";
  lines = 0;

  override _transform(
    chunk: Buffer,
    _enc: BufferEncoding,
    done: (err?: Error | null, data?: Buffer) => void,
  ) {
    // latin1: one char per byte, and a UTF-8 multibyte sequence never contains "\n".
    const text = chunk.toString("latin1");
    const end = text.lastIndexOf("\n");
    if (end < 0) {
      if (this.pending.length < 64) this.pending += text.slice(0, 64);
    } else {
      for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) this.lines++;
      const start = end > 0 ? text.lastIndexOf("\n", end - 1) : -1;
      this.last =
        start >= 0 ? text.slice(start + 1, Math.min(end, start + 65)) : this.pending + text.slice(0, end);
      this.pending = text.slice(end + 1, end + 65);
    }
    done(null, chunk);
  }

  cursor(): Cursor | null {
    return positionCursor(this.last);
  }
}

/**
 * Streams the changes after `q.since` to `out`, one line each (`--json`: one JSON object
 * per line; else tab-separated `cursor kind supplier sku price currency stock observed_at`
 * in COPY's text format), chunk by chunk ({@link chunksAfter}), each through one `COPY … TO
 * STDOUT` of at most what is left of the limit: at most {@link HELD_BYTES} of a chunk's
 * rows are held in memory (the JSON form turns each line into its object as it passes on),
 * whatever the limit. The same rows in the same order as
 * {@link FEED_SQL} (feed.pg.test.ts reads both, mixed, over random interleavings of
 * writers). Returns how many lines were written and the cursor to continue from
 * (`q.since` when none).
 */
export async function streamChanges(
  client: pg.ClientBase,
  q: FeedQuery,
  out: Writable,
  options: { json: boolean },
): Promise<{ count: number; cursor: Cursor }> {
  const tracker = options.json ? new CopyTextToJsonLines() : new LastCursor();
  let count = 0;
  // One read-only transaction: its settings fix how timestamps print, whatever the server's.
  await client.query("begin read only");
  try {
    await client.query("set local datestyle = 'ISO, YMD'");
    await client.query("set local timezone = 'UTC'");
    await client.query(NO_JIT);
    await client.query(READ_WORK_MEM);
    // The chunks' COPYs, one after the other, as one stream of lines (each COPY ends with a
    // whole line). A chunk's rows are read off the connection (up to HELD_BYTES) and passed
    // on only once the next chunk's COPY is sent: PostgreSQL scans and sorts a chunk before
    // its first row, and does so while this process converts and writes the previous one.
    const copies = async function* () {
      let held: Buffer[] = [];
      for await (const chunk of chunksAfter(client, q.since)) {
        const source = client.query(copyTo(chunkCopy(client, q, chunk, q.limit - count, options.json)));
        yield* held;
        held = [];
        let bytes = 0;
        for await (const data of source) {
          if (bytes > HELD_BYTES) {
            yield* held;
            held = [];
            yield data as Buffer;
          } else {
            held.push(data as Buffer);
            bytes += (data as Buffer).length;
          }
        }
        count += source.rowCount;
        // Stopped here, before the next chunk is asked for: no look-up past the limit.
        if (count >= q.limit) break;
      }
      yield* held;
    };
    await pipeline(copies, tracker, out, { end: false });
    await client.query("commit");
  } catch (err) {
    await client.query("rollback").catch(() => {});
    throw err;
  }
  const last = tracker instanceof LastCursor ? tracker.cursor() : positionCursor(tracker.lastPosition);
  return { count, cursor: last ?? q.since };
}

/**
 * The planner overestimates the per-transaction scans by orders of magnitude (a limit of
 * 1,000 costed 2.7M on 1M rows), over `jit_above_cost`: PostgreSQL 15 then spent ~1 s
 * compiling each feed query, whatever its size. For the reading transaction only.
 */
const NO_JIT = "set local jit = off";

/** The changes after `q.since` as rows (for tests and the in-process readers). */
export async function readChanges(db: pg.ClientBase | pg.Pool, q: FeedQuery): Promise<Change[]> {
  // One transaction, so that the setting holds for the query: on a client of the pool when given one.
  const client = db instanceof pg.Pool ? await db.connect() : db;
  try {
    await client.query("begin read only");
    await client.query(NO_JIT);
    const changes = await readRows(client, q);
    await client.query("commit");
    return changes;
  } catch (err) {
    await client.query("rollback").catch(() => {});
    throw err;
  } finally {
    if (db instanceof pg.Pool) (client as pg.PoolClient).release();
  }
}

async function readRows(db: pg.ClientBase, q: FeedQuery): Promise<Change[]> {
  const { rows } = await db.query<{
    txid: string;
    id: string;
    supplier: string;
    sku: string;
    kind: Change["kind"];
    run_id: string;
    observed_at: Date;
    price: string | null;
    currency: string | null;
    stock: number | null;
    attributes: Record<string, unknown> | null;
    content_hash: string;
  }>(FEED_SQL, [String(q.since.txid), String(q.since.id), q.supplier ?? null, q.limit]);
  return rows.map((r) => ({
    cursor: `${r.txid}:${r.id}`,
    supplier: r.supplier,
    sku: r.sku,
    kind: r.kind,
    run_id: Number(r.run_id),
    observed_at: r.observed_at.toISOString(),
    price: r.price,
    currency: r.currency,
    stock: r.stock,
    attributes: r.attributes,
    content_hash: r.content_hash,
  }));
}
