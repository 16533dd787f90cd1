// Pages stream with a prefetch of exactly one, and stopping (the consumer or the
// signal) aborts the request in flight at once.
import t from "tap";
import { startSimulator } from "../simulator/index.js";
import { buildConnector, simDefinition, waitFor, walkContext } from "./test-support.js";

t.test("at most one page ahead; return() aborts the prefetch", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  sim.configure("pf", { size: 100, pageSize: 10, pagination: "page", faults: { hangOnPage: 3 } });
  const { connector, log } = buildConnector(t, simDefinition(sim.baseUrl("pf")));
  const walk = connector.walk(walkContext(log))[Symbol.asyncIterator]();
  const first = await walk.next();
  t.equal(first.value?.seq, 1);
  // Page 2 answered in full (not merely asked for): from here a walk that read further
  // ahead would ask for page 3 at once.
  await waitFor(
    () => sim.stats("pf").requests === 2 && sim.stats("pf").concurrency === 0,
    "page 2 prefetched and answered",
  );
  // Page 2 is buffered; nothing more may be requested until the consumer takes it.
  await new Promise((r) => setTimeout(r, 200));
  t.equal(sim.stats("pf").requests, 2, "no page 3 while page 2 is not consumed");
  const second = await walk.next();
  t.equal(second.value?.seq, 2);
  await waitFor(() => sim.stats("pf").concurrency === 1, "page 3 in flight (hanging)");
  const started = Date.now();
  await walk.return?.(undefined);
  await waitFor(() => sim.stats("pf").concurrency === 0, "page 3 request aborted");
  t.ok(Date.now() - started < 1_000, "aborted at once");
  t.equal(sim.stats("pf").requests, 3);
});

t.test("the walk signal aborts the request in flight with its reason", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  sim.configure("ab", { size: 100, pageSize: 10, pagination: "page", faults: { hangOnPage: 1 } });
  const { connector, log } = buildConnector(t, simDefinition(sim.baseUrl("ab")));
  const controller = new AbortController();
  const walk = connector.walk(walkContext(log, controller.signal))[Symbol.asyncIterator]();
  const next = walk.next();
  await waitFor(() => sim.stats("ab").concurrency === 1, "page 1 in flight");
  const reason = new Error("lease lost");
  const started = Date.now();
  controller.abort(reason);
  await t.rejects(next, reason, "rejects with the signal's reason");
  t.ok(Date.now() - started < 1_000, "at once");
  await waitFor(() => sim.stats("ab").concurrency === 0, "server saw the request end");
  t.equal(sim.stats("ab").requests, 1, "not retried after the abort");
});

t.test("close() is idempotent and later walks fail cleanly", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  sim.configure("cl", { size: 5, pagination: "none" });
  const { connector, log } = buildConnector(
    t,
    simDefinition(sim.baseUrl("cl"), { pagination: { type: "none" } }),
  );
  for await (const _ of connector.walk(walkContext(log))) {
    // one page
  }
  await connector.close();
  await connector.close();
  await t.rejects(
    (async () => {
      for await (const _ of connector.walk(walkContext(log))) {
        // never
      }
    })(),
    { code: "SHUTDOWN" },
  );
});
