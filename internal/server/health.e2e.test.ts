/**
 * The health server's HTTP behaviour on a real loopback socket: routing, methods,
 * hardening and lifecycle. The database here is dead or hung on purpose; the
 * freshness answers against a real one are in readyz.pg.test.ts.
 */
import net from "node:net";
import { networkInterfaces } from "node:os";
import type pg from "pg";
import t from "tap";
import type { SupplierConfig } from "../config/types.js";
import { createMetrics } from "../observability/metrics.js";
import { InfraError } from "../platform/errors.js";
import { SecretRegistry } from "../platform/redact.js";
import { createHealthServer, type HealthServerOptions } from "./server.js";
import {
  captureLogger,
  deadDatabasePool,
  fetchLocal,
  hungDatabasePool,
  rawExchange,
  type Teardown,
} from "./test-support.js";

const SUPPLIERS: SupplierConfig[] = [
  { name: "etm", intervalMs: 6 * 3_600_000, enabled: true },
  { name: "systeme", intervalMs: 6 * 3_600_000, enabled: false },
];

async function startServer(t: Teardown, db: pg.Pool, extra: Partial<HealthServerOptions> = {}) {
  const { log, lines } = captureLogger();
  const server = createHealthServer({
    secrets: new SecretRegistry(),
    host: "127.0.0.1",
    port: 0,
    db,
    suppliers: SUPPLIERS,
    metrics: createMetrics({ processMetrics: false }),
    log,
    ...extra,
  });
  t.teardown(() => server.stop());
  const addr = await server.start();
  return { server, port: addr.port, lines };
}

t.test("routes, methods and HEAD", async (t) => {
  const { port } = await startServer(t, await deadDatabasePool(t));

  const live = await fetchLocal(port, "/livez");
  t.equal(live.status, 200, "livez does not depend on the database");
  t.same(JSON.parse(live.body), { status: "ok" });
  t.match(live.headers["content-type"], /^application\/json/);
  t.equal(live.headers["cache-control"], "no-store");
  t.equal((await fetchLocal(port, "/livez?probe=1")).status, 200, "a query string is ignored");

  const head = await fetchLocal(port, "/livez", { method: "HEAD" });
  t.equal(head.status, 200);
  t.equal(head.body, "", "HEAD has no body");
  t.equal(head.headers["content-length"], String(Buffer.byteLength(live.body)), "HEAD has GET's headers");

  // "/" and "/runs/<id>" are the console (console/console.e2e.test.ts); "/runs" alone is not.
  for (const path of ["/runs", "/nope", "/livez/extra", "/readyz/", "/readyz/etm/x", "/metricsx"]) {
    const res = await fetchLocal(port, path);
    t.equal(res.status, 404, `${path} is 404`);
    t.equal(JSON.parse(res.body).error, "not_found");
  }
  for (const name of ["nope", "systeme", "ETM", "%2e%2e"]) {
    const res = await fetchLocal(port, `/readyz/${name}`);
    t.equal(res.status, 404, `/readyz/${name}: unknown or disabled is 404`);
    t.equal(JSON.parse(res.body).error, "not_found");
  }
  for (const method of ["POST", "PUT", "DELETE", "OPTIONS"]) {
    const res = await fetchLocal(port, "/metrics", { method });
    t.equal(res.status, 405, `${method} is 405`);
    t.equal(res.headers.allow, "GET, HEAD");
  }
});

t.test("an unreachable database: livez 200, readyz 503 unavailable, logged once", async (t) => {
  const { port, lines } = await startServer(t, await deadDatabasePool(t), { freshnessCacheMs: 0 });
  for (const path of ["/readyz", "/readyz/etm"]) {
    const res = await fetchLocal(port, path);
    t.equal(res.status, 503, path);
    t.same(JSON.parse(res.body), {
      status: "unavailable",
      database: "unreachable",
      suppliers: {
        etm: { status: "none", last_success: null, age_seconds: null, threshold_seconds: 43_200 },
      },
    });
  }
  const metrics = await fetchLocal(port, "/metrics");
  t.equal(metrics.status, 200, "metrics still render without the database");
  t.equal(
    lines().filter((l) => l.msg === "readiness: database unreachable").length,
    1,
    "one warning, not one per probe",
  );
});

t.test("a hung database does not hang probes, and stop() cuts in-flight requests", async (t) => {
  const { server, port } = await startServer(t, await hungDatabasePool(t), { databaseTimeoutMs: 300 });
  const started = performance.now();
  const res = await fetchLocal(port, "/readyz");
  const elapsed = performance.now() - started;
  t.equal(res.status, 503);
  t.equal(JSON.parse(res.body).database, "unreachable");
  t.ok(elapsed < 2_000, `answered in ${Math.round(elapsed)} ms`);

  // A second server whose bound is long: its request is in flight when stop() comes.
  const hung = await hungDatabasePool(t);
  const slow = await startServer(t, hung, { databaseTimeoutMs: 60_000 });
  const inFlight = fetchLocal(slow.port, "/readyz", { timeoutMs: 10_000 }).then(
    () => "answered",
    (err: Error) => err.message,
  );
  // In flight: the server is handling it, waiting on the hung database (a connection asked for).
  const deadline = Date.now() + 10_000;
  while (hung.totalCount === 0) {
    if (Date.now() > deadline) throw new Error("timed out waiting for the probe to reach the database");
    await new Promise((r) => setTimeout(r, 5));
  }
  const stopStarted = performance.now();
  await slow.server.stop();
  t.ok(performance.now() - stopStarted < 1_000, "stop does not wait for the hung request");
  t.match(await inFlight, /socket hang up|ECONNRESET/, "the in-flight request was cut");
  await server.stop();
});

t.test("hardening: header limit, slow headers, bodies never waited for", async (t) => {
  const { port } = await startServer(t, await deadDatabasePool(t), { requestTimeoutMs: 400 });

  const big = await rawExchange(
    port,
    `GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`,
    3_000,
  );
  t.match(big.text, /^HTTP\/1\.1 431 /, "headers over 16 KiB are refused");

  const slow = await rawExchange(port, "GET /livez HTTP/1.1\r\nHost: x\r\n", 5_000);
  t.ok(
    slow.closedByServer,
    `a request whose headers never end is closed (after ${Math.round(slow.elapsedMs)} ms)`,
  );
  t.ok(slow.elapsedMs < 3_000, "within the deadline and its check interval");
  t.match(slow.text, /^(HTTP\/1\.1 408 |$)/);

  // Default deadlines here, so only the server's choice to close can end the connection early.
  const plain = await startServer(t, await deadDatabasePool(t));
  const body = await rawExchange(
    plain.port,
    "GET /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\nhello",
    5_000,
  );
  const [head] = body.text.split("\r\n\r\n");
  t.match(head, /^HTTP\/1\.1 200 /, "answered without reading the announced body");
  t.match(head, /\r\nConnection: close(\r\n|$)/i, "announcing the close");
  t.ok(body.closedByServer && body.elapsedMs < 2_000, `closed at once (${Math.round(body.elapsedMs)} ms)`);

  const keepAlive = await rawExchange(port, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n", 12_000);
  t.ok(
    keepAlive.closedByServer,
    `an idle keep-alive connection is closed (after ${Math.round(keepAlive.elapsedMs)} ms)`,
  );
  t.ok(keepAlive.elapsedMs < 10_000, "Node closes it at keepAliveTimeout (5 s) plus its 1 s margin");
});

t.test("lifecycle: stop before start, twice, idle connections, address", async (t) => {
  const db = await deadDatabasePool(t);
  const { log } = captureLogger();
  const never = createHealthServer({
    secrets: new SecretRegistry(),
    host: "127.0.0.1",
    port: 0,
    db,
    suppliers: SUPPLIERS,
    metrics: createMetrics({ processMetrics: false }),
    log,
  });
  await never.stop();
  await never.stop();
  t.equal(never.address, undefined);
  await t.rejects(never.start(), /stopped/, "a stopped server does not start again");

  const { server, port } = await startServer(t, db);
  t.same(server.address, { host: "127.0.0.1", port });
  t.same(await server.start(), { host: "127.0.0.1", port }, "start twice is the same start");
  const idle = net.connect({ host: "127.0.0.1", port });
  await new Promise((r) => idle.once("connect", r));
  const closed = new Promise((r) => idle.once("close", r));
  const stopStarted = performance.now();
  await Promise.all([server.stop(), server.stop()]);
  await closed;
  t.ok(performance.now() - stopStarted < 1_000, "idle connections do not hold stop()");
  t.equal(server.address, undefined);
  await t.rejects(fetchLocal(port, "/livez"), /ECONNREFUSED/);
});

t.test("a taken port rejects start() naming the address", async (t) => {
  const db = await deadDatabasePool(t);
  const { port } = await startServer(t, db);
  const { log } = captureLogger();
  const second = createHealthServer({
    secrets: new SecretRegistry(),
    host: "127.0.0.1",
    port,
    db,
    suppliers: SUPPLIERS,
    metrics: createMetrics({ processMetrics: false }),
    log,
  });
  const err = await second.start().then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(err instanceof InfraError, "an infrastructure error (exit 3)");
  t.match((err as Error).message, `health server cannot listen on 127.0.0.1:${port}: address already in use`);
  t.equal(second.address, undefined);
  await second.stop();
});

const otherInterface = Object.values(networkInterfaces())
  .flat()
  .find((i) => i !== undefined && i.family === "IPv4" && !i.internal);

t.test(
  "bound to 127.0.0.1, not reachable on another local interface",
  { skip: otherInterface ? false : "no non-loopback IPv4 interface on this machine" },
  async (t) => {
    const other = otherInterface!;
    const { port } = await startServer(t, await deadDatabasePool(t));
    t.equal((await fetchLocal(port, "/livez")).status, 200);
    await t.rejects(
      fetchLocal(port, "/livez", { host: other.address }),
      /ECONNREFUSED/,
      `not on ${other.address}`,
    );
  },
);
