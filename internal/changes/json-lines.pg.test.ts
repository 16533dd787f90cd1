import { PassThrough, Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type pg from "pg";
import { to as copyTo } from "pg-copy-streams";
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { until } from "../../test/helpers/fixtures.js";
import { FEED_START, formatCursor, streamChanges } from "./feed.js";
import { CopyTextToJsonLines, JSON_COLUMNS } from "./json-lines.js";

/**
 * The reference: `changes --json` as it was built in SQL until 2026-12-05, one `concat`
 * per row, run under the settings streamChanges sets. The Node builder must print the
 * same bytes.
 */
const SQL_BUILT = `select concat('{"cursor":"', o.txid, ':', o.id, '","supplier":"', o.supplier, '","sku":', to_json(o.sku),
       ',"kind":', coalesce('"' || o.kind || '"', 'null'), ',"run_id":', o.run_id,
       ',"observed_at":"', replace((o.observed_at at time zone 'UTC')::text, ' ', 'T'), 'Z","price":',
       coalesce('"' || o.price::text || '"', 'null'), ',"currency":', coalesce(to_json(o.currency)::text, 'null'),
       ',"stock":', coalesce(o.stock::text, 'null'), ',"attributes":', coalesce(o.attributes::text, 'null'),
       ',"content_hash":', to_json(o.content_hash), '}') as line
  from supplier_offer_observations o
 where o.txid < pg_snapshot_xmin(pg_current_snapshot())
 order by o.txid, o.id`;

/** Rows with every awkward value a column can hold: (sku, price, currency, stock, attributes, observed_at, kind, content_hash). */
const AWKWARD = `insert into supplier_offer_observations
    (supplier, sku, run_id, price, currency, stock, attributes, observed_at, kind, content_hash, txid)
  values
    ('etm', 'A-100', 812, 12.50, 'EUR', 4, null, '2026-12-05 07:31:02.118+00', 'changed', 'h1', pg_current_xact_id()),
    ('etm', E'q"b\\\\s\\tt\\nn\\rr', 9007199254740993, null, null, null, null, '2026-12-05 07:31:02+00', null, E'h"\\\\', pg_current_xact_id()),
    ('etm', E'c\\x01\\x08\\x0b\\x0c\\x1f\\x7fz', 1, 123456789012345678901234567890.123456789000, E'a"\\\\', 0,
       '{"a": {"b": [1, 2.50, "x\\"y\\\\z\\n\\t\\u0001"], "c": null}, "é": "😀", "k\\tey": ""}',
       '2026-12-05 07:31:02.123456+05:30', 'listed', 'h3', pg_current_xact_id()),
    ('iek-2', E'é 中文 😀 \\u2028 \\u00a0', 2, 'NaN', E'é\\t', -5, '{}', 'infinity', 'delisted', 'h4', pg_current_xact_id()),
    ('iek-2', E'\\\\N', 3, -0.50, 'ab', 2147483647, 'null', '-infinity', 'relisted', '', pg_current_xact_id()),
    ('iek-2', 'N', 4, 0, null, null, '"plain \\" string"', '0044-03-15 12:00:00 BC', 'listed', 'h6', pg_current_xact_id()),
    ('iek-2', 'é中😀\u2028', 6, 1.5, '€éx', 7, '{"é": "😀 ü", "n": [1, {"m": null}]}', '2026-12-05 00:00:00+00', 'changed', 'é😀', pg_current_xact_id()),
    ('iek-2', '', 5, 1e-20, 'x', 1, '[1, 2.0, 1e3, "\\\\N"]', '2026-01-01 00:00:00.000001+00', 'changed', 'h7', pg_current_xact_id())`;

async function sqlBuilt(client: pg.ClientBase): Promise<string> {
  await client.query("begin read only");
  try {
    await client.query("set local datestyle = 'ISO, YMD'");
    await client.query("set local timezone = 'UTC'");
    const { rows } = await client.query<{ line: string }>(SQL_BUILT);
    return rows.map((r) => `${r.line}\n`).join("");
  } finally {
    await client.query("commit");
  }
}

async function collect(
  source: NodeJS.ReadableStream | Readable,
  through?: CopyTextToJsonLines,
): Promise<Buffer> {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on("data", (c: Buffer) => chunks.push(c));
  await (through ? pipeline(source, through, out) : pipeline(source, out));
  return Buffer.concat(chunks);
}

t.test("--json prints the bytes the SQL builder printed, for awkward values", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 2);
  const client = await pool.connect();
  t.teardown(() => client.release());
  await client.query(AWKWARD);
  // The feed lags the oldest transaction on the server (other test files' too).
  const expected = await until(
    async () => {
      const text = await sqlBuilt(client);
      return text.split("\n").length === 9 ? text : null;
    },
    30_000,
    "the rows in the feed",
  );
  for (const line of expected.trimEnd().split("\n")) JSON.parse(line);
  t.match(expected, '"sku":"é中😀\u2028",', "a row without escapes (the byte-copy path) is in the set");

  const out = new PassThrough();
  const streamed = collect(out);
  const result = await streamChanges(client, { since: FEED_START, limit: 100 }, out, { json: true });
  out.end();
  t.equal((await streamed).toString("utf8"), expected, "byte for byte");
  t.equal(result.count, 8);
  t.equal(formatCursor(result.cursor), JSON.parse(expected.trimEnd().split("\n").at(-1) as string).cursor);

  // The same COPY text fed in pieces of every small size: lines and UTF-8 sequences cut anywhere.
  await client.query("begin read only");
  await client.query("set local datestyle = 'ISO, YMD'");
  await client.query("set local timezone = 'UTC'");
  const raw = await collect(
    client.query(
      copyTo(
        `copy (select ${JSON_COLUMNS} from supplier_offer_observations o order by o.txid, o.id) to stdout`,
      ),
    ),
  );
  await client.query("commit");
  for (const size of [1, 2, 3, 4, 13]) {
    const pieces: Buffer[] = [];
    for (let i = 0; i < raw.length; i += size) pieces.push(raw.subarray(i, i + size));
    const converted = await collect(Readable.from(pieces), new CopyTextToJsonLines());
    t.equal(converted.toString("utf8"), expected, `in pieces of ${size} bytes`);
  }
});

t.test("--json with nothing new: no output, the cursor given", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 1);
  const client = await pool.connect();
  t.teardown(() => client.release());
  const out = new PassThrough();
  const streamed = collect(out);
  const since = { txid: 1n << 40n, id: 5n };
  const result = await streamChanges(client, { since, limit: 10 }, out, { json: true });
  out.end();
  t.equal((await streamed).length, 0);
  t.same(result, { count: 0, cursor: since });
});
