// Hostile bodies: every one is refused with a clear CONTRACT error (or a clear
// record reject) without buffering the excess, blowing the stack or retrying.
import t from "tap";
import { startSimulator } from "../simulator/index.js";
import {
  buildConnector,
  collectPages,
  simDefinition,
  startServer,
  walkContext,
  walkError,
} from "./test-support.js";

interface Failure {
  code: string;
  message: string;
  attempts: number;
}

t.test("a 200 MB body with maxResponseBytes 1 MB fails within 1 s, memory flat", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  sim.configure("big", { size: 10, pagination: "none", faults: { oversizedBodyBytes: 200_000_000 } });
  const { connector, log } = buildConnector(
    t,
    simDefinition(sim.baseUrl("big"), { pagination: { type: "none" }, maxResponseBytes: 1_048_576 }),
  );
  const rssBefore = process.memoryUsage().rss;
  const started = Date.now();
  const err = (await walkError(connector, walkContext(log))) as Failure;
  const elapsed = Date.now() - started;
  const growth = (process.memoryUsage().rss - rssBefore) / 1_048_576;
  t.equal(err.code, "CONTRACT");
  t.match(err.message, /maxResponseBytes \(1048576\)/);
  t.equal(err.attempts, 1, "not retried");
  t.ok(elapsed < 1_000, `failed after ${elapsed} ms`);
  t.ok(growth < 50, `RSS grew ${growth.toFixed(1)} MB`);
});

t.test("a text/html page is CONTRACT naming the content type", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  sim.configure("html", {
    size: 10,
    pagination: "none",
    faults: { contentType: "text/html; charset=utf-8" },
  });
  const { connector, log } = buildConnector(
    t,
    simDefinition(sim.baseUrl("html"), { pagination: { type: "none" } }),
  );
  const err = (await walkError(connector, walkContext(log))) as Failure;
  t.equal(err.code, "CONTRACT");
  t.match(err.message, /text\/html/);
  t.equal(sim.stats("html").requests, 1);
});

t.test("10,000-deep JSON is CONTRACT, not a stack overflow", async (t) => {
  const depth = 10_000;
  const body = `{"data":{"items":${"[".repeat(depth)}${"]".repeat(depth)}}}`;
  const srv = await startServer(t, (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(body);
  });
  const { connector, log } = buildConnector(t, simDefinition(srv.url, { pagination: { type: "none" } }));
  const err = (await walkError(connector, walkContext(log))) as Failure;
  t.equal(err.code, "CONTRACT");
  t.match(err.message, /maxJsonDepth \(64\)/);
  t.equal(srv.requests.length, 1);
});

t.test("10 million tiny records are CONTRACT before parsing", async (t) => {
  const count = 10_000_000;
  const chunk = "0,".repeat(100_000);
  const srv = await startServer(t, (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.write('{"data":{"items":[');
    let sent = 0;
    const pump = () => {
      while (sent < count - 100_000) {
        sent += 100_000;
        if (!res.write(chunk)) {
          res.once("drain", pump);
          return;
        }
      }
      res.end(`${"0,".repeat(count - sent - 1)}0]}}`);
    };
    pump();
  });
  const { connector, log } = buildConnector(
    t,
    simDefinition(srv.url, { pagination: { type: "none" }, maxResponseBytes: 64 * 1_048_576 }),
  );
  const started = Date.now();
  const err = (await walkError(connector, walkContext(log))) as Failure;
  t.equal(err.code, "CONTRACT");
  t.match(err.message, /more than maxRecordsPerPage \(100000\) records at records\.path "data\.items"/);
  t.comment(`refused after ${Date.now() - started} ms`);
});

t.test("a records path that is not an array is CONTRACT", async (t) => {
  const srv = await startServer(t, (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"data":{"items":{"a":1}}}');
  });
  const { connector, log } = buildConnector(t, simDefinition(srv.url, { pagination: { type: "none" } }));
  const err = (await walkError(connector, walkContext(log))) as Failure;
  t.equal(err.code, "CONTRACT");
  t.match(err.message, /records\.path "data\.items" is object, not an array/);
});

t.test("gzip, deflate and br bodies are decompressed", async (t) => {
  const zlib = await import("node:zlib");
  const json = Buffer.from(
    JSON.stringify({ data: { items: [{ article: "A1", price: { value: "1.50" } }] } }),
  );
  const encoders: Record<string, (b: Buffer) => Buffer> = {
    gzip: zlib.gzipSync,
    deflate: zlib.deflateSync,
    br: zlib.brotliCompressSync,
  };
  for (const [encoding, encode] of Object.entries(encoders)) {
    const srv = await startServer(t, (_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-encoding": encoding });
      res.end(encode(json));
    });
    const { connector, log } = buildConnector(t, simDefinition(srv.url, { pagination: { type: "none" } }));
    const pages = await collectPages(connector, walkContext(log));
    t.same(
      pages[0]?.offers,
      [{ sku: "A1", price: "1.50", currency: null, stock: null, name: null }],
      encoding,
    );
    t.equal(srv.requests[0]?.headers["accept-encoding"], "gzip, deflate, br");
  }
});

t.test("a 1 MB SKU is rejected with a short, clear reason; the page goes on", async (t) => {
  const huge = "X".repeat(1_048_576);
  const srv = await startServer(t, (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        data: {
          items: [
            { article: huge, price: { value: "1.00" } },
            { article: "OK-1", price: { value: "2.00" } },
          ],
        },
      }),
    );
  });
  const { connector, log } = buildConnector(t, simDefinition(srv.url, { pagination: { type: "none" } }));
  const pages = await collectPages(connector, walkContext(log));
  t.equal(pages[0]?.offers.length, 1);
  const reject = pages[0]?.rejects[0];
  t.match(reject?.reason, /^sku \(article\) is longer than 256 characters \(1048576\): "X{64}…"$/);
  t.ok((reject?.reason.length ?? 0) < 200, "reason is truncated");
  t.equal((reject?.raw as { article?: string } | undefined)?.article?.length, huge.length, "raw record kept");
});
