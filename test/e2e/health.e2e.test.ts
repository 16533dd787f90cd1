// /readyz and /metrics of real daemon processes (docs/operations.md, Health server).
import t from "tap";
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, type CliProcess, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector, until } from "../helpers/fixtures.js";

async function healthUrl(daemon: CliProcess): Promise<string> {
  const line = await daemon.waitForLog((l) => l.msg === "health and metrics server listening");
  return `http://${line.addr as string}`;
}

interface SupplierReadyz {
  status: string;
  last_success: string | null;
  age_seconds: number | null;
}
interface Readyz {
  status: string;
  suppliers: { [name: string]: SupplierReadyz };
}

async function getJson(url: string): Promise<{ status: number; body: Readyz }> {
  const res = await fetch(url);
  return { status: res.status, body: (await res.json()) as Readyz };
}

function metricValue(text: string, name: string, labels: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(" ").pop()) : Number.NaN;
}

t.test(
  "fresh boot: 200 with every supplier none; after a success, ok with its age; counters move",
  async (t) => {
    const url = await createTestDatabase(t);
    const sim = await startSimulator({
      suppliers: { etm: { size: 300, pageSize: 100, faults: { latencyMs: 400 } } },
    });
    t.teardown(() => sim.close());
    const dir = connectorsDir({ etm: simConnector(sim.baseUrl("etm")) });
    const daemon = startCli(
      t,
      [],
      baseEnv({ DATABASE_URL: url, SUPPLIER_SYNC_SUPPLIERS: "etm:1h", SUPPLIER_SYNC_CONNECTORS_DIR: dir }),
    );
    const base = await healthUrl(daemon);
    t.match(base, /^http:\/\/127\.0\.0\.1:\d+$/, "loopback by default");
    const fresh = await getJson(`${base}/readyz`);
    t.equal(fresh.status, 200);
    t.same(fresh.body.suppliers.etm as unknown, {
      status: "none",
      last_success: null,
      age_seconds: null,
      threshold_seconds: 7200,
    });
    const before = await (await fetch(`${base}/metrics`)).text();
    t.equal(
      metricValue(before, "ingestion_tick_attempt_total", 'supplier="etm",outcome="success"'),
      0,
      "starts at 0",
    );

    await daemon.waitForLog((l) => l.outcome === "success", 30_000);
    const ready = await until(
      async () => {
        const r = await getJson(`${base}/readyz`);
        return r.body.suppliers.etm?.status === "ok" ? r : undefined;
      },
      10_000,
      "etm ok",
    );
    t.equal(ready!.status, 200);
    t.ok(
      typeof ready!.body.suppliers.etm!.age_seconds === "number" &&
        ready!.body.suppliers.etm!.age_seconds < 30,
    );
    const after = await (await fetch(`${base}/metrics`)).text();
    t.equal(metricValue(after, "ingestion_tick_attempt_total", 'supplier="etm",outcome="success"'), 1);
    t.equal(metricValue(after, "ingestion_records_total", 'supplier="etm",result="inserted"'), 300);
    t.ok(metricValue(after, "ingestion_http_requests_total", 'supplier="etm",code="200"') >= 4);
    t.ok(metricValue(after, "ingestion_last_success_timestamp_seconds", 'supplier="etm"') > 0);
    daemon.child.kill("SIGTERM");
    t.equal(await daemon.exited(30_000), 0);
  },
);

t.test("a supplier answering 503 turns stale within 2 x interval + 5 s; the other stays ready", async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({ suppliers: { bad: { size: 20 }, good: { size: 20 } } });
  t.teardown(() => sim.close());
  const dir = connectorsDir({
    bad: simConnector(sim.baseUrl("bad")),
    good: simConnector(sim.baseUrl("good")),
  });
  const daemon = startCli(
    t,
    [],
    baseEnv({
      DATABASE_URL: url,
      SUPPLIER_SYNC_SUPPLIERS: "bad:2s,good:2s",
      SUPPLIER_SYNC_CONNECTORS_DIR: dir,
      SUPPLIER_SYNC_RETRY_BACKOFF: "1s",
    }),
  );
  const base = await healthUrl(daemon);
  await daemon.waitForLog((l) => l.outcome === "success" && l.supplier === "bad", 20_000);
  sim.setFaults("bad", { status: { code: 503 } });
  const brokeAt = Date.now();
  const stale = await until(
    async () => {
      const r = await getJson(`${base}/readyz`);
      return r.status === 503 ? r : undefined;
    },
    2 * 2_000 + 5_000 + 2_000,
    "503",
  );
  t.ok(Date.now() - brokeAt <= 2 * 2_000 + 5_000 + 1_000, `stale after ${Date.now() - brokeAt} ms`);
  t.equal(stale!.body.status, "stale");
  t.equal(stale!.body.suppliers.bad?.status, "stale");
  t.equal(stale!.body.suppliers.good?.status, "ok");
  const other = await getJson(`${base}/readyz/good`);
  t.equal(other.status, 200);
  t.equal((await getJson(`${base}/readyz/bad`)).status, 503);
  t.equal((await getJson(`${base}/readyz/nobody`)).status, 404);
  daemon.child.kill("SIGTERM");
  t.equal(await daemon.exited(30_000), 0);
});

t.test("two daemons report the same last_success, whichever did the work", async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({ suppliers: { etm: { size: 50 } } });
  t.teardown(() => sim.close());
  const dir = connectorsDir({ etm: simConnector(sim.baseUrl("etm")) });
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
  });
  const a = startCli(t, [], env);
  const baseA = await healthUrl(a);
  await a.waitForLog((l) => l.outcome === "success", 20_000);
  const b = startCli(t, [], env);
  const baseB = await healthUrl(b);
  await b.waitForLog((l) => l.msg === "scheduler started", 20_000);
  const [ra, rb] = await until(
    async () => {
      const x = await getJson(`${baseA}/readyz/etm`);
      const y = await getJson(`${baseB}/readyz/etm`);
      return x.body.suppliers.etm?.last_success === y.body.suppliers.etm?.last_success ? [x, y] : undefined;
    },
    10_000,
    "equal last_success",
  );
  t.ok(ra.body.suppliers.etm?.last_success);
  t.equal(ra.body.suppliers.etm?.last_success, rb.body.suppliers.etm?.last_success);
  t.equal(rb.status, 200);
  a.child.kill("SIGTERM");
  b.child.kill("SIGTERM");
  t.equal(await a.exited(30_000), 0);
  t.equal(await b.exited(30_000), 0);
  // a succeeded in this slot, so b's catch-up finds nothing to do and arms the next slot.
  // Checked once b has stopped: its shutdown waits for every tick it started, and each
  // tick logs its outcome, so any work b did is in its log by now.
  t.ok(
    b.logs().some((l) => l.msg === "stopped"),
    "b shut down after draining its ticks",
  );
  t.notOk(
    b.logs().some((l) => l.outcome === "success"),
    "b did no work",
  );
  const bRuns = await query<{ n: number }>(
    url,
    "select count(*)::int as n from ingestion_runs where (owner->>'pid')::int = $1",
    [b.child.pid],
  );
  t.equal(bRuns[0]?.n, 0, "no run of b's in the database");
});
