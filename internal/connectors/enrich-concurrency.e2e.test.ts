// Enrichment requests (docs/connectors.md, Enrichment) run up to rateLimit.maxConcurrency at once, measured by
// the simulator's own in-flight counter over loopback HTTP; a failing one ends the step.
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { isIngestionError } from "../platform/errors.js";
import { skuOf } from "../simulator/catalog.js";
import { startSimulator } from "../simulator/server.js";
import type { Simulator } from "../simulator/types.js";
import { connectorDefinitionSchema } from "./schema/connector-schema.js";
import { buildConnector, collectPages, walkContext, walkError } from "./test-support.js";

const N = 12;
const LATENCY_MS = 150;

let sim: Simulator;
t.before(async () => {
  sim = await startSimulator();
});
t.teardown(() => sim.close());

/** Prices from one `getprice` list; stock per reference (batch 1), so N enrichment requests. */
function definition(name: string, maxConcurrency: number) {
  return connectorDefinitionSchema.parse({
    baseUrl: sim.baseUrl(name),
    rateLimit: { requestsPerSecond: 1000, burst: 1000, maxConcurrency },
    retry: { maxAttempts: 2, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 1000 },
    skus: { from: "file", file: "skus.txt", batch: 45 },
    request: { path: "/new-api/JSON/getprice", query: { commercialRef: "{skus}" } },
    records: { path: "data" },
    fields: { sku: "commercialRef", price: "price", currency: "currency" },
    enrich: [
      {
        request: { path: "/new-api/JSON/getstock", query: { commercialRef: "{sku}" } },
        records: { path: "data" },
        key: "commercialRef",
        fields: { stock: { jmespath: "sum(stocks[].count)" } },
      },
    ],
  });
}

/** A walk of the N references, one batch of the SKU file. */
async function walk(t: Parameters<typeof buildConnector>[0], name: string, maxConcurrency: number) {
  sim.configure(name, { size: N, profile: "systeme", faults: { latencyMs: LATENCY_MS } });
  const dir = await mkdtemp(join(tmpdir(), "enrich-"));
  await writeFile(join(dir, "skus.txt"), Array.from({ length: N }, (_, i) => skuOf(name, i)).join("\n"));
  const { connector, log } = buildConnector(t, definition(name, maxConcurrency), {
    supplier: name,
    connectorsDir: dir,
  });
  return { connector, log };
}

for (const maxConcurrency of [1, 3]) {
  t.test(`maxConcurrency ${maxConcurrency}: at most that many enrichment requests in flight`, async (t) => {
    const name = `conc${maxConcurrency}`;
    const { connector, log } = await walk(t, name, maxConcurrency);
    const started = Date.now();
    const pages = await collectPages(connector, walkContext(log));
    const elapsed = Date.now() - started;
    const offers = pages.flatMap((p) => p.offers);
    t.equal(offers.length, N);
    t.ok(
      offers.every((o) => typeof o.stock === "number"),
      "every offer got its stock",
    );
    const stats = sim.stats(name);
    t.equal(stats.requests, 1 + N, "one price list, one stock request per reference");
    t.equal(stats.maxConcurrency, maxConcurrency, `the simulator saw ${maxConcurrency} in flight at most`);
    // N requests of LATENCY_MS each, maxConcurrency at a time, after the price request.
    const floor = (1 + Math.ceil(N / maxConcurrency)) * LATENCY_MS;
    t.ok(elapsed >= floor, `took ${elapsed} ms, at least ${floor} ms`);
    if (maxConcurrency > 1) t.ok(elapsed < (1 + N) * LATENCY_MS, `faster than one at a time (${elapsed} ms)`);
  });
}

t.test("a failing enrichment request fails the step and stops the others", async (t) => {
  const name = "concfail";
  const { connector, log } = await walk(t, name, 3);
  // The 5th request (the 4th enrichment) answers 400, which is not retried.
  sim.setFaults(name, { latencyMs: LATENCY_MS, status: { code: 400, onPage: 5, times: 1 } });
  const err = await walkError(connector, walkContext(log));
  t.ok(isIngestionError(err));
  t.match((err as Error).message, /^enrich\.0: /);
  t.match(err, { code: "HTTP_400" });
  t.ok(sim.stats(name).requests < 1 + N, `requests stopped after the failure (${sim.stats(name).requests})`);
});
