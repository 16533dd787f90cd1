import { request } from "node:http";
import t from "tap";
import { startSimulator } from "./server.js";
import { httpRequest } from "./test-support.js";
import type { Simulator } from "./types.js";

async function setup(
  t: { teardown(fn: () => unknown): void },
  extra: Parameters<typeof startSimulator>[0] = {},
): Promise<Simulator> {
  const sim = await startSimulator({
    ...extra,
    suppliers: {
      s: { size: 250, pagination: "page" },
      cur: { size: 250, pagination: "cursor" },
      lnk: { size: 250, pagination: "link" },
    },
  });
  t.teardown(() => sim.close());
  return sim;
}

const pageUrl = (sim: Simulator, page: number, supplier = "s") =>
  `${sim.baseUrl(supplier)}/v1/offers?page=${page}`;

async function untilTrue(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

t.test("status: every page, at most `times`, or only onPage", async (t) => {
  const sim = await setup(t);
  sim.setFaults("s", { status: { code: 503, times: 2 } });
  const codes: number[] = [];
  for (let i = 0; i < 3; i++) codes.push((await httpRequest(pageUrl(sim, 1))).status);
  t.same(codes, [503, 503, 200]);
  sim.setFaults("s", { status: { code: 500, onPage: 2 } });
  t.equal((await httpRequest(pageUrl(sim, 1))).status, 200);
  const res = await httpRequest(pageUrl(sim, 2));
  t.equal(res.status, 500);
  t.same(JSON.parse(res.body), { error: "simulated status 500" });
  t.equal((await httpRequest(pageUrl(sim, 3))).status, 200);
});

t.test("status rate: a deterministic fraction, the same sequence after every set", async (t) => {
  const sim = await setup(t);
  const run = async () => {
    sim.setFaults("s", { status: { code: 502, rate: 0.3 } });
    const codes: number[] = [];
    for (let i = 0; i < 60; i++) codes.push((await httpRequest(pageUrl(sim, 1))).status);
    return codes;
  };
  const first = await run();
  const second = await run();
  t.same(first, second, "same seed, same hits");
  const hits = first.filter((c) => c === 502).length;
  t.ok(hits > 5 && hits < 35, `about 30% (got ${hits}/60)`);
});

t.test("retryAfter: 429 with seconds or an HTTP date", async (t) => {
  const now = Date.UTC(2030, 0, 2, 3, 4, 5);
  const sim = await setup(t, { clock: () => now });
  sim.setFaults("s", { retryAfter: { seconds: 7, times: 1 } });
  let res = await httpRequest(pageUrl(sim, 1));
  t.equal(res.status, 429);
  t.equal(res.headers["retry-after"], "7");
  t.equal((await httpRequest(pageUrl(sim, 1))).status, 200, "times: 1");
  sim.setFaults("s", { retryAfter: { seconds: 30, httpDate: true, onPage: 2 } });
  t.equal((await httpRequest(pageUrl(sim, 1))).status, 200);
  res = await httpRequest(pageUrl(sim, 2));
  t.equal(res.status, 429);
  t.equal(res.headers["retry-after"], "Wed, 02 Jan 2030 03:04:35 GMT");
  t.same(sim.stats("s").overBudget, 0, "a simulated 429 is not a rate-limit refusal");
});

t.test("latencyMs delays every request", async (t) => {
  const sim = await setup(t);
  sim.setFaults("s", { latencyMs: 150 });
  const started = performance.now();
  t.equal((await httpRequest(pageUrl(sim, 1))).status, 200);
  t.ok(performance.now() - started >= 145, "took at least the latency");
});

t.test("hangOnPage: no answer until the fault is cleared, then served", async (t) => {
  const sim = await setup(t);
  sim.setFaults("s", { hangOnPage: 2 });
  t.equal((await httpRequest(pageUrl(sim, 1))).status, 200, "other pages answer");
  let settled = false;
  const hanging = httpRequest(pageUrl(sim, 2)).finally(() => {
    settled = true;
  });
  await untilTrue(() => sim.stats("s").concurrency === 1, "the request to be in flight");
  await new Promise((r) => setTimeout(r, 100));
  t.notOk(settled, "still hanging");
  sim.setFaults("s", {});
  const res = await hanging;
  t.equal(res.status, 200);
  t.equal(JSON.parse(res.body).data.items.length, 100);
});

t.test("truncateOnPage: Content-Length larger than the body, then the socket dies", async (t) => {
  const sim = await setup(t);
  sim.setFaults("s", { truncateOnPage: 1 });
  await t.rejects(httpRequest(pageUrl(sim, 1)));
  t.equal((await httpRequest(pageUrl(sim, 2))).status, 200);
});

t.test("resetOnPage: the socket is destroyed without a response", async (t) => {
  const sim = await setup(t);
  sim.setFaults("s", { resetOnPage: 3 });
  await t.rejects(httpRequest(pageUrl(sim, 3)), /socket hang up|ECONNRESET/);
  t.equal((await httpRequest(pageUrl(sim, 1))).status, 200);
});

t.test("invalidJsonOnPage and missingRecordsPathOnPage", async (t) => {
  const sim = await setup(t);
  sim.setFaults("s", { invalidJsonOnPage: 1, missingRecordsPathOnPage: 2 });
  const bad = await httpRequest(pageUrl(sim, 1));
  t.equal(bad.status, 200);
  t.match(bad.headers["content-type"], /application\/json/);
  t.throws(() => JSON.parse(bad.body));
  const missing = await httpRequest(pageUrl(sim, 2));
  t.same(JSON.parse(missing.body), { oops: [] });
  t.equal(sim.stats("s").walksStarted, 0, "a broken first page starts no walk");
});

t.test("contentType: html gets an HTML body, others the JSON page", async (t) => {
  const sim = await setup(t);
  sim.setFaults("s", { contentType: "text/html; charset=utf-8" });
  const html = await httpRequest(pageUrl(sim, 1));
  t.equal(html.status, 200);
  t.equal(html.headers["content-type"], "text/html; charset=utf-8");
  t.match(html.body, /^<!doctype html>/);
  sim.setFaults("s", { contentType: "text/plain" });
  const plain = await httpRequest(pageUrl(sim, 1));
  t.equal(plain.headers["content-type"], "text/plain");
  t.equal(JSON.parse(plain.body).data.items.length, 100);
});

t.test("oversizedBodyBytes: an exact-size valid JSON body, streamed", async (t) => {
  const sim = await setup(t);
  const bytes = 3 * 1024 * 1024 + 17;
  sim.setFaults("s", { oversizedBodyBytes: bytes });
  const res = await httpRequest(pageUrl(sim, 1));
  t.equal(res.status, 200);
  t.equal(res.headers["content-length"], undefined, "no Content-Length: the client has to count");
  t.equal(Buffer.byteLength(res.body), bytes);
  t.equal(JSON.parse(res.body).data.items.length, 1);
});

t.test("oversizedBodyBytes: stops streaming when the client gives up (backpressure)", async (t) => {
  const sim = await setup(t);
  // 50 GB: only finishes if the server stops when the client goes away.
  sim.setFaults("s", { oversizedBodyBytes: 50 * 1024 ** 3 });
  const received = await new Promise<number>((resolve, reject) => {
    const req = request(pageUrl(sim, 1), { agent: false }, (res) => {
      let n = 0;
      res.on("data", (c: Buffer) => {
        n += c.length;
        if (n > 1024 * 1024) {
          req.destroy();
          resolve(n);
        }
      });
    });
    req.on("error", (err) => (req.destroyed ? undefined : reject(err)));
    req.end();
  });
  t.ok(received > 1024 * 1024);
  await untilTrue(() => sim.stats("s").concurrency === 0, "the stream to stop");
  t.pass("the server stopped streaming");
});

t.test("redirectTo answers 302 with that Location", async (t) => {
  const sim = await setup(t);
  sim.setFaults("s", { redirectTo: "http://127.0.0.2:1/elsewhere" });
  const res = await httpRequest(pageUrl(sim, 1));
  t.equal(res.status, 302);
  t.equal(res.headers.location, "http://127.0.0.2:1/elsewhere");
});

t.test("linkTo and cursorValue override the next pointer while more remain", async (t) => {
  const sim = await setup(t);
  let res = await httpRequest(`${sim.baseUrl("lnk")}/v1/offers`);
  t.equal(res.headers.link, '</lnk/v1/offers?page=2&limit=100>; rel="next"', "relative by default");
  sim.setFaults("lnk", { linkTo: "http://evil.invalid/lnk/v1/offers?page=2" });
  res = await httpRequest(`${sim.baseUrl("lnk")}/v1/offers`);
  t.equal(res.headers.link, '<http://evil.invalid/lnk/v1/offers?page=2>; rel="next"');
  res = await httpRequest(`${sim.baseUrl("lnk")}/v1/offers?page=3`);
  t.equal(res.headers.link, undefined, "no next on the last page");

  sim.setFaults("cur", { cursorValue: "../../../etc" });
  const body = JSON.parse((await httpRequest(`${sim.baseUrl("cur")}/v1/offers`)).body);
  t.equal(body.next_cursor, "../../../etc");
});

t.test("faults given in configure apply from the first request", async (t) => {
  const sim = await setup(t);
  sim.configure("f", { size: 5, faults: { status: { code: 418 } } });
  t.equal((await httpRequest(pageUrl(sim, 1, "f"))).status, 418);
  sim.setFaults("f", {});
  t.equal((await httpRequest(pageUrl(sim, 1, "f"))).status, 200, "{} clears");
});
