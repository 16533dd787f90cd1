// docs/operations.md, Scale-out, issue 19: work flows to replicas with capacity. 12 slow suppliers (a walk
// takes ~4 s), SUPPLIER_SYNC_MAX_CONCURRENT_TICKS=2: three replicas finish the slot's
// walks at least 2.5x sooner than one, and no replica ever holds more leases than it
// has ticks (a busy replica takes no lease it cannot use at once).
//
// Every supplier's first page hangs until every replica holds its two leases, so all
// replicas start from the same instant whatever their process start-up times; the
// clock runs from that release to the last walk's end (finished_at).
import t, { type Test } from "tap";
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector, until } from "../helpers/fixtures.js";

const SUPPLIERS = Array.from({ length: 12 }, (_, i) => `slow${String(i).padStart(2, "0")}`);
const TICKS = 2;
const PAGE_LATENCY_MS = 2_000;

interface SlotTiming {
  /** Release of the held first pages to the last walk's end. */
  elapsedMs: number;
  /** Most leases any one replica held at once (sampled from pg_locks every 50 ms). */
  peakLeases: number[];
  successesByReplica: number[];
}

async function slotWithReplicas(t: Test, replicas: number): Promise<SlotTiming> {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({
    suppliers: Object.fromEntries(
      SUPPLIERS.map((n) => [n, { size: 5, faults: { hangOnPage: 1, latencyMs: PAGE_LATENCY_MS } }]),
    ),
  });
  t.teardown(() => sim.close());
  const dir = connectorsDir(Object.fromEntries(SUPPLIERS.map((n) => [n, simConnector(sim.baseUrl(n))])));
  const daemons = Array.from({ length: replicas }, (_, i) =>
    startCli(
      t,
      [],
      baseEnv({
        // One application_name per replica: pg_stat_activity tells their sessions apart.
        DATABASE_URL: `${url}?application_name=replica-${i}`,
        SUPPLIER_SYNC_SUPPLIERS: SUPPLIERS.map((n) => `${n}:1h`).join(","),
        SUPPLIER_SYNC_CONNECTORS_DIR: dir,
        SUPPLIER_SYNC_MAX_CONCURRENT_TICKS: String(TICKS),
        SUPPLIER_SYNC_LOG_LEVEL: "warn",
      }),
    ),
  );
  const peak = new Map<string, number>();
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const rows = await query<{ app: string; n: number }>(
        url,
        `select a.application_name as app, count(*)::int as n
           from pg_locks l join pg_stat_activity a on a.pid = l.pid
          where l.locktype = 'advisory' and l.granted and a.application_name like 'replica-%'
          group by 1`,
      );
      for (const r of rows) peak.set(r.app, Math.max(peak.get(r.app) ?? 0, r.n));
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  const running = () =>
    query<{ n: number }>(url, "select count(*)::int as n from ingestion_runs where state = 'running'");
  await until(
    async () => (await running())[0]?.n === replicas * TICKS,
    60_000,
    `${replicas * TICKS} walks held at their first page`,
  );
  const releasedAt = Date.now();
  for (const n of SUPPLIERS) sim.setFaults(n, { latencyMs: PAGE_LATENCY_MS });
  await until(
    async () =>
      (
        await query<{ n: number }>(
          url,
          "select count(*)::int as n from ingestion_runs where state = 'succeeded'",
        )
      )[0]?.n === SUPPLIERS.length,
    120_000,
    "every supplier walked",
  );
  sampling = false;
  await sampler;
  const last = await query<{ ms: number }>(
    url,
    "select (extract(epoch from max(finished_at)) * 1000)::float8 as ms from ingestion_runs",
  );
  for (const d of daemons) d.child.kill("SIGTERM");
  for (const d of daemons) t.equal(await d.exited(20_000), 0, "replica exits 0");
  for (const n of SUPPLIERS) t.equal(sim.stats(n).walksStarted, 1, `${n} walked once`);
  const byOwner = await query<{ pid: number; n: number }>(
    url,
    "select (owner->>'pid')::int as pid, count(*)::int as n from ingestion_runs where state = 'succeeded' group by 1",
  );
  const pids = daemons.map((d) => d.child.pid);
  return {
    elapsedMs: (last[0]?.ms ?? Number.NaN) - releasedAt,
    peakLeases: daemons.map((_, i) => peak.get(`replica-${i}`) ?? 0),
    successesByReplica: pids.map((pid) => byOwner.find((o) => o.pid === pid)?.n ?? 0),
  };
}

t.test(
  "three replicas with 2 ticks each finish a slot of slow suppliers >= 2.5x sooner than one",
  async (t) => {
    const one = await slotWithReplicas(t, 1);
    const three = await slotWithReplicas(t, 3);
    const ratio = one.elapsedMs / three.elapsedMs;
    t.comment(
      `one replica: ${(one.elapsedMs / 1000).toFixed(1)} s; three: ${(three.elapsedMs / 1000).toFixed(1)} s ` +
        `(walks ${three.successesByReplica.join(" / ")}); ${ratio.toFixed(2)}x`,
    );
    t.ok(ratio >= 2.5, `three replicas ${ratio.toFixed(2)}x sooner than one (at least 2.5x)`);
    for (const [i, n] of [...one.peakLeases, ...three.peakLeases].entries()) {
      t.ok(n <= TICKS, `replica ${i}: at most ${TICKS} leases held at once (peak ${n})`);
    }
    t.ok(
      three.successesByReplica.every((n) => n >= 2),
      `every replica did its share (${three.successesByReplica.join(" / ")})`,
    );
  },
);
