import { gunzipSync } from "node:zlib";
import iconv from "iconv-lite";
import t from "tap";
import { request } from "undici";
import { startSimulator } from "./server.js";

/** The simulator's feed routes as raw HTTP: what a feed reader receives, byte for byte. */

t.test("feeds: bytes, headers, auth and bad options", async (t) => {
  const sim = await startSimulator({
    suppliers: { plain: { size: 3 }, locked: { size: 3, auth: { type: "bearer", token: "s3cret" } } },
  });
  t.teardown(() => sim.close());
  const get = async (path: string, headers: Record<string, string> = {}) => {
    const res = await request(`${sim.url}${path}`, { headers });
    return { status: res.statusCode, headers: res.headers, body: Buffer.from(await res.body.arrayBuffer()) };
  };

  const gz = await get("/plain/feed.yml?compress=gzip&encoding=windows-1251");
  t.equal(gz.status, 200);
  t.equal(gz.headers["content-type"], "application/gzip");
  t.equal(gz.headers["content-encoding"], undefined);
  const text = iconv.decode(gunzipSync(gz.body), "windows-1251");
  t.match(
    text,
    /^<\?xml version="1.0" encoding="windows-1251"\?>\n<!DOCTYPE yml_catalog SYSTEM "shops.dtd">/,
  );
  t.match(
    text,
    /<offer id="PLAIN-0000000" available="(true|false)"><price>\d+\.\d\d<\/price><currencyId>EUR<\/currencyId><name>Plain offer 0 \(товар\)<\/name><\/offer>/,
  );
  t.equal(text.match(/<offer /g)?.length, 3);

  const csv = await get("/plain/feed.csv?malformed=1");
  t.equal(csv.headers["content-type"], "text/csv; charset=utf-8");
  const lines = csv.body.toString().trimEnd().split("\n");
  t.equal(lines[0], "sku;name;price;currency;stock");
  t.match(lines[2], /^PLAIN-0000001;Plain offer 1 \(товар\) 12" screen;.*;extra$/);

  const cml = await get("/plain/offers.xml");
  t.match(
    cml.body.toString(),
    /<Предложение><Ид>PLAIN-0000000<\/Ид>.*<ЦенаЗаЕдиницу>\d+\.\d\d<\/ЦенаЗаЕдиницу>.*<Количество>\d+<\/Количество><\/Предложение>/,
  );

  const br = await get("/plain/feed.jsonl?compress=content-br");
  t.equal(br.headers["content-encoding"], "br");

  t.equal((await get("/locked/feed.yml")).status, 401);
  t.equal((await get("/locked/feed.yml", { authorization: "Bearer s3cret" })).status, 200);
  const bad = await get("/plain/feed.yml?encoding=cp866");
  t.equal(bad.status, 400);
  t.match(JSON.parse(bad.body.toString()), { error: /encoding must be one of/ });
  t.equal((await get("/plain/feed.yml?truncate=x")).status, 400);
  t.equal((await get("/plain/feed.xlsx")).status, 404);
  t.equal(sim.stats("plain").walksCompleted, 4);
  t.equal(sim.stats("locked").walksCompleted, 1);
});
