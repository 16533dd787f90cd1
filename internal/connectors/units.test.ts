// Pure pieces: normalisation, JSON scanning, pagination arithmetic, retry policy.
import fc from "fast-check";
import t from "tap";
import { connectorDefinitionSchema } from "../config/connector-schema.js";
import { ConfigError, IngestionError } from "../platform/errors.js";
import { readDotPath } from "./dot-path.js";
import { decodeJsonPage, scanJsonLimits } from "./json-body.js";
import { normalizeRecord } from "./normalize.js";
import { OriginPolicy } from "./origin.js";
import { firstPageUrl, nextLink, nextPageUrl } from "./pagination.js";
import { findConnectorModule } from "./registry.js";
import { backoffDelay, classifyNetworkError, classifyStatus, parseRetryAfter } from "./retry-policy.js";

const FIELDS = { sku: "sku", price: "price", currency: "cur", stock: "stock", name: "name" };

t.test("normalizeRecord accepts and converts", async (t) => {
  t.same(
    normalizeRecord({ sku: " A-1 ", price: "12.340", cur: "eur", stock: "7", name: "Bolt\u0007 M8" }, FIELDS),
    {
      offer: { sku: "A-1", price: "12.340", currency: "EUR", stock: 7, name: "Bolt M8" },
    },
  );
  t.same(normalizeRecord({ sku: 123456, price: 0.1 }, FIELDS), {
    offer: { sku: "123456", price: "0.1", currency: null, stock: null, name: null },
  });
  t.same(normalizeRecord({ sku: "x", price: 19 }, FIELDS), {
    offer: { sku: "x", price: "19", currency: null, stock: null, name: null },
  });
});

t.test("normalizeRecord rejects with a reason naming field and value", async (t) => {
  const cases: [unknown, RegExp][] = [
    [{ price: "1" }, /^sku \(sku\) is missing/],
    [{ sku: "", price: "1" }, /^sku \(sku\) is empty/],
    [{ sku: 1.5, price: "1" }, /^sku \(sku\) must be a string or an integer: 1\.5/],
    [{ sku: "a", price: "-1" }, /^price \(price\) is not a non-negative decimal.*"-1"/],
    [{ sku: "a", price: -1 }, /^price \(price\) is negative: -1/],
    [{ sku: "a", price: 1e21 }, /^price \(price\) is not a non-negative decimal.*1e\+21/],
    [{ sku: "a", price: 1.5e-7 }, /^price \(price\) is not a non-negative decimal/],
    [{ sku: "a", price: 12345678901234.56 }, /more than 15 significant digits/],
    [{ sku: "a", price: "1.1234567" }, /^price/],
    [{ sku: "a", price: "1,50" }, /^price.*"1,50"/],
    [{ sku: "a", price: "1", cur: "EURO" }, /^currency \(cur\) is not a 3-letter ISO 4217 code: "EURO"/],
    [{ sku: "a", price: "1", stock: -3 }, /^stock \(stock\) is negative: -3/],
    [{ sku: "a", price: "1", stock: 2.5 }, /^stock \(stock\) is not an integer: 2\.5/],
    [{ sku: "a", price: "1", name: "n".repeat(1_001) }, /^name \(name\) is longer than 1000 characters/],
    ["just a string", /^record is not an object/],
  ];
  for (const [raw, reason] of cases) {
    const result = normalizeRecord(raw, FIELDS);
    t.ok("reject" in result, JSON.stringify(raw).slice(0, 60));
    if ("reject" in result) {
      t.match(result.reject.reason, reason);
      t.equal(result.reject.raw, raw, "raw record kept");
    }
  }
});

t.test("readDotPath reads own properties only", async (t) => {
  t.equal(readDotPath({ a: { b: [1, { c: 2 }] } }, "a.b.1.c"), 2);
  t.same(readDotPath({ a: 1 }, ""), { a: 1 }, "the empty path is the value");
  t.equal(readDotPath({}, "constructor"), undefined);
  t.equal(readDotPath({ a: [1] }, "a.x"), undefined);
});

t.test("scanJsonLimits: depth and record count without recursion", async (t) => {
  const limits = { maxDepth: 64, maxRecords: 3, recordsPath: "data.items" };
  t.doesNotThrow(() => scanJsonLimits('{"data":{"items":[1,{"a":[1,2,3,4,5]},"x,y]"]}}', limits));
  t.throws(() => scanJsonLimits('{"data":{"items":[1,2,3,4]}}', limits), /more than maxRecordsPerPage \(3\)/);
  t.doesNotThrow(
    () => scanJsonLimits('{"other":[1,2,3,4],"data":{"items":[]}}', limits),
    "other arrays are free",
  );
  t.doesNotThrow(() => scanJsonLimits('{"d\\u0061ta":{"items":[1,2,3]}}', limits), "escaped keys decoded");
  t.throws(() => scanJsonLimits('{"d\\u0061ta":{"items":[1,2,3,4]}}', limits));
  t.throws(() => scanJsonLimits("[".repeat(100_000), limits), /maxJsonDepth \(64\)/);
  t.throws(() => scanJsonLimits("[1,2,3,4]", { ...limits, recordsPath: "" }), /the body root/);
});

t.test("scanJsonLimits counts exactly what JSON.parse finds, whatever the strings hold", async (t) => {
  // Strings full of quotes and backslashes: the scan must find where each one closes.
  const tricky = fc.string({ unit: fc.constantFrom('"', "\\", "a", "]", ",", "{", "\u00e9") });
  const record = fc.oneof(
    tricky,
    fc.integer(),
    fc.dictionary(tricky, tricky, { maxKeys: 3 }),
    fc.array(tricky, { maxLength: 3 }),
  );
  fc.assert(
    fc.property(
      tricky,
      fc.array(record, { maxLength: 12 }),
      fc.integer({ min: 0, max: 12 }),
      (key, items, max) => {
        const text = JSON.stringify({ [key]: items.slice(0, 1), data: { items } });
        const limits = { maxDepth: 64, maxRecords: max, recordsPath: "data.items" };
        const parsed = (JSON.parse(text) as { data: { items: unknown[] } }).data.items.length;
        if (parsed > max) t.throws(() => scanJsonLimits(text, limits), /maxRecordsPerPage/);
        else scanJsonLimits(text, limits);
      },
    ),
    { numRuns: 500 },
  );
});

t.test("decodeJsonPage", async (t) => {
  const limits = { maxDepth: 64, maxRecords: 10, recordsPath: "data.items" };
  t.same(
    decodeJsonPage(Buffer.from('\ufeff{"data":{"items":[1]}}'), "application/json; charset=utf-8", limits)
      .records,
    [1],
  );
  t.same(
    decodeJsonPage(Buffer.from('{"data":{"items":[]}}'), "application/vnd.api+json", limits).records,
    [],
  );
  t.throws(() => decodeJsonPage(Buffer.from("{}"), undefined, limits), /content type is missing/);
  t.throws(() => decodeJsonPage(Buffer.from("{"), "application/json", limits), /not valid JSON/);
  t.throws(() => decodeJsonPage(Buffer.from("{}"), "application/json", limits), /"data\.items" is missing/);
  t.throws(
    () => decodeJsonPage(Buffer.from('{"data":{"items":null}}'), "application/json", limits),
    /is null, not an array/,
  );
});

t.test("pagination arithmetic", async (t) => {
  const def = (pagination: unknown, extra: Record<string, unknown> = {}) =>
    connectorDefinitionSchema.parse({
      baseUrl: "https://api.example/acme/",
      request: { path: "/v1/offers", query: { lang: "en" } },
      pagination,
      fields: { sku: "s", price: "p" },
      ...extra,
    });
  const origins = new OriginPolicy("https://api.example/acme/");
  const page = def({ type: "page", param: "p", start: 0 });
  const first = firstPageUrl(page);
  t.equal(first.href, "https://api.example/acme/v1/offers?lang=en&p=0");
  const answered = (url: URL, recordCount: number, body: unknown = {}, link?: string) => ({
    url,
    headers: link ? { link } : {},
    body,
    recordCount,
  });
  t.equal(nextPageUrl(page, origins, answered(first, 5))?.searchParams.get("p"), "1");
  t.equal(nextPageUrl(page, origins, answered(first, 0)), null, "empty page ends");
  const offset = def({ type: "offset", limit: 10 });
  const o1 = firstPageUrl(offset);
  t.equal(o1.search, "?lang=en&offset=0&limit=10");
  t.equal(nextPageUrl(offset, origins, answered(o1, 10))?.searchParams.get("offset"), "10");
  t.equal(nextPageUrl(offset, origins, answered(o1, 9)), null, "short page ends");
  const cursor = def({ type: "cursor", cursorPath: "meta.next" });
  const c1 = firstPageUrl(cursor);
  t.equal(
    nextPageUrl(cursor, origins, answered(c1, 1, { meta: { next: "abc/../d" } }))?.searchParams.get("cursor"),
    "abc/../d",
  );
  for (const end of [null, "", undefined]) {
    t.equal(
      nextPageUrl(cursor, origins, answered(c1, 1, { meta: { next: end } })),
      null,
      `cursor ${end} ends`,
    );
  }
  t.throws(() => nextPageUrl(cursor, origins, answered(c1, 1, { meta: { next: { x: 1 } } })), /not a string/);
  const same = new URL(c1);
  same.searchParams.set("cursor", "k");
  t.throws(
    () => nextPageUrl(cursor, origins, answered(same, 1, { meta: { next: "k" } })),
    /does not advance/,
  );
  const link = def({ type: "link" });
  const l1 = firstPageUrl(link);
  t.equal(
    nextPageUrl(link, origins, answered(l1, 1, {}, '</acme/v1/offers?page=2>; rel="next"'))?.href,
    "https://api.example/acme/v1/offers?page=2",
  );
  t.equal(nextPageUrl(link, origins, answered(l1, 1, {}, '<https://api.example/x?p=1>; rel="prev"')), null);
  t.throws(
    () => nextPageUrl(link, origins, answered(l1, 1, {}, '<https://evil.example/x>; rel="next"')),
    IngestionError,
  );
});

t.test("nextLink parses RFC 8288", async (t) => {
  t.equal(
    nextLink('<https://a/x?page=1>; rel="prev", <https://a/x?page=3>; rel="next"'),
    "https://a/x?page=3",
  );
  t.equal(nextLink("<https://a/x>; rel=next"), "https://a/x");
  t.equal(nextLink('<https://a/y>; title="a"; rel="last next"'), "https://a/y");
  t.equal(nextLink(['<https://a/1>; rel="first"', '<https://a/2>; rel="next"']), "https://a/2");
  t.equal(nextLink('<https://a/1>; rel="nextish"'), undefined);
  t.equal(nextLink(undefined), undefined);
});

t.test("retry policy", async (t) => {
  const retry = { maxAttempts: 5, baseDelayMs: 500, maxDelayMs: 3_000, maxRetryAfterMs: 120_000 };
  t.same(
    [1, 2, 3, 4, 5].map((n) => backoffDelay(n, retry, () => 0.999_999)),
    [499, 999, 1_999, 2_999, 2_999],
    "exponential, capped",
  );
  t.equal(
    backoffDelay(3, retry, () => 0),
    0,
    "full jitter",
  );
  t.equal(parseRetryAfter("2", 0), 2_000);
  t.equal(parseRetryAfter(new Date(10_000).toUTCString(), 4_000), 6_000);
  t.equal(parseRetryAfter(new Date(1_000).toUTCString(), 4_000), 0, "a past date is no wait");
  t.equal(parseRetryAfter("soon", 0), undefined);
  for (const s of [408, 425, 429, 500, 502, 503, 504])
    t.ok(classifyStatus(s, undefined).retryable, `${s} transient`);
  for (const s of [400, 401, 403, 404, 409, 422, 501])
    t.notOk(classifyStatus(s, undefined).retryable, `${s} permanent`);
  t.equal(classifyStatus(401, undefined).code, "AUTH");
  t.equal(classifyStatus(403, undefined).code, "AUTH");
  t.equal(classifyStatus(429, 1_000).code, "RATE_LIMITED");
  t.equal(classifyStatus(429, 1_000).retryAfterMs, 1_000);
  t.equal(classifyStatus(418, undefined).code, "HTTP_418");
  const net = classifyNetworkError(Object.assign(new Error("boom"), { code: "UND_ERR_HEADERS_TIMEOUT" }));
  t.match(net, { code: "NETWORK", retryable: true, message: /timed out/ });
});

t.test("an unknown module is a ConfigError naming it", async (t) => {
  t.throws(() => findConnectorModule("nope"), ConfigError);
  t.throws(() => findConnectorModule("nope"), /"nope" is not a known connector module \(known: json-lines\)/);
});
