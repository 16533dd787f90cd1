// Errors inside 200 answers, POST requests, the richer pagination keys and compressed answers,
// against the simulator on loopback (issue 16).
import t from "tap";
import type { IngestionError } from "../platform/errors.js";
import { startSimulator } from "../simulator/index.js";
import type { Simulator, SimulatorSupplierOptions } from "../simulator/types.js";
import { buildConnector, collectPages, simDefinition, walkContext, walkError } from "./test-support.js";

type Tap = { teardown(fn: () => unknown): void };

async function simulator(t: Tap, options: SimulatorSupplierOptions): Promise<Simulator> {
  const sim = await startSimulator({ suppliers: { acme: options } });
  t.teardown(() => sim.close());
  return sim;
}

const ETM_ERRORS = [
  { path: "status.code", in: [500, 503], then: "retry" },
  { path: "status.code", notIn: [200], then: "fail", code: "SUPPLIER", messagePath: "status.message" },
];

t.test("errors: a transient error inside a 200 is retried, then the walk completes", async (t) => {
  const sim = await simulator(t, {
    size: 50,
    pageSize: 20,
    envelope: true,
    faults: { bodyError: { code: 503, onPage: 2, times: 1 } },
  });
  const c = buildConnector(t, simDefinition(sim.baseUrl("acme"), { errors: ETM_ERRORS }));
  const pages = await collectPages(c.connector, walkContext(c.log));
  t.equal(pages.flatMap((p) => p.offers).length, 50);
  t.equal(pages[1]?.httpAttempts, 2, "page 2 took a retry");
  t.match(
    await c.metrics.registry.metrics(),
    /ingestion_http_retries_total\{supplier="acme",reason="supplier"\} 1/,
  );
});

t.test("errors: a permanent error fails the step with its code and the supplier's message", async (t) => {
  const sim = await simulator(t, {
    size: 50,
    pageSize: 20,
    envelope: true,
    faults: { bodyError: { code: 404, message: "no such price list", onPage: 2 } },
  });
  const c = buildConnector(t, simDefinition(sim.baseUrl("acme"), { errors: ETM_ERRORS }));
  const err = (await walkError(c.connector, walkContext(c.log))) as IngestionError;
  t.equal(err.code, "SUPPLIER");
  t.match(err.message, /status\.code = 404.*no such price list/);
  t.equal(err.attempts, 1, "not retried");
  const plain = buildConnector(
    t,
    simDefinition(sim.baseUrl("acme"), { errors: [{ path: "status.code", notIn: [200], then: "fail" }] }),
  );
  t.equal(((await walkError(plain.connector, walkContext(plain.log))) as IngestionError).code, "CONTRACT");
});

t.test("errors: equals, exists and status conditions", async (t) => {
  const sim = await simulator(t, {
    size: 30,
    pageSize: 20,
    envelope: true,
    faults: { bodyError: { code: 7, onPage: 1 } },
  });
  const equals = buildConnector(
    t,
    simDefinition(sim.baseUrl("acme"), { errors: [{ path: "status.code", equals: "7", then: "fail" }] }),
  );
  t.match(
    ((await walkError(equals.connector, walkContext(equals.log))) as Error).message,
    /status\.code = 7/,
  );
  const missing = buildConnector(
    t,
    simDefinition(sim.baseUrl("acme"), {
      errors: [{ path: "data", exists: false, then: "fail", code: "SUPPLIER" }],
    }),
  );
  t.equal(
    ((await walkError(missing.connector, walkContext(missing.log))) as IngestionError).code,
    "SUPPLIER",
  );

  // A 404 with a body the supplier explains: status and path together.
  sim.setFaults("acme", { status: { code: 404 } });
  const both = buildConnector(
    t,
    simDefinition(sim.baseUrl("acme"), {
      errors: [
        { status: [404], path: "error", exists: true, then: "fail", code: "SUPPLIER", messagePath: "error" },
      ],
    }),
  );
  const err = (await walkError(both.connector, walkContext(both.log))) as IngestionError;
  t.equal(err.code, "SUPPLIER");
  t.match(err.message, /simulated status 404/);
  // Without a rule for it the status keeps its usual meaning.
  const none = buildConnector(t, simDefinition(sim.baseUrl("acme")));
  t.equal(((await walkError(none.connector, walkContext(none.log))) as IngestionError).code, "HTTP_404");
});

t.test("errors: conditions that do not match leave a page alone", async (t) => {
  const sim = await simulator(t, { size: 45, pageSize: 20, envelope: true });
  const c = buildConnector(t, simDefinition(sim.baseUrl("acme"), { errors: ETM_ERRORS }));
  const pages = await collectPages(c.connector, walkContext(c.log));
  t.equal(pages.flatMap((p) => p.offers).length, 45);
  t.ok(pages.every((p) => p.httpAttempts === 1));
});

t.test("POST with a JSON body and with a form", async (t) => {
  const sim = await simulator(t, { size: 45, pageSize: 20, method: "POST" });
  const json = buildConnector(
    t,
    simDefinition(sim.baseUrl("acme"), {
      request: { method: "POST", path: "/v1/offers", body: { filter: { active: true }, fields: ["price"] } },
    }),
  );
  const pages = await collectPages(json.connector, walkContext(json.log));
  t.equal(pages.flatMap((p) => p.offers).length, 45);
  const bodies = sim.stats("acme").bodies;
  t.equal(bodies.length, 4, "every page was a POST with a body");
  t.same(JSON.parse(bodies[0]?.body ?? ""), { filter: { active: true }, fields: ["price"] });
  t.equal(bodies[0]?.contentType, "application/json");

  sim.resetStats("acme");
  const form = buildConnector(
    t,
    simDefinition(sim.baseUrl("acme"), {
      request: { method: "POST", path: "/v1/offers", form: { type: "cli", q: "a b&c" } },
    }),
  );
  await collectPages(form.connector, walkContext(form.log));
  const sent = sim.stats("acme").bodies[0];
  t.equal(sent?.contentType, "application/x-www-form-urlencoded");
  t.same(Object.fromEntries(new URLSearchParams(sent?.body)), { type: "cli", q: "a b&c" });

  // A GET to the POST-only route is refused, as the real API would.
  const get = buildConnector(t, simDefinition(sim.baseUrl("acme")));
  t.equal(((await walkError(get.connector, walkContext(get.log))) as IngestionError).code, "HTTP_405");
});

t.test("pagination: page with sizeParam/size and totalPagesPath stops after the last page", async (t) => {
  const sim = await simulator(t, { size: 45, pagination: "total-pages", sizeParam: "per_page" });
  const c = buildConnector(
    t,
    simDefinition(sim.baseUrl("acme"), {
      pagination: {
        type: "page",
        param: "page",
        start: 1,
        sizeParam: "per_page",
        size: 20,
        totalPagesPath: "meta.total_pages",
      },
    }),
  );
  const pages = await collectPages(c.connector, walkContext(c.log));
  t.same(
    pages.map((p) => p.offers.length),
    [20, 20, 5],
    "three pages, no empty fourth request",
  );
  t.equal(sim.stats("acme").requests, 3);
  t.ok(sim.stats("acme").urls.every((u) => u.includes("per_page=20")));
  t.equal(sim.stats("acme").walksCompleted, 1);
});

t.test("pagination: offset with totalPath stops at the total", async (t) => {
  const sim = await simulator(t, { size: 40, pagination: "offset-total" });
  const c = buildConnector(
    t,
    simDefinition(sim.baseUrl("acme"), {
      pagination: {
        type: "offset",
        offsetParam: "offset",
        limitParam: "limit",
        limit: 20,
        totalPath: "meta.total",
      },
    }),
  );
  const pages = await collectPages(c.connector, walkContext(c.log));
  t.same(
    pages.map((p) => p.offers.length),
    [20, 20],
    "a full last page ends the walk without an empty request",
  );
  t.equal(sim.stats("acme").requests, 2);
});

t.test("pagination: Stripe-style has_more with starting_after=<last id>", async (t) => {
  const sim = await simulator(t, { size: 55, pageSize: 20, pagination: "stripe" });
  const c = buildConnector(
    t,
    simDefinition(sim.baseUrl("acme"), {
      records: { path: "data" },
      pagination: {
        type: "cursor",
        param: "starting_after",
        lastRecordPath: "article",
        hasMorePath: "has_more",
      },
    }),
  );
  const pages = await collectPages(c.connector, walkContext(c.log));
  const skus = pages.flatMap((p) => p.offers.map((o) => o.sku));
  t.equal(skus.length, 55);
  t.equal(new Set(skus).size, 55, "no record twice");
  t.equal(sim.stats("acme").requests, 3);
  t.equal(sim.stats("acme").walksCompleted, 1);
});

t.test("pagination: cursor from a response header", async (t) => {
  const sim = await simulator(t, { size: 50, pageSize: 20, pagination: "cursor-header" });
  const c = buildConnector(
    t,
    simDefinition(sim.baseUrl("acme"), {
      pagination: { type: "cursor", param: "cursor", cursorHeader: "X-Next-Cursor" },
    }),
  );
  const pages = await collectPages(c.connector, walkContext(c.log));
  t.equal(pages.flatMap((p) => p.offers).length, 50);
  t.equal(sim.stats("acme").requests, 3);
});

t.test("pagination: hasMorePath false stops a page walk", async (t) => {
  const sim = await simulator(t, { size: 45, pageSize: 20, pagination: "total-pages" });
  const c = buildConnector(
    t,
    simDefinition(sim.baseUrl("acme"), {
      pagination: { type: "page", param: "page", start: 1, hasMorePath: "meta.has_more" },
    }),
  );
  const pages = await collectPages(c.connector, walkContext(c.log));
  t.same(
    pages.map((p) => p.offers.length),
    [20, 20, 5],
  );
  t.equal(sim.stats("acme").requests, 3, "no empty page was asked for");
});

t.test("pagination: a walk that does not advance fails CONTRACT", async (t) => {
  // The header cursor always points back at the second page: page 3 would be page 2 again.
  const sim = await simulator(t, {
    size: 100,
    pageSize: 20,
    pagination: "cursor-header",
    faults: { cursorValue: Buffer.from("p:20").toString("base64url") },
  });
  const c = buildConnector(
    t,
    simDefinition(sim.baseUrl("acme"), {
      pagination: { type: "cursor", param: "cursor", cursorHeader: "X-Next-Cursor" },
    }),
  );
  const seen: number[] = [];
  const err = (await (async () => {
    try {
      for await (const page of c.connector.walk(walkContext(c.log))) seen.push(page.seq);
    } catch (e) {
      return e;
    }
    return undefined;
  })()) as IngestionError;
  t.equal(err?.code, "CONTRACT");
  t.match(err.message, /does not advance/);
  t.same(seen, [1, 2], "the pages before the loop were yielded");
  t.equal(sim.stats("acme").requests, 2, "the repeated page was never requested");

  // A last record without the cursor field is CONTRACT too.
  const sim2 = await simulator(t, { size: 55, pageSize: 20, pagination: "stripe" });
  const c2 = buildConnector(
    t,
    simDefinition(sim2.baseUrl("acme"), {
      records: { path: "data" },
      pagination: { type: "cursor", param: "starting_after", lastRecordPath: "id", hasMorePath: "has_more" },
    }),
  );
  t.equal(((await walkError(c2.connector, walkContext(c2.log))) as IngestionError).code, "CONTRACT");
});

t.test("compression: gzip, deflate (zlib and raw) and br answers are decoded", async (t) => {
  for (const compression of ["gzip", "deflate", "deflate-raw", "br"] as const) {
    const sim = await simulator(t, { size: 300, pageSize: 100, compression });
    const c = buildConnector(t, simDefinition(sim.baseUrl("acme"), { maxResponseBytes: 200_000 }));
    const pages = await collectPages(c.connector, walkContext(c.log));
    t.equal(pages.flatMap((p) => p.offers).length, 300, `${compression}: every offer`);
  }
});

t.test("compression: maxResponseBytes counts decompressed bytes", async (t) => {
  const sim = await simulator(t, { size: 300, pageSize: 100, compression: "gzip" });
  // A page is about 12 kB of JSON and well under 2 kB gzipped.
  const c = buildConnector(t, simDefinition(sim.baseUrl("acme"), { maxResponseBytes: 4_000 }));
  const err = (await walkError(c.connector, walkContext(c.log))) as IngestionError;
  t.equal(err.code, "CONTRACT");
  t.match(err.message, /maxResponseBytes \(4000\)/);
});

t.test("compression: a decompression bomb is refused CONTRACT with bounded memory", async (t) => {
  const sim = await simulator(t, { size: 50, pageSize: 20, faults: { bombOnPage: 1 } });
  const c = buildConnector(t, simDefinition(sim.baseUrl("acme")));
  const err = (await walkError(c.connector, walkContext(c.log))) as IngestionError;
  t.equal(err.code, "CONTRACT");
  t.match(err.message, /more than 100:1/);
  t.equal(err.attempts, 1, "not retried");
  // The body inflates to 16 MiB (under the default 50 MiB cap); the ratio stops it early, so
  // what was buffered is bounded by 100 x what had arrived, not by the inflated size.
  const inflated = Number(/\((\d+) bytes from (\d+)\)/.exec(err.message)?.[1]);
  t.ok(inflated < 4 * 1024 * 1024, `refused after ${inflated} inflated bytes, not 16 MiB`);
});
