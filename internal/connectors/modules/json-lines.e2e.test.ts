// The example hand-written module (json-lines) over the shared transport: pages until
// empty, gets the same retries, metrics, credentials and validation as the declarative one.
import t from "tap";
import { ConfigError } from "../../platform/errors.js";
import { connectorDefinitionSchema } from "../schema/connector-schema.js";
import { buildConnector, collectPages, startServer, walkContext, walkError } from "../test-support.js";

const PAGES: Record<string, string> = {
  "1": '{"sku":"A","price":"1.10","cur":"eur"}\n{"sku":2,"price":3}\n',
  "2": '{"sku":"C","price":"bad"}\n',
  "3": "",
};

function definition(baseUrl: string, extra: Record<string, unknown> = {}) {
  return connectorDefinitionSchema.parse({
    module: "json-lines",
    baseUrl,
    auth: { type: "bearer", tokenEnv: "FEED_TOKEN" },
    retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 5 },
    settings: { path: "/feed.ndjson", fields: { sku: "sku", price: "price", currency: "cur" } },
    ...extra,
  });
}

t.test("json-lines walks pages until an empty one, with retries and credentials", async (t) => {
  let failedOnce = false;
  const srv = await startServer(t, (req, res) => {
    const page = new URL(req.url ?? "/", "http://x").searchParams.get("page") ?? "";
    if (page === "2" && !failedOnce) {
      failedOnce = true;
      res.writeHead(503).end();
      return;
    }
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    res.end(PAGES[page] ?? "");
  });
  const { connector, log, metrics } = buildConnector(t, definition(srv.url), {
    readSecretEnv: () => "feed-secret",
  });
  const pages = await collectPages(connector, walkContext(log));
  t.same(
    pages.map((p) => [p.seq, p.offers.length, p.rejects.length, p.httpAttempts]),
    [
      [1, 2, 0, 1],
      [2, 0, 1, 2],
    ],
  );
  t.same(pages[0]?.offers[0], { sku: "A", price: "1.10", currency: "EUR", stock: null, name: null });
  t.match(pages[1]?.rejects[0]?.reason, /^price \(price\)/);
  t.equal(srv.requests.length, 4, "3 pages + 1 retry");
  t.ok(srv.requests.every((r) => r.headers.authorization === "Bearer feed-secret"));
  t.equal(srv.requests[0]?.url, "/feed.ndjson?page=1");
  const retries = await metrics.httpRetries.get();
  t.equal(retries.values.find((v) => v.labels.reason === "http_503")?.value, 1);
});

t.test("json-lines refuses a JSON content type as CONTRACT", async (t) => {
  const srv = await startServer(t, (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end("[]");
  });
  const { connector, log } = buildConnector(t, definition(srv.url), { readSecretEnv: () => "feed-secret" });
  const err = (await walkError(connector, walkContext(log))) as { code: string; message: string };
  t.equal(err.code, "CONTRACT");
  t.match(err.message, /application\/json/);
  t.equal(srv.requests.length, 1);
});

t.test("invalid module settings are a ConfigError", async (t) => {
  t.throws(
    () => buildConnector(t, definition("http://127.0.0.1:9", { settings: { path: "feed" } })),
    ConfigError,
  );
});
