import { connect } from "node:net";
import t from "tap";
import { startSimulator } from "./server.js";
import { httpRequest } from "./test-support.js";

t.test("admin API: health, configure, mutate, faults, stats, reset-stats", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  const admin = (method: string, path: string, body?: unknown) =>
    httpRequest(`${sim.url}/_admin${path}`, {
      method,
      headers: { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    }).then((r) => ({ status: r.status, json: JSON.parse(r.body) as Record<string, unknown> }));
  const offers = () => httpRequest(`${sim.baseUrl("acme")}/v1/offers?limit=1000`);

  t.same(await admin("GET", "/health"), { status: 200, json: { status: "ok" } });
  t.equal((await offers()).status, 404, "not configured yet");

  t.same((await admin("PUT", "/suppliers/acme", { size: 30, pageSize: 10 })).status, 200);
  t.equal(JSON.parse((await offers()).body).data.items.length, 30);

  t.equal((await admin("POST", "/suppliers/acme/mutate", { remove: 5, add: 1 })).status, 200);
  t.equal(JSON.parse((await offers()).body).data.items.length, 26);
  t.equal((await admin("POST", "/suppliers/acme/mutate", { reset: true })).status, 200);
  t.equal(JSON.parse((await offers()).body).data.items.length, 30);

  t.equal((await admin("PUT", "/suppliers/acme/faults", { status: { code: 503, times: 1 } })).status, 200);
  t.equal((await offers()).status, 503);
  t.equal((await offers()).status, 200);

  const stats = await admin("GET", "/suppliers/acme/stats");
  t.equal(stats.status, 200);
  t.match(stats.json, { requests: 5, byStatus: { 200: 4, 503: 1 }, walksStarted: 4, walksCompleted: 0 });
  t.equal((await admin("POST", "/suppliers/acme/reset-stats")).status, 200);
  t.match((await admin("GET", "/suppliers/acme/stats")).json, { requests: 0, byStatus: {} });

  t.equal((await admin("PUT", "/suppliers/acme/faults", {})).status, 200, "{} clears");
  t.equal((await offers()).status, 200);
});

t.test("admin API rejects bad input with 400/404/405", async (t) => {
  const sim = await startSimulator({ suppliers: { a: { size: 1 } } });
  t.teardown(() => sim.close());
  const call = (method: string, path: string, body?: string) =>
    httpRequest(`${sim.url}/_admin${path}`, { method, body }).then((r) => r.status);
  t.equal(await call("PUT", "/suppliers/b", JSON.stringify({ size: -1 })), 400);
  t.equal(await call("PUT", "/suppliers/b", JSON.stringify({ size: 1, bogus: true })), 400, "unknown keys");
  t.equal(await call("PUT", "/suppliers/b", "{not json"), 400);
  t.equal(await call("PUT", "/suppliers/a/faults", JSON.stringify({ hangOnPage: 0 })), 400);
  t.equal(await call("POST", "/suppliers/zzz/mutate", JSON.stringify({ add: 1 })), 404);
  t.equal(await call("GET", "/suppliers/zzz/stats"), 404);
  t.equal(await call("DELETE", "/suppliers/a/stats"), 405);
  t.equal(await call("GET", "/nothing"), 404);
});

t.test("close() ends hanging and sleeping requests, and is safe twice", async (t) => {
  const sim = await startSimulator({
    suppliers: { h: { size: 500, faults: { hangOnPage: 1 } }, l: { size: 5, faults: { latencyMs: 60_000 } } },
  });
  // Outcomes are captured at once so an early rejection is never unhandled.
  const outcome = (p: Promise<unknown>) =>
    p.then(
      () => "answered",
      () => "connection ended",
    );
  const hanging = outcome(httpRequest(`${sim.baseUrl("h")}/v1/offers`, { timeoutMs: 30_000 }));
  // A client stuck half-way through its request headers: only destroying its socket ends it.
  const partial = connect(sim.port, "127.0.0.1");
  const partialClosed = new Promise((resolve) => partial.once("close", resolve));
  partial.on("error", () => {});
  await new Promise((resolve) => partial.once("connect", resolve));
  partial.write("GET /h/v1/offers HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  const sleeping = outcome(httpRequest(`${sim.baseUrl("l")}/v1/offers`, { timeoutMs: 30_000 }));
  for (let i = 0; i < 500 && sim.stats("h").concurrency + sim.stats("l").concurrency < 2; i++) {
    await new Promise((r) => setTimeout(r, 10));
  }
  t.equal(sim.stats("h").concurrency, 1, "request hanging");
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error("close() took more than 5 s")), 5_000);
  });
  await Promise.race([Promise.all([sim.close(), sim.close()]), bound]);
  clearTimeout(timer);
  await sim.close();
  t.ok(performance.now() - started < 2_000, "close did not wait for the hang");
  t.equal(await hanging, "connection ended", "the hanging client sees its connection end");
  t.equal(await sleeping, "connection ended", "the sleeping client too");
  await partialClosed;
  t.pass("the half-open connection was closed");
  await t.rejects(
    httpRequest(`${sim.baseUrl("h")}/v1/offers?page=2`, { timeoutMs: 2_000 }),
    "no longer listening",
  );
});

t.test("configure replaces a supplier and releases requests hanging on the old one", async (t) => {
  const sim = await startSimulator({ suppliers: { r: { size: 10, faults: { hangOnPage: 1 } } } });
  t.teardown(() => sim.close());
  const hanging = httpRequest(`${sim.baseUrl("r")}/v1/offers`);
  for (let i = 0; i < 500 && sim.stats("r").concurrency < 1; i++) await new Promise((r) => setTimeout(r, 10));
  sim.configure("r", { size: 3 });
  t.equal((await hanging).status, 200);
  t.equal(sim.stats("r").requests, 0, "fresh stats for the new configuration");
  t.throws(() => sim.stats("unknown"), /unknown supplier/);
});
