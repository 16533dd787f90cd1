import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type pg from "pg";
import t from "tap";
import { createTestDatabase, type Teardown, testPool } from "../../test/helpers/db.js";
import { until } from "../../test/helpers/fixtures.js";
import { recordEvent } from "../events/outbox.js";
import { acquireLease } from "../lease/lease.js";
import { createMetrics } from "../observability/metrics.js";
import { createLogger } from "../platform/logger.js";
import { SecretRegistry } from "../platform/redact.js";
import { commitPage } from "../store/offers.js";
import { closeRun, startRun } from "../store/runs.js";
import { signature, WEBHOOK_LEASE, WebhookDelivery } from "./deliver.js";

const SECRET = "whsec-test-0123456789abcdef";
const OWNER = { hostname: "test-host", pid: 1, bootId: "boot" };

interface Received {
  id: string;
  body: string;
  signature: string;
}

/** A receiver on loopback; `answer` decides each response (it may never answer). */
async function receiver(
  t: Teardown,
  answer: (req: IncomingMessage, body: string, res: ServerResponse) => void,
): Promise<{ url: string; received: Received[]; server: Server }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      received.push({
        id: String(req.headers["x-supplier-sync-event-id"]),
        body,
        signature: String(req.headers["x-supplier-sync-signature"]),
      });
      answer(req, body, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hooks/supplier-sync?x=1`, received, server };
}

function delivery(
  t: Teardown,
  pool: pg.Pool,
  url: string,
  lines: string[],
  extra: { requestTimeoutMs?: number } = {},
) {
  const secrets = new SecretRegistry();
  secrets.add(SECRET);
  const log = createLogger({ level: "debug", secrets, destination: { write: (s: string) => lines.push(s) } });
  const metrics = createMetrics({ processMetrics: false });
  const d = new WebhookDelivery({
    pool,
    webhook: { url: new URL(url), secret: SECRET },
    acquireLease: () => acquireLease(pool, WEBHOOK_LEASE, log),
    log,
    metrics,
    retentionMs: 7 * 86_400_000,
    backoffMs: 50,
    maxBackoffMs: 200,
    pollMs: 50,
    ...extra,
  });
  t.teardown(() => d.stop());
  return { d, metrics };
}

async function metricValue(metrics: ReturnType<typeof createMetrics>, name: string, label?: string) {
  const m = (await metrics.registry.getMetricsAsJSON()).find((x) => x.name === name);
  const v = (m?.values as { value: number; labels: Record<string, string> }[] | undefined)?.find(
    (x) => label === undefined || x.labels.result === label,
  );
  return v?.value;
}

t.test(
  "signed, in order per supplier, retried after failures, at least once; the secret is never logged",
  async (t) => {
    const pool = testPool(t, await createTestDatabase(t), 6);
    // etm's first event fails twice (500, then a redirect), then everything succeeds.
    let etmFailures = 0;
    const { url, received } = await receiver(t, (_req, body, res) => {
      const event = JSON.parse(body) as { supplier: string; n: number };
      if (event.supplier === "etm" && event.n === 1 && etmFailures < 2) {
        etmFailures++;
        res.writeHead(etmFailures === 1 ? 500 : 302, { location: "http://example.com/" }).end();
        return;
      }
      res.writeHead(204).end();
    });
    for (let n = 1; n <= 3; n++) {
      await recordEvent(pool, { type: "supplier.paused", supplier: "etm", payload: { n } });
      await recordEvent(pool, { type: "supplier.paused", supplier: "iek", payload: { n } });
    }
    const lines: string[] = [];
    const { d, metrics } = delivery(t, pool, url, lines);
    d.start();
    await until(
      async () =>
        (await pool.query("select 1 from ingestion_events where delivered_at is null")).rowCount === 0,
      20_000,
      "every event delivered",
    );
    for (const r of received) {
      t.equal(r.signature, signature(SECRET, r.body), `event ${r.id} signed over its raw body`);
    }
    const order = (supplier: string) =>
      received
        .map((r) => JSON.parse(r.body) as { supplier: string; n: number })
        .filter((e) => e.supplier === supplier)
        .map((e) => e.n);
    t.same(order("etm"), [1, 1, 1, 2, 3], "etm in order: its first event retried before the next is sent");
    t.same(order("iek"), [1, 2, 3], "iek was not held up by etm's failures");
    const rows = await pool.query<{ attempts: number; last_error: string | null }>(
      "select attempts, last_error from ingestion_events where supplier = 'etm' order by id",
    );
    t.same(
      rows.rows.map((r) => r.attempts),
      [3, 1, 1],
    );
    t.equal(await metricValue(metrics, "ingestion_webhook_deliveries_total", "delivered"), 6);
    t.equal(await metricValue(metrics, "ingestion_webhook_deliveries_total", "failed"), 2);
    await until(
      async () => (await metricValue(metrics, "ingestion_webhook_backlog")) === 0,
      5_000,
      "backlog 0",
    );
    const log = lines.join("");
    t.match(log, /webhook delivery failed; will retry/);
    t.match(log, /HTTP 302: redirects are not followed/);
    t.notMatch(log, SECRET, "the secret is not in the logs");
    t.equal(
      received.filter((r) => r.body.includes("example.com")).length,
      0,
      "the redirect was not followed",
    );
  },
);

t.test("two replicas: one delivers at a time (the @webhooks lease), each event once", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 8);
  const { url, received } = await receiver(t, (_req, _body, res) => res.writeHead(200).end("ok"));
  const a = delivery(t, pool, url, []);
  const b = delivery(t, pool, url, []);
  a.d.start();
  b.d.start();
  for (let n = 1; n <= 20; n++) {
    await recordEvent(pool, { type: "run.closed", supplier: `s${n % 3}`, payload: { n } });
  }
  await until(
    async () =>
      (await pool.query("select 1 from ingestion_events where delivered_at is null")).rowCount === 0,
    20_000,
    "every event delivered",
  );
  const ids = received.map((r) => r.id);
  t.equal(ids.length, 20);
  t.equal(new Set(ids).size, 20, "no event sent twice");
});

t.test("a receiver that hangs does not delay a tick's writes (measured)", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 6);
  const { url, received } = await receiver(t, () => {
    // never answers
  });
  const { d } = delivery(t, pool, url, [], { requestTimeoutMs: 30_000 });
  const client = await pool.connect();
  t.teardown(() => client.release());
  const walk = async (slot: number) => {
    const started = performance.now();
    const runId = await startRun(client, {
      supplier: "etm",
      slotStart: new Date(slot),
      trigger: "forced",
      owner: OWNER,
    });
    const offers = Array.from({ length: 500 }, (_, i) => ({
      sku: `S-${String(i).padStart(4, "0")}`,
      name: "x",
      price: `${slot + 1}.00`,
      currency: "EUR",
      stock: 1,
    }));
    await commitPage(client, {
      runId,
      supplier: "etm",
      page: { seq: 1, offers, rejects: [], httpAttempts: 1 },
    });
    await closeRun(client, { runId, walkComplete: true, errorCode: null, errorMessage: null });
    return performance.now() - started;
  };
  const baseline: number[] = [];
  for (let i = 0; i < 5; i++) baseline.push(await walk(i * 1000));
  d.start();
  await until(() => received.length > 0, 10_000, "the receiver to hold a request");
  const hanging: number[] = [];
  for (let i = 5; i < 10; i++) hanging.push(await walk(i * 1000));
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] as number;
  t.comment(
    `walk of 500 offers + close: median ${median(baseline).toFixed(1)} ms without delivery, ${median(hanging).toFixed(1)} ms while the receiver hangs`,
  );
  t.ok(median(hanging) < median(baseline) * 3 + 200, "ticks are not held up by the hanging receiver");
  t.equal(received.length, 1, "one request hangs; the supplier's later events wait behind it");
  const pending = await pool.query(
    "select count(*)::int as n from ingestion_events where delivered_at is null",
  );
  t.equal(pending.rows[0].n, 10, "every close wrote its event; none lost");
});
