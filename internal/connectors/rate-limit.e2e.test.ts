// The client-side limiter against the simulator's own enforcement: 10 s at 5 rps,
// burst 5. Nothing may be over budget, and at least 95 % of the budget is used.
import t from "tap";
import { startSimulator } from "../simulator/index.js";
import { buildConnector, simDefinition, walkContext } from "./test-support.js";

const RPS = 5;
const BURST = 5;
const WINDOW_MS = 10_000;

t.test("5 rps, burst 5, over 10 s: 0 over budget, ≥ 95 % of budget used", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  sim.configure("rl", {
    size: 100_000,
    pageSize: 10,
    pagination: "page",
    rateLimit: { requestsPerSecond: RPS, burst: BURST },
  });
  const { connector, log, metrics } = buildConnector(
    t,
    simDefinition(sim.baseUrl("rl"), {
      request: { path: "/v1/offers", query: { limit: "10" } },
      rateLimit: { requestsPerSecond: RPS, burst: BURST, maxConcurrency: 2 },
    }),
  );
  const stop = new AbortController();
  const started = Date.now();
  const timer = setTimeout(() => stop.abort(new Error("window over")), WINDOW_MS);
  t.teardown(() => clearTimeout(timer));
  let pages = 0;
  const err = await (async () => {
    try {
      for await (const _ of connector.walk(walkContext(log, stop.signal))) pages++;
    } catch (e) {
      return e;
    }
    return undefined;
  })();
  const elapsed = Date.now() - started;
  t.match(err, { message: "window over" }, "the walk ends with the abort reason");
  const stats = sim.stats("rl");
  const budget = BURST + (RPS * elapsed) / 1000;
  const used = stats.requests / budget;
  t.equal(stats.overBudget, 0, "no request over the supplier's budget");
  t.ok(
    used >= 0.95,
    `used ${(used * 100).toFixed(1)} % of the budget (${stats.requests} of ${budget.toFixed(1)})`,
  );
  t.ok(stats.maxConcurrency <= 2, `max concurrency ${stats.maxConcurrency}`);
  const waited = (await metrics.rateLimitWait.get()).values[0]?.value ?? 0;
  t.ok(waited > 5, `rateLimitWait counted ${waited.toFixed(1)} s`);
  t.comment(
    JSON.stringify({
      byStatus: stats.byStatus,
      gaps: stats.requestTimes.map((x, i, a) => x - (a[i - 1] ?? x)),
    }),
  );
  t.comment(
    `pages yielded ${pages}, requests ${stats.requests}, budget ${budget.toFixed(1)}, used ${(used * 100).toFixed(1)} %`,
  );
});
