import t from "tap";
import { startSimulator } from "./server.js";
import { httpRequest } from "./test-support.js";

t.test("each auth type: missing or wrong credentials 401, right ones 200", async (t) => {
  const basic = (u: string, p: string) => `Basic ${Buffer.from(`${u}:${p}`).toString("base64")}`;
  const sim = await startSimulator({
    suppliers: {
      open: { size: 3, auth: { type: "none" } },
      bear: { size: 3, auth: { type: "bearer", token: "s3cret" } },
      head: { size: 3, auth: { type: "header", name: "X-Api-Key", value: "k-1" } },
      bas: { size: 3, auth: { type: "basic", username: "user", password: "pa:ss" } },
    },
  });
  t.teardown(() => sim.close());
  const get = async (name: string, headers?: Record<string, string>) => {
    const res = await httpRequest(`${sim.baseUrl(name)}/v1/offers`, { headers });
    if (res.status === 401) t.same(JSON.parse(res.body), { error: "unauthorized" }, "401 is JSON");
    return res.status;
  };
  t.equal(await get("open"), 200);
  t.equal(await get("bear"), 401);
  t.equal(await get("bear", { authorization: "Bearer wrong" }), 401);
  t.equal(await get("bear", { authorization: "Bearer s3cret" }), 200);
  t.equal(await get("head"), 401);
  t.equal(await get("head", { "x-api-key": "k-2" }), 401);
  t.equal(await get("head", { "X-Api-Key": "k-1" }), 200);
  t.equal(await get("bas"), 401);
  t.equal(await get("bas", { authorization: basic("user", "nope") }), 401);
  t.equal(await get("bas", { authorization: basic("user", "pa:ss") }), 200);
  t.same(sim.stats("bas").byStatus, { 200: 1, 401: 2 });
  t.equal(sim.stats("bas").walksStarted, 1, "refused requests start no walk");
});

t.test("rate limit: requests over the bucket answer 429 Retry-After 1 and count overBudget", async (t) => {
  let now = 1_700_000_000_000;
  const sim = await startSimulator({
    clock: () => now,
    suppliers: { rl: { size: 10, rateLimit: { requestsPerSecond: 2, burst: 3 } } },
  });
  t.teardown(() => sim.close());
  const url = `${sim.baseUrl("rl")}/v1/offers`;
  const statuses: number[] = [];
  for (let i = 0; i < 5; i++) {
    const res = await httpRequest(url);
    statuses.push(res.status);
    if (res.status === 429) t.equal(res.headers["retry-after"], "1");
  }
  t.same(statuses, [200, 200, 200, 429, 429], "burst of 3, then refused");
  now += 1000;
  const later: number[] = [];
  for (let i = 0; i < 3; i++) later.push((await httpRequest(url)).status);
  t.same(later, [200, 200, 429], "2 tokens refilled after 1 s at 2/s");
  const stats = sim.stats("rl");
  t.equal(stats.overBudget, 3);
  t.equal(stats.requests, 8);
  t.same(stats.byStatus, { 200: 5, 429: 3 });
  t.same(stats.requestTimes.slice(-3), [now, now, now], "request times come from the injected clock");
});

t.test("concurrency: current and highest in-flight requests per supplier", async (t) => {
  const sim = await startSimulator({ suppliers: { c: { size: 10, faults: { latencyMs: 200 } } } });
  t.teardown(() => sim.close());
  const url = `${sim.baseUrl("c")}/v1/offers`;
  const inFlight = Array.from({ length: 4 }, () => httpRequest(url));
  // Bounded wait for all four to be in flight at once (latency keeps them there 200 ms).
  for (let i = 0; i < 100 && sim.stats("c").concurrency < 4; i++) await new Promise((r) => setTimeout(r, 10));
  t.equal(sim.stats("c").concurrency, 4);
  const results = await Promise.all(inFlight);
  t.same(
    results.map((r) => r.status),
    [200, 200, 200, 200],
  );
  const stats = sim.stats("c");
  t.equal(stats.maxConcurrency, 4);
  t.equal(stats.concurrency, 0, "back to zero when answered");
  await httpRequest(url);
  t.equal(sim.stats("c").maxConcurrency, 4, "the high-water mark stays");
  sim.resetStats("c");
  t.same(sim.stats("c"), {
    requests: 0,
    byStatus: {},
    walksStarted: 0,
    walksCompleted: 0,
    walks: [],
    concurrency: 0,
    maxConcurrency: 0,
    overBudget: 0,
    logins: 0,
    loginFailures: 0,
    loginViolations: 0,
    issuedTokens: [],
    expiredRequests: 0,
    bodies: [],
    urls: [],
    requestTimes: [],
  });
});

t.test("overlapping walks are visible in stats.walks", async (t) => {
  let now = 1_000;
  const sim = await startSimulator({ clock: () => now, suppliers: { w: { size: 150, pagination: "page" } } });
  t.teardown(() => sim.close());
  const page = (n: number) => httpRequest(`${sim.baseUrl("w")}/v1/offers?page=${n}`);
  await page(1); // walk A starts at 1000
  now = 2_000;
  await page(1); // walk B starts at 2000
  now = 3_000;
  await page(2);
  await page(3); // terminal (empty): closes the latest open walk
  now = 4_000;
  await page(2);
  await page(3);
  const stats = sim.stats("w");
  t.equal(stats.walksStarted, 2);
  t.equal(stats.walksCompleted, 2);
  t.same(stats.walks, [
    { startedAt: 1_000, endedAt: 4_000 },
    { startedAt: 2_000, endedAt: 3_000 },
  ]);
});
