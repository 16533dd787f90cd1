// Retries (docs/failure-modes.md, Suppliers) against the simulator: transient failures are retried with backoff up to
// maxAttempts, permanent ones cost exactly one request, Retry-After is honoured.
import t from "tap";
import { type SimulatorFaults, startSimulator } from "../simulator/index.js";
import { buildConnector, collectPages, simDefinition, walkContext, walkError } from "./test-support.js";

const MAX_ATTEMPTS = 3;

const transient: {
  name: string;
  faults: SimulatorFaults;
  code: string;
  reason: string;
  extra?: Record<string, unknown>;
}[] = [
  ...[408, 425, 500, 502, 503, 504].map((s) => ({
    name: String(s),
    faults: { status: { code: s, onPage: 1 } },
    code: `HTTP_${s}`,
    reason: `http_${s}`,
  })),
  { name: "429", faults: { status: { code: 429, onPage: 1 } }, code: "RATE_LIMITED", reason: "http_429" },
  { name: "connection reset", faults: { resetOnPage: 1 }, code: "NETWORK", reason: "network" },
  {
    name: "timeout",
    faults: { hangOnPage: 1 },
    code: "NETWORK",
    reason: "timeout",
    extra: { timeouts: { requestMs: 150 } },
  },
];

const permanent: { name: string; faults: SimulatorFaults; code: string }[] = [
  ...[400, 404, 422].map((s) => ({ name: String(s), faults: { status: { code: s } }, code: `HTTP_${s}` })),
  { name: "401", faults: { status: { code: 401 } }, code: "AUTH" },
  { name: "403", faults: { status: { code: 403 } }, code: "AUTH" },
  { name: "invalid JSON", faults: { invalidJsonOnPage: 1 }, code: "CONTRACT" },
  { name: "missing records path", faults: { missingRecordsPathOnPage: 1 }, code: "CONTRACT" },
];

t.test("transient failures are retried", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  for (const c of transient) {
    await t.test(`${c.name}: retried until it passes`, async (t) => {
      const name = `once-${c.name.replace(/\W/g, "")}`;
      const once: SimulatorFaults =
        "status" in c.faults && c.faults.status ? { status: { ...c.faults.status, times: 1 } } : c.faults;
      sim.configure(name, { size: 30, pageSize: 10, pagination: "page" });
      sim.setFaults(name, once);
      // Socket faults are cleared by the test between attempts: a fixed 300 ms backoff leaves room to do so.
      const slow =
        "status" in once ? {} : { retry: { maxAttempts: MAX_ATTEMPTS, baseDelayMs: 300, maxDelayMs: 300 } };
      const { connector, log, lines, metrics } = buildConnector(
        t,
        simDefinition(sim.baseUrl(name), { ...c.extra, ...slow }),
        { random: () => 1 },
      );
      // As the tick does: the run logger carries supplier and run_id, once, run_id a number.
      const walk = connector
        .walk(walkContext(log.child({ supplier: "acme", run_id: 42 })))
        [Symbol.asyncIterator]();
      if (!("status" in once)) {
        // Socket faults have no `times`: clear the fault once the first attempt has failed.
        const first = walk.next();
        await waitFor(() => lines.some((l) => l.includes("retrying")));
        sim.setFaults(name, {});
        const page = await first;
        t.equal(page.done, false);
        t.equal(page.value?.httpAttempts, 2, "page 1 took two requests");
      } else {
        const page = await walk.next();
        t.equal(page.value?.httpAttempts, 2, "page 1 took two requests");
      }
      for (let r = await walk.next(); !r.done; r = await walk.next()) t.equal(r.value.httpAttempts, 1);
      t.equal(sim.stats(name).walksCompleted, 1, "the walk completed");
      const retry = lines.map((l) => JSON.parse(l)).find((l) => l.msg === "request failed, retrying");
      t.match(retry, { supplier: "acme", run_id: 42, seq: 1, attempt: 1, reason: c.reason }, "retry logged");
      t.type(retry?.delay_ms, "number");
      const raw = lines.find((l) => l.includes("request failed, retrying")) ?? "";
      t.equal(raw.split('"run_id"').length - 1, 1, "run_id once in the line");
      t.equal(raw.split('"supplier"').length - 1, 1, "supplier once in the line");
      const retries = await metrics.httpRetries.get();
      t.equal(retries.values.find((v) => v.labels.reason === c.reason)?.value, 1, "httpRetries counted");
    });
    await t.test(`${c.name}: gives up after maxAttempts with the last cause`, async (t) => {
      const name = `always-${c.name.replace(/\W/g, "")}`;
      sim.configure(name, { size: 30, pageSize: 10, pagination: "page", faults: c.faults });
      const { connector, log } = buildConnector(
        t,
        simDefinition(sim.baseUrl(name), {
          ...c.extra,
          retry: { maxAttempts: MAX_ATTEMPTS, baseDelayMs: 5, maxDelayMs: 20 },
        }),
      );
      const err = (await walkError(connector, walkContext(log))) as { code: string; attempts: number };
      t.equal(err.code, c.code);
      t.equal(err.attempts, MAX_ATTEMPTS, "maxAttempts requests in all");
      sim.setFaults(name, {});
    });
  }
});

t.test("permanent failures are never retried", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  for (const c of permanent) {
    await t.test(c.name, async (t) => {
      const name = `perm-${c.name.replace(/\W/g, "")}`;
      sim.configure(name, { size: 30, pageSize: 10, pagination: "page", faults: c.faults });
      const { connector, log, lines } = buildConnector(t, simDefinition(sim.baseUrl(name)));
      const err = (await walkError(connector, walkContext(log))) as {
        code: string;
        attempts: number;
        message: string;
      };
      t.equal(err.code, c.code, err.message);
      t.equal(err.attempts, 1);
      t.equal(sim.stats(name).requests, 1, "exactly one request");
      t.notOk(
        lines.some((l) => l.includes("retrying")),
        "no retry logged",
      );
    });
  }
});

t.test("Retry-After is honoured", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());

  await t.test("Retry-After: 2 → next request at least 2 s later", async (t) => {
    sim.configure("ra", {
      size: 10,
      pageSize: 10,
      pagination: "none",
      faults: { retryAfter: { seconds: 2, times: 1 } },
    });
    const { connector, log, metrics } = buildConnector(
      t,
      simDefinition(sim.baseUrl("ra"), { pagination: { type: "none" } }),
    );
    const pages = await collectPages(connector, walkContext(log));
    t.equal(pages[0]?.offers.length, 10);
    const times = sim.stats("ra").requestTimes;
    t.equal(times.length, 2);
    const gap = (times[1] ?? 0) - (times[0] ?? 0);
    t.ok(gap >= 2_000, `second request ${gap} ms after the first`);
    const waited = (await metrics.rateLimitWait.get()).values[0]?.value ?? 0;
    t.ok(waited >= 1.5, `rate limiter pause counted (${waited.toFixed(2)} s)`);
  });

  await t.test("Retry-After as an HTTP date", async (t) => {
    sim.configure("rad", {
      size: 10,
      pagination: "none",
      faults: { retryAfter: { seconds: 2, httpDate: true, times: 1 } },
    });
    const { connector, log } = buildConnector(
      t,
      simDefinition(sim.baseUrl("rad"), { pagination: { type: "none" } }),
    );
    await collectPages(connector, walkContext(log));
    const times = sim.stats("rad").requestTimes;
    const gap = (times[1] ?? 0) - (times[0] ?? 0);
    // An HTTP date has 1 s resolution, so 2 s may be as little as just over 1 s.
    t.ok(gap >= 1_000, `second request ${gap} ms after the first`);
  });

  await t.test("Retry-After beyond maxRetryAfterMs fails at once", async (t) => {
    sim.configure("ral", { size: 10, pagination: "none", faults: { retryAfter: { seconds: 60 } } });
    const { connector, log } = buildConnector(
      t,
      simDefinition(sim.baseUrl("ral"), { pagination: { type: "none" }, retry: { maxRetryAfterMs: 10_000 } }),
    );
    const started = Date.now();
    const err = (await walkError(connector, walkContext(log))) as {
      code: string;
      attempts: number;
      message: string;
    };
    t.equal(err.code, "RATE_LIMITED");
    t.match(err.message, /maxRetryAfterMs/);
    t.equal(err.attempts, 1);
    t.ok(Date.now() - started < 1_000, "no waiting");
    t.equal(sim.stats("ral").requests, 1);
  });
});

t.test("all attempts of a page are bounded by pageMs", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  sim.configure("dl", { size: 10, pagination: "none", faults: { hangOnPage: 1 } });
  const { connector, log } = buildConnector(
    t,
    simDefinition(sim.baseUrl("dl"), {
      pagination: { type: "none" },
      timeouts: { requestMs: 10_000, pageMs: 300 },
      retry: { maxAttempts: 10 },
    }),
  );
  const started = Date.now();
  const err = (await walkError(connector, walkContext(log))) as { code: string };
  t.equal(err.code, "DEADLINE");
  t.ok(Date.now() - started < 2_000, "ended near the page deadline");
});

async function waitFor(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}
