// Pure pieces: normalisation, JSON scanning, pagination arithmetic, retry policy.
import fc from "fast-check";
import t from "tap";
import { readDotPath } from "../../platform/dot-path.js";
import { ConfigError, IngestionError } from "../../platform/errors.js";
import { LosslessNumber } from "../../platform/exact-json.js";
import { decodeJsonPage, scanJsonLimits } from "../../platform/json-body.js";
import { findConnectorModule } from "../modules/registry.js";
import { normalizeRecord } from "../records/normalize.js";
import { OriginPolicy } from "../transport/origin.js";
import {
  backoffDelay,
  classifyNetworkError,
  classifyStatus,
  parseRetryAfter,
} from "../transport/retry-policy.js";
import { firstPageUrl, nextLink, nextPageUrl } from "../walk/pagination.js";
import { connectorDefinitionSchema } from "./connector-schema.js";

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

t.test("normalizeRecord: currency codes and control characters in names", async (t) => {
  const currencyOf = (cur: unknown) => {
    const result = normalizeRecord({ sku: "a", price: "1", cur }, FIELDS);
    return "offer" in result ? result.offer.currency : result.reject.reason;
  };
  t.equal(currencyOf("RUB"), "RUB");
  t.equal(currencyOf(" rub "), "RUB", "trimmed and upper-cased");
  t.equal(currencyOf("Eur"), "EUR");
  for (const bad of ["RU", "RUBL", "R1B", "\u00c4BC", "", 643]) {
    t.match(currencyOf(bad), /^currency \(cur\) is not a 3-letter ISO 4217 code/, JSON.stringify(bad));
  }
  const nameOf = (name: string) => {
    const result = normalizeRecord({ sku: "a", price: "1", name }, FIELDS);
    return "offer" in result ? result.offer.name : result.reject.reason;
  };
  t.equal(nameOf("Bolt M8"), "Bolt M8");
  t.equal(
    nameOf("a\tb\nc\rd\u0000e\u007ff\u0085g\u009fh\u00a0i"),
    "a\tb\ncdefgh\u00a0i",
    "tab and newline kept",
  );
  t.equal(nameOf("\u001b[31m"), "[31m");
});

t.test("normalizeRecord keeps every digit of a price", async (t) => {
  const priceOf = (price: unknown) => {
    const result = normalizeRecord({ sku: "a", price }, FIELDS);
    return "offer" in result ? result.offer.price : result.reject.reason;
  };
  // Strings are kept as sent (trimmed): numeric stores them digit for digit.
  for (const text of [
    "0.000345",
    "68674.6235934470499303",
    "12345678901234567890.12345678901234567890",
    "1.5e3",
    "2E-7",
    "1.50",
    "+7",
    "007.25",
    `1.${"0".repeat(97)}1`,
    "1e131071",
    "1e-16383",
  ]) {
    t.equal(priceOf(text), text, text.slice(0, 40));
  }
  t.equal(priceOf(" 7.50 "), "7.50", "trimmed");
  t.equal(priceOf("-0.00"), "0", "negative zero is zero");
  // Literals a double cannot hold arrive as LosslessNumber (the page scan decides), kept as text.
  t.equal(priceOf(new LosslessNumber("4821.1234567890123457")), "4821.1234567890123457");
  t.equal(priceOf(new LosslessNumber("123456789012345678901234567890")), "123456789012345678901234567890");
  t.equal(priceOf(new LosslessNumber("1e400")), "1e400");
  // Doubles reach normalisation only when they hold the literal's exact value.
  t.equal(priceOf(1500), "1500", "1.5e3 parsed as a double");
  t.equal(priceOf(2e-7), "2e-7");
  t.equal(priceOf(1e21), "1e+21");
  t.equal(priceOf(12345678901234.56), "12345678901234.56");
  t.equal(priceOf(-0), "0");
  t.equal(priceOf(new LosslessNumber("1e-400")), "1e-400");
});

t.test("normalizeRecord: SKUs and stock as number literals a double cannot hold", async (t) => {
  t.same(normalizeRecord({ sku: new LosslessNumber("12345678901234567890"), price: "1" }, FIELDS), {
    offer: { sku: "12345678901234567890", price: "1", currency: null, stock: null, name: null },
  });
  const stock = (value: unknown) => {
    const result = normalizeRecord({ sku: "a", price: "1", stock: value }, FIELDS);
    return "offer" in result ? result.offer.stock : result.reject.reason;
  };
  t.match(
    stock(new LosslessNumber("12345678901234567890")),
    /^stock \(stock\) does not fit a 32-bit integer: 12345678901234567890$/,
  );
  t.match(
    stock(new LosslessNumber("7.0000000000000000001")),
    /^stock \(stock\) is not an integer: 7\.0000000000000000001$/,
  );
  t.match(stock(1e20), /does not fit a 32-bit integer/);
  t.match(normalizeRecord({ sku: new LosslessNumber("1.00000000000000000001"), price: "1" }, FIELDS), {
    reject: { reason: /^sku \(sku\) must be a string or an integer: 1\.00000000000000000001$/ },
  });
});

t.test("normalizeRecord rejects with a reason naming field and value", async (t) => {
  const cases: [unknown, RegExp][] = [
    [{ price: "1" }, /^sku \(sku\) is missing/],
    [{ sku: "", price: "1" }, /^sku \(sku\) is empty/],
    [{ sku: 1.5, price: "1" }, /^sku \(sku\) must be a string or an integer: 1\.5/],
    [{ sku: "a", price: "-1" }, /^price \(price\) is negative: "-1"/],
    [{ sku: "a", price: -1 }, /^price \(price\) is negative: -1/],
    [{ sku: "a", price: "-0.5e3" }, /^price \(price\) is negative: "-0\.5e3"/],
    [
      { sku: "a", price: new LosslessNumber("-12345678901234567890.5") },
      /^price.*is negative: -12345678901234567890\.5/,
    ],
    [{ sku: "a", price: "abc" }, /^price \(price\) is not a decimal number: "abc"/],
    [{ sku: "a", price: "1.2.3" }, /^price \(price\) is not a decimal number: "1\.2\.3"/],
    [{ sku: "a", price: "12,5" }, /^price \(price\) is not a decimal number: "12,5"/],
    [{ sku: "a", price: "1 234" }, /^price \(price\) is not a decimal number: "1 234"/],
    [{ sku: "a", price: "" }, /^price \(price\) is empty: ""/],
    [{ sku: "a", price: "   " }, /^price \(price\) is empty/],
    [
      { sku: "a", price: "9".repeat(101) },
      /^price \(price\) is longer than 100 characters \(101\): "9{64}…"/,
    ],
    [{ sku: "a", price: "NaN" }, /^price \(price\) is not a decimal number: "NaN"/],
    [{ sku: "a", price: "Infinity" }, /^price \(price\) is not a decimal number: "Infinity"/],
    [{ sku: "a", price: "-Infinity" }, /^price \(price\) is not a decimal number: "-Infinity"/],
    [{ sku: "a", price: "0x1A" }, /^price \(price\) is not a decimal number: "0x1A"/],
    [{ sku: "a", price: "1e" }, /^price \(price\) is not a decimal number/],
    [{ sku: "a", price: ".5" }, /^price \(price\) is not a decimal number/],
    [{ sku: "a", price: "5." }, /^price \(price\) is not a decimal number: "5\."/],
    [{ sku: "a", price: "1.2.3" }, /^price \(price\) is not a decimal number/],
    [{ sku: "a", price: "1..2" }, /^price \(price\) is not a decimal number/],
    [{ sku: "a", price: "١٢" }, /^price \(price\) is not a decimal number/],
    [
      { sku: "a", price: "1e131072" },
      /^price \(price\) is out of the range of PostgreSQL numeric: "1e131072"/,
    ],
    [{ sku: "a", price: "1.5e-16383" }, /^price \(price\) is out of the range of PostgreSQL numeric/],
    [{ sku: "a", price: Number.NaN }, /^price \(price\) is not a finite number/],
    [{ sku: "a", price: true }, /^price \(price\) must be a decimal string or a number: true/],
    [{ sku: "a" }, /^price \(price\) is missing/],
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

t.test("scanJsonLimits follows depth and numbers inside records and values beside them", async (t) => {
  // Containers off the records path are stepped over without frames: their nesting still counts.
  const limits = { maxDepth: 6, maxRecords: 3, recordsPath: "data.items" };
  t.doesNotThrow(() => scanJsonLimits('{"data":{"items":[{"a":[[1]]}]}}', limits), "depth 6 is allowed");
  t.throws(
    () => scanJsonLimits('{"data":{"items":[{"a":[[[1]]]}]}}', limits),
    /JSON body nests deeper than maxJsonDepth \(6\)/,
  );
  t.throws(() => scanJsonLimits('{"meta":[[[[[[1]]]]]],"data":{"items":[]}}', limits), /maxJsonDepth \(6\)/);
  // Brackets and quotes inside strings of a record do not close it: the next records still count.
  const tricky = '{"n":"]}\\"},{","m":["[",{"k":"}"}]}';
  t.doesNotThrow(() => scanJsonLimits(`{"data":{"items":[${tricky},${tricky},${tricky}]}}`, limits));
  t.throws(
    () => scanJsonLimits(`{"data":{"items":[${tricky},${tricky},${tricky},1]}}`, limits),
    /more than maxRecordsPerPage \(3\)/,
  );
  const flagged = (text: string) => scanJsonLimits(text, { ...limits, maxDepth: 64 }).inexactNumbers;
  t.ok(flagged('{"meta":{"total":12345678901234567890},"data":{"items":[]}}'), "beside the records");
  t.ok(flagged('{"data":{"items":[{"p":{"v":4821.1234567890123457}}]}}'), "inside a record");
  t.notOk(flagged('{"meta":{"total":123},"data":{"items":[{"p":{"v":1.5e3}}]}}'));
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

t.test("scanJsonLimits flags exactly the pages with a number literal a double would change", async (t) => {
  const limits = { maxDepth: 64, maxRecords: 100, recordsPath: "" };
  const flagged = (text: string) => scanJsonLimits(text, limits).inexactNumbers;
  for (const exact of [
    "[1,-2,0.1,1.50,19.99]",
    "[1.5e3,2E-7,1e21]",
    "[123456789012345]",
    '["12345678901234567890"]',
  ]) {
    t.notOk(flagged(exact), exact);
  }
  for (const inexact of [
    "[4821.1234567890123457]",
    "[12345678901234567890]",
    '[1,{"a":[9007199254740993]}]',
    "[1e400]",
    "[1e-400]",
    "[0.10000000000000000001]",
  ]) {
    t.ok(flagged(inexact), inexact);
  }
  // Property: the flag is set iff some literal's double differs in value from the literal.
  const literal = fc.oneof(
    fc.integer().map(String),
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
    fc
      .tuple(
        fc.stringMatching(/^[1-9]\d{0,30}$/),
        fc.stringMatching(/^\d{0,30}$/),
        fc.integer({ min: -400, max: 400 }),
      )
      .map(([i, f, e]) => `${i}${f ? `.${f}` : ""}${e ? `e${e}` : ""}`),
  );
  fc.assert(
    fc.property(fc.array(literal, { maxLength: 6 }), (literals) => {
      const text = `[${literals.join(",")}]`;
      const lossy = literals.some((l) => !sameValue(l, String(Number(l))));
      if (flagged(text) !== lossy) throw new Error(`${text}: flagged ${!lossy}`);
    }),
    { numRuns: 2_000 },
  );
});

/** Decimal value equality of two number texts, by their significant digits and the leading digit's power. */
function sameValue(a: string, b: string): boolean {
  const norm = (s: string) => {
    const m = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/i.exec(s);
    if (!m) return s;
    const [, sign, int = "", frac = "", exp = "0"] = m;
    const digits = int + frac;
    const lead = digits.search(/[1-9]/);
    if (lead < 0) return "0";
    return `${sign}${digits.slice(lead).replace(/0+$/, "")}@${int.length - lead + Number(exp)}`;
  };
  return norm(a) === norm(b);
}

t.test("decodeJsonPage keeps the text of number literals a double would change", async (t) => {
  const limits = { maxDepth: 64, maxRecords: 10, recordsPath: "items" };
  const body = '{"items":[{"p":4821.1234567890123457,"q":1.5,"s":7},{"p":1.5e3,"p":2}]}';
  const { records } = decodeJsonPage(Buffer.from(body), "application/json", limits);
  const [first, second] = records as Record<string, unknown>[];
  t.ok(first?.p instanceof LosslessNumber, "inexact literal kept as text");
  t.equal(String(first?.p), "4821.1234567890123457");
  t.equal(first?.q, 1.5, "exact literals stay numbers");
  t.equal(first?.s, 7);
  t.equal(second?.p, 2, "a repeated key: the last wins, as with JSON.parse");
  t.same(decodeJsonPage(Buffer.from('{"items":[1.25]}'), "application/json", limits).records, [1.25]);
  t.throws(
    () => decodeJsonPage(Buffer.from('{"items":[12345678901234567890,'), "application/json", limits),
    /not valid JSON/,
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
