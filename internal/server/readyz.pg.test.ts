/**
 * `/readyz` and `/metrics` over a real loopback HTTP server against a real database,
 * with runs written directly into `ingestion_runs`.
 */
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import type { SupplierConfig } from "../config/types.js";
import { TICK_OUTCOMES } from "../ingestion/ports.js";
import { createMetrics, RECORD_RESULTS } from "../observability/metrics.js";
import { ManualClock } from "../platform/clock.js";
import { SecretRegistry } from "../platform/redact.js";
import { createHealthServer } from "./server.js";
import {
  captureLogger,
  checkPrometheusText,
  fetchLocal,
  insertSuccess,
  type Teardown,
} from "./test-support.js";

const HOUR = 3_600_000;
const NOW = Date.parse("2025-03-01T12:00:00Z");
const SUPPLIERS: SupplierConfig[] = [
  { name: "etm", intervalMs: 6 * HOUR, enabled: true },
  { name: "iek", intervalMs: 12 * HOUR, enabled: true },
  { name: "systeme", intervalMs: 6 * HOUR, enabled: false },
];

/** The metric names of docs/operations.md, Prometheus metrics, verbatim. */
const PUBLIC_METRICS = [
  "ingestion_tick_attempt_total",
  "ingestion_tick_duration_seconds",
  "ingestion_last_success_timestamp_seconds",
  "ingestion_last_success_age_seconds",
  "ingestion_skus_processed_total",
  "ingestion_records_total",
  "ingestion_http_requests_total",
  "ingestion_http_request_duration_seconds",
  "ingestion_http_retries_total",
  "ingestion_rate_limit_wait_seconds_total",
  "ingestion_runs_recovered_total",
  "ingestion_auth_logins_total",
];

async function setup(t: Teardown, freshnessCacheMs = 0) {
  const db = testPool(t, await createTestDatabase(t));
  const clock = new ManualClock(NOW);
  const metrics = createMetrics();
  for (const s of SUPPLIERS) if (s.enabled) metrics.initSupplier(s.name);
  const server = createHealthServer({
    secrets: new SecretRegistry(),
    host: "127.0.0.1",
    port: 0,
    db,
    suppliers: SUPPLIERS,
    metrics,
    log: captureLogger().log,
    clock,
    freshnessCacheMs,
  });
  t.teardown(() => server.stop());
  const { port } = await server.start();
  const get = async (path: string) => {
    const res = await fetchLocal(port, path);
    return { ...res, json: res.headers["content-type"]?.includes("json") ? JSON.parse(res.body) : undefined };
  };
  return { db, clock, metrics, get };
}

const ago = (ms: number) => new Date(NOW - ms);

t.test("fresh boot: 200, every enabled supplier none", async (t) => {
  const { get } = await setup(t);
  const res = await get("/readyz");
  t.equal(res.status, 200);
  t.strictSame(res.json, {
    status: "ok",
    database: "ok",
    suppliers: {
      etm: { status: "none", last_success: null, age_seconds: null, threshold_seconds: 43_200 },
      iek: { status: "none", last_success: null, age_seconds: null, threshold_seconds: 86_400 },
    },
  });
});

t.test("a recent success is ok with its age; an old one is stale and names the supplier", async (t) => {
  const { db, get } = await setup(t);
  await insertSuccess(db, "etm", ago(10 * 60_000));
  await insertSuccess(db, "iek", ago(2 * HOUR));
  const ok = await get("/readyz");
  t.equal(ok.status, 200);
  t.strictSame(ok.json.suppliers.etm, {
    status: "ok",
    last_success: "2025-03-01T11:50:00.000Z",
    age_seconds: 600,
    threshold_seconds: 43_200,
  });

  // Over 2 × 6 h: etm goes stale, iek (12 h interval) is still fresh.
  await db.query("delete from ingestion_runs where supplier = 'etm'");
  await insertSuccess(db, "etm", ago(13 * HOUR));
  const stale = await get("/readyz");
  t.equal(stale.status, 503);
  t.equal(stale.json.status, "stale");
  t.equal(stale.json.database, "ok");
  t.same(
    Object.entries(stale.json.suppliers as Record<string, { status: string }>)
      .filter(([, v]) => v.status === "stale")
      .map(([k]) => k),
    ["etm"],
    "names the stale supplier",
  );
  t.equal(stale.json.suppliers.etm.age_seconds, 13 * 3_600);

  const iek = await get("/readyz/iek");
  t.equal(iek.status, 200, "another supplier's probe stays 200");
  t.same(Object.keys(iek.json.suppliers), ["iek"]);
  t.equal(iek.json.status, "ok");
  const etm = await get("/readyz/etm");
  t.equal(etm.status, 503);
  t.equal(etm.json.suppliers.etm.status, "stale");
  t.equal((await get("/readyz/systeme")).status, 404, "a disabled supplier is not reported");
});

t.test("freshness is cached for freshnessCacheMs", async (t) => {
  const { db, clock, get } = await setup(t, 5_000);
  t.equal((await get("/readyz")).json.suppliers.etm.status, "none");
  await insertSuccess(db, "etm", ago(13 * HOUR));
  await clock.advance(4_000);
  const cached = await get("/readyz");
  t.equal(cached.status, 200, "inside the window the insert is not seen: no query was made");
  t.equal(cached.json.suppliers.etm.status, "none");
  await clock.advance(1_000);
  const fresh = await get("/readyz");
  t.equal(fresh.status, 503, "after the window the new run is read");
  t.equal(fresh.json.suppliers.etm.status, "stale");
});

t.test("ages move with the clock between reads of the same snapshot", async (t) => {
  const { db, clock, get } = await setup(t, 60_000);
  await insertSuccess(db, "etm", ago(12 * HOUR - 30_000));
  const before = await get("/readyz");
  t.equal(before.json.suppliers.etm.status, "ok");
  await clock.advance(30_000);
  const after = await get("/readyz");
  t.equal(after.json.suppliers.etm.age_seconds, 12 * 3_600, "age from the cached time, at this instant");
  t.equal(after.status, 503, "a supplier turns stale without a new query");
});

function sampleValue(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

t.test("/metrics: valid text, every public metric, label sets at 0, freshness refreshed", async (t) => {
  const { db, metrics, get } = await setup(t);
  await insertSuccess(db, "etm", ago(10 * 60_000));
  const res = await get("/metrics");
  t.equal(res.status, 200);
  t.equal(res.headers["content-type"], metrics.registry.contentType);

  const { problems, families } = checkPrometheusText(res.body);
  t.same(problems, [], "every line is valid Prometheus text");
  for (const name of PUBLIC_METRICS) t.ok(families.has(name), `${name} is exposed`);
  t.equal(families.get("ingestion_tick_duration_seconds"), "histogram");
  t.equal(families.get("ingestion_http_request_duration_seconds"), "histogram");
  t.ok(families.has("process_cpu_user_seconds_total"), "process defaults");

  for (const supplier of ["etm", "iek"]) {
    for (const outcome of TICK_OUTCOMES) {
      t.equal(
        sampleValue(res.body, `ingestion_tick_attempt_total{supplier="${supplier}",outcome="${outcome}"}`),
        0,
        `${supplier}/${outcome} starts at 0`,
      );
    }
    for (const result of RECORD_RESULTS) {
      t.equal(sampleValue(res.body, `ingestion_records_total{supplier="${supplier}",result="${result}"}`), 0);
    }
    t.equal(sampleValue(res.body, `ingestion_runs_recovered_total{supplier="${supplier}"}`), 0);
    for (const result of ["ok", "failed"]) {
      t.equal(
        sampleValue(res.body, `ingestion_auth_logins_total{supplier="${supplier}",result="${result}"}`),
        0,
      );
    }
  }
  t.notMatch(res.body, /supplier="systeme"/, "no disabled supplier");

  t.equal(
    sampleValue(res.body, 'ingestion_last_success_timestamp_seconds{supplier="etm"}'),
    (NOW - 600_000) / 1000,
  );
  t.equal(sampleValue(res.body, 'ingestion_last_success_age_seconds{supplier="etm"}'), 600);
  t.equal(sampleValue(res.body, 'ingestion_last_success_timestamp_seconds{supplier="iek"}'), 0, "never: 0");
  t.equal(sampleValue(res.body, 'ingestion_last_success_age_seconds{supplier="iek"}'), -1, "never: -1");
});

t.test("two instances report the same freshness from the same table", async (t) => {
  const a = await setup(t);
  const shared = a.db;
  const metrics = createMetrics({ processMetrics: false });
  const other = createHealthServer({
    secrets: new SecretRegistry(),
    host: "127.0.0.1",
    port: 0,
    db: shared,
    suppliers: SUPPLIERS,
    metrics,
    log: captureLogger().log,
    clock: a.clock,
    freshnessCacheMs: 0,
  });
  t.teardown(() => other.stop());
  const { port } = await other.start();
  await insertSuccess(shared, "iek", ago(HOUR));
  const fromA = await a.get("/readyz");
  const fromB = JSON.parse((await fetchLocal(port, "/readyz")).body);
  t.same(fromB, fromA.json, "an instance that did no work reports the same");
  t.equal(fromB.suppliers.iek.status, "ok");
});
