import t from "tap";
import { fetchFeed } from "../feeds/test-support.js";
import { IngestionError } from "../platform/errors.js";
import { isLosslessNumber } from "../platform/exact-json.js";
import { startSimulator } from "../simulator/server.js";
import type { Simulator } from "../simulator/types.js";
import { normalizeRecords } from "./records/normalize.js";

/** Every feed format end to end: the simulator's files over real loopback HTTP, through readFeed. */

const SIZE = 12_345;
/** The back-pressure test's catalog: its feed (~7 MB) is large against the stages' buffers on every Node.js line. */
const BIG = 4 * SIZE;
let sim: Simulator;

t.before(async () => {
  sim = await startSimulator({
    suppliers: { acme: { size: SIZE }, small: { size: 40 }, big: { size: BIG } },
  });
});
t.teardown(() => sim.close());

const url = (file: string, query = "", supplier = "acme") =>
  `${sim.baseUrl(supplier)}/${file}${query ? `?${query}` : ""}`;
const YML = { type: "xml", element: "offer" } as const;
const YML_FIELDS = { sku: "@id", price: "price", currency: "currencyId", name: "name" };

t.test(
  "YML, gzip file, windows-1251: every offer, in steps of pageSize, mapped by the YML fields",
  async (t) => {
    const read = await fetchFeed(url("feed.yml", "compress=gzip&encoding=windows-1251"), YML);
    t.equal(read.error, undefined);
    t.equal(read.headers["content-type"], "application/gzip");
    t.same(
      read.batches.map((b) => b.records.length),
      [5000, 5000, 2345],
    );
    t.equal(read.rejects.length, 0);
    const served = sim.offers("acme");
    const { offers, rejects } = normalizeRecords(read.records, YML_FIELDS);
    t.equal(rejects.length, 0);
    t.equal(offers.length, SIZE);
    t.same(offers[0], {
      sku: served[0]!.article,
      price: served[0]!.price.value,
      currency: "EUR",
      stock: null,
      name: `${served[0]!.title} (товар)`,
    });
    t.equal(offers[SIZE - 1]!.sku, served[SIZE - 1]!.article);
    t.match(read.records[0], { "@available": /^(true|false)$/ });
  },
);

t.test("encoding auto: XML declaration (koi8-r), charset parameter, UTF-16 BOM", async (t) => {
  const koi = await fetchFeed(url("feed.yml", "encoding=koi8-r", "small"), YML, { contentType: undefined });
  t.equal(koi.error, undefined);
  t.match(koi.records[0], { name: /\(товар\)$/ });
  const csv = { type: "csv", delimiter: ";" } as const;
  const charset = await fetchFeed(url("feed.csv", "encoding=windows-1251", "small"), csv);
  t.equal(charset.headers["content-type"], "text/csv; charset=windows-1251");
  t.match(charset.records[0], { name: /\(товар\)$/ });
  const utf16 = await fetchFeed(url("feed.csv", "encoding=utf-16le&declare=none", "small"), csv);
  t.equal(utf16.records.length, 40);
  t.match(utf16.records[39], { sku: "SMALL-0000039", name: /\(товар\)$/ });
});

t.test("a wrong encoding gives readable rejects, not a crash", async (t) => {
  const read = await fetchFeed(url("feed.yml", "encoding=windows-1251&declare=utf-8", "small"), YML);
  t.equal(read.error, undefined);
  t.equal(read.records.length, 0);
  t.equal(read.rejects.length, 40);
  t.match(
    read.rejects[0]!.reason,
    /^<offer> at line \d+ holds bytes that are not valid utf-8 .*format\.encoding/,
  );
  const csv = await fetchFeed(url("feed.csv", "encoding=koi8-r&declare=none", "small"), {
    type: "csv",
    delimiter: ";",
    encoding: "utf-8",
  });
  t.equal(csv.rejects.length, 40);
  t.match(csv.rejects[0], { reason: /^line 2 holds bytes that are not valid utf-8/, raw: /^SMALL-0000000;/ });
});

t.test("CommerceML offers.xml in a zip: entry by glob; two files without zipEntry is CONTRACT", async (t) => {
  const format = { type: "xml", element: "Предложение", zipEntry: "*.xml", pageSize: 10_000 } as const;
  const read = await fetchFeed(url("offers.xml", "compress=zip&zipExtra=1&encoding=windows-1251"), format);
  t.equal(read.error, undefined);
  t.same(
    read.batches.map((b) => b.records.length),
    [10_000, 2345],
  );
  const { offers, rejects } = normalizeRecords(read.records, {
    sku: "Ид",
    price: "Цены.Цена.ЦенаЗаЕдиницу",
    currency: "Цены.Цена.Валюта",
    stock: "Количество",
  });
  t.equal(rejects.length, 0);
  const first = sim.offers("acme")[0]!;
  t.match(offers[0], {
    sku: first.article,
    price: first.price.value,
    currency: "EUR",
    stock: first.stock.total,
  });

  const ambiguous = await fetchFeed(url("offers.xml", "compress=zip&zipExtra=1"), {
    type: "xml",
    element: "Предложение",
  });
  t.ok(ambiguous.error instanceof IngestionError);
  t.equal(ambiguous.error?.code, "CONTRACT");
  t.match(ambiguous.error?.message, /holds 2 files .*set format\.zipEntry/);
  const missing = await fetchFeed(url("offers.xml", "compress=zip"), { ...format, zipEntry: "prices.xml" });
  t.match(missing.error, {
    code: "CONTRACT",
    message: /no entry .* matches format\.zipEntry "prices\.xml"; it holds "offers\.xml"/,
  });
});

t.test(
  "CSV, Content-Encoding gzip, windows-1251: a malformed row is one reject and the rest goes on",
  async (t) => {
    const read = await fetchFeed(url("feed.csv", "compress=content-gzip&encoding=windows-1251&malformed=7"), {
      type: "csv",
      delimiter: ";",
    });
    t.equal(read.headers["content-encoding"], "gzip");
    t.equal(read.error, undefined);
    t.equal(read.records.length, SIZE - 1);
    t.equal(read.rejects.length, 1);
    t.match(read.rejects[0], { reason: /^line 9: Invalid Opening Quote/, raw: /^ACME-0000007;.*extra/ });
    t.same(
      read.batches.map((b) => b.records.length + b.rejects.length),
      [5000, 5000, 2345],
    );
    const { offers } = normalizeRecords(read.records, {
      sku: "sku",
      price: "price",
      currency: "currency",
      stock: "stock",
    });
    t.equal(offers.length, SIZE - 1);
  },
);

t.test("CSV without a header, skipLines: records keyed by column number", async (t) => {
  const read = await fetchFeed(url("feed.csv", "", "small"), {
    type: "csv",
    delimiter: ";",
    header: false,
    skipLines: 1,
  });
  t.equal(read.records.length, 40);
  t.match(read.records[0], { "0": "SMALL-0000000", "3": "EUR" });
});

t.test("JSON lines, brotli: number-exact prices; a cut line is one reject", async (t) => {
  sim.mutate("small", { reset: true, setPrices: { "SMALL-0000002": "4821.1234567890123457" } });
  t.teardown(() => sim.mutate("small", { reset: true }));
  const read = await fetchFeed(url("feed.jsonl", "compress=content-br&price=number&malformed=5", "small"), {
    type: "jsonl",
    pageSize: 16,
  });
  t.equal(read.error, undefined);
  t.same(
    read.batches.map((b) => b.records.length + b.rejects.length),
    [16, 16, 8],
  );
  t.equal(read.records.length, 39);
  t.equal(read.rejects.length, 1);
  t.match(read.rejects[0]!.reason, /^line 6 is not valid JSON/);
  const exact = (read.records[2] as { price: unknown }).price;
  t.ok(isLosslessNumber(exact));
  t.equal(String(exact), "4821.1234567890123457");
  t.equal(typeof (read.records[0] as { price: unknown }).price, "number");
  const { offers } = normalizeRecords(read.records, { sku: "sku", price: "price" });
  t.equal(offers[2]!.price, "4821.1234567890123457");
});

t.test('streamed JSON ("stream": true), deflate: the array at records.path, number-exact', async (t) => {
  sim.mutate("small", { reset: true, setPrices: { "SMALL-0000003": "12345678901234567890.25" } });
  t.teardown(() => sim.mutate("small", { reset: true }));
  const read = await fetchFeed(
    url("feed.json", "compress=content-deflate&price=number", "small"),
    { type: "json", stream: true, pageSize: 25 },
    { recordsPath: "data.items" },
  );
  t.equal(read.error, undefined);
  t.same(
    read.batches.map((b) => b.records.length),
    [25, 15],
  );
  t.equal(String((read.records[3] as { price: unknown }).price), "12345678901234567890.25");
  t.match(read.records[39], { sku: "SMALL-0000039", stock: Number });
  const whole = await fetchFeed(
    url("feed.json", "compress=zip", "small"),
    { type: "json" },
    { recordsPath: "data.items" },
  );
  t.equal(whole.records.length, 40);
  const wrong = await fetchFeed(
    url("feed.json", "", "small"),
    { type: "json", stream: true },
    { recordsPath: "data.nope" },
  );
  t.match(wrong.error, { code: "CONTRACT", message: 'records.path "data.nope" is missing from the feed' });
});

t.test("a decompression bomb is CONTRACT, quickly, before anything is parsed", async (t) => {
  const read = await fetchFeed(url("feed.yml", `bomb=${2 * 1024 ** 3}`), YML);
  t.match(read.error, { code: "CONTRACT", message: /decompresses more than 100:1 .*decompression bomb/ });
  t.equal(read.records.length, 0);
  t.ok(read.ms < 10_000, `refused in ${Math.round(read.ms)} ms`);
  const zipped = await fetchFeed(url("feed.yml", `bomb=${256 * 1024 ** 2}&compress=zip`), YML);
  t.match(zipped.error, { code: "CONTRACT", message: /100:1/ });
});

t.test("maxResponseBytes bounds the decompressed stream", async (t) => {
  const read = await fetchFeed(url("feed.yml", "compress=gzip"), YML, { maxBytes: 200_000 });
  t.match(read.error, {
    code: "CONTRACT",
    message: /larger than maxResponseBytes \(200000 bytes\) once decompressed/,
  });
});

t.test("a truncated gzip: the complete steps first, then CONTRACT", async (t) => {
  const read = await fetchFeed(url("feed.yml", "compress=gzip&truncate=60000"), YML);
  t.ok(read.batches.length >= 1, `${read.batches.length} steps before the failure`);
  t.ok(read.batches.every((b) => b.records.length === 5000));
  t.match(read.error, { code: "CONTRACT", message: /truncated/ });
  const plain = await fetchFeed(url("feed.yml", "truncate=100000"), YML);
  t.match(plain.error, { code: "CONTRACT", message: /XML feed is not well-formed: .*truncated/ });
});

t.test("a transfer broken off mid-body is NETWORK (retryable)", async (t) => {
  const read = await fetchFeed(url("feed.csv", "compress=gzip&cut=60000"), { type: "csv", delimiter: ";" });
  t.match(read.error, { code: "NETWORK", retryable: true, message: /feed body broke off after \d+ bytes/ });
});

t.test("entity attacks: DTD entities are never expanded; the offer using one is a reject", async (t) => {
  for (const attack of ["billion-laughs", "xxe"]) {
    const read = await fetchFeed(url("feed.yml", `attack=${attack}`, "small"), YML);
    t.equal(read.error, undefined, attack);
    t.equal(read.records.length, 39, attack);
    t.equal(read.rejects.length, 1, attack);
    t.match(read.rejects[0]!.reason, /undefined entity .*never expanded/, attack);
    const raw = read.rejects[0]!.raw as { name: string };
    t.ok(raw.name === "&lol9;" || raw.name === "&xxe;", `left as written: ${raw.name}`);
    t.notMatch(JSON.stringify(read.records), /lollol|root:/, attack);
  }
  const sloppy = await fetchFeed(url("feed.yml", "malformed=3", "small"), YML);
  t.equal(sloppy.rejects.length, 1);
  t.match(sloppy.rejects[0]!.raw, { "@id": "SMALL-0000003" });
});

t.test(
  "ETag and Last-Modified; If-None-Match / If-Modified-Since answer 304 until the catalog changes",
  async (t) => {
    const first = await fetchFeed(url("feed.yml", "compress=gzip", "small"), YML);
    const etag = first.headers.etag as string;
    const lastModified = first.headers["last-modified"] as string;
    t.match(etag, /^"[0-9a-f]+-[0-9a-f]+"$/);
    t.ok(lastModified);
    const byTag = await fetchFeed(url("feed.yml", "compress=gzip", "small"), YML, {
      headers: { "if-none-match": etag },
    });
    t.equal(byTag.status, 304);
    const byDate = await fetchFeed(url("feed.yml", "compress=gzip", "small"), YML, {
      headers: { "if-modified-since": lastModified },
    });
    t.equal(byDate.status, 304);
    sim.mutate("small", { changePrices: 1 });
    t.teardown(() => sim.mutate("small", { reset: true }));
    const changed = await fetchFeed(url("feed.yml", "compress=gzip", "small"), YML, {
      headers: { "if-none-match": etag },
    });
    t.equal(changed.status, 200);
    t.not(changed.headers.etag, etag);
    t.equal(changed.records.length, 40);
  },
);

t.test("a consumer that stops early: the socket is released and a zip's temp file removed", async (t) => {
  const { mkdtemp, readdir, rm } = await import("node:fs/promises");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const { Agent, request } = await import("undici");
  const { formatSchema } = await import("../feeds/format-schema.js");
  const { readFeed } = await import("../feeds/read-feed.js");
  // A spool folder of this test's own: os.tmpdir() is shared with every other test
  // process (CI runs two suites at once), whose zip spools come and go meanwhile.
  const spoolDir = await mkdtemp(join(tmpdir(), "read-feed-spools-"));
  t.teardown(() => rm(spoolDir, { recursive: true, force: true }));
  const spools = async () =>
    (await readdir(spoolDir)).filter((n) => n.startsWith("supplier-sync-feed-")).length;
  const before = await spools();
  t.equal(before, 0);
  const agent = new Agent();
  t.teardown(() => agent.destroy());
  const res = await request(url("offers.xml", "compress=zip"), { dispatcher: agent });
  const format = formatSchema.parse({ type: "xml", element: "Предложение", pageSize: 100 });
  let batches = 0;
  for await (const batch of readFeed(res.body, { format, maxBytes: 1e9, spoolDir })) {
    batches++;
    t.equal(batch.records.length, 100);
    t.equal(await spools(), before + 1, "spooled while read");
    break;
  }
  t.equal(batches, 1);
  t.equal(await spools(), before, "temp file removed");
  const aborted = new AbortController();
  const res2 = await request(url("feed.csv"), { dispatcher: agent });
  const reading = readFeed(res2.body, {
    format: formatSchema.parse({ type: "csv", delimiter: ";", pageSize: 10 }),
    maxBytes: 1e9,
    signal: aborted.signal,
  });
  await reading.next();
  aborted.abort(new Error("run deadline"));
  await t.rejects(reading.next(), { message: "run deadline" });
});

t.test("back-pressure: a consumer that pauses holds the download, not the file", async (t) => {
  const { Agent, request } = await import("undici");
  const { formatSchema } = await import("../feeds/format-schema.js");
  const { readFeed } = await import("../feeds/read-feed.js");
  const agent = new Agent();
  t.teardown(() => agent.destroy());
  const res = await request(url("feed.yml", "", "big"), { dispatcher: agent });
  const stats = {
    rawBytes: 0,
    decompressedBytes: 0,
    encoding: undefined,
    compression: "none" as const,
    zipEntry: undefined,
  };
  // The bytes taken from the body as they are taken (stats.rawBytes is updated only between steps).
  let taken = 0;
  const body = res.body;
  const counted = (async function* () {
    for await (const chunk of body) {
      taken += (chunk as Buffer).length;
      yield chunk as Buffer;
    }
  })();
  const reading = readFeed(
    counted,
    { format: formatSchema.parse({ ...YML, pageSize: 100 }), maxBytes: 1e9 },
    stats,
  );
  const first = await reading.next();
  t.equal(first.done, false);
  // The pause has reached the socket: no stage takes more, so the body's own buffer fills
  // up (a reader that went on reading would drain the body to its end instead).
  const deadline = Date.now() + 10_000;
  while (body.readableLength < body.readableHighWaterMark && !body.readableEnded) {
    if (Date.now() > deadline) throw new Error("timed out waiting for the body's buffer to fill or end");
    await new Promise((r) => setTimeout(r, 5));
  }
  // While the consumer sits on its first step, only the stages' buffers (tens of kB
  // each) have been read from the socket, a small part of the ~7 MB file.
  const paused = taken;
  t.ok(paused < 400_000, `${paused} bytes read while paused`);
  t.notOk(body.readableEnded, "the body is held, not read to its end");
  let records = first.value ? first.value.records.length : 0;
  for (;;) {
    const next = await reading.next();
    if (next.done) break;
    records += next.value.records.length;
  }
  t.equal(records, BIG);
  t.ok(stats.rawBytes > 6_000_000 && stats.rawBytes > 10 * paused, `${stats.rawBytes} bytes read in all`);
  t.equal(stats.encoding, "utf-8");
});

t.test("abort while the body stalls, and a feed refused before parsing, release the socket", async (t) => {
  const { Agent, request } = await import("undici");
  const { formatSchema } = await import("../feeds/format-schema.js");
  const { readFeed } = await import("../feeds/read-feed.js");
  const agent = new Agent();
  t.teardown(() => agent.destroy());
  const res = await request(url("feed.yml", "declare=x-klingon", "small"), { dispatcher: agent });
  const refused = readFeed(res.body, { format: formatSchema.parse(YML), maxBytes: 1e9 });
  await t.rejects(refused.next(), {
    code: "CONTRACT",
    message: /encoding "x-klingon", which is not supported/,
  });
  t.equal(res.body.destroyed, true, "body destroyed once the read failed");

  // Aborted while the first step is still being read.
  const slow = await request(url("feed.csv"), { dispatcher: agent });
  const controller = new AbortController();
  const reading = readFeed(slow.body, {
    format: formatSchema.parse({ type: "csv", delimiter: ";", pageSize: 100_000 }),
    maxBytes: 1e9,
    signal: controller.signal,
  });
  const pending = reading.next();
  controller.abort(new Error("deadline"));
  await t.rejects(pending, { message: "deadline" });
  t.equal(slow.body.destroyed, true);
});
