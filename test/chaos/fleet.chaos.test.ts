// Issue 19: the fleet. Three real daemons share 1,000 suppliers (small catalogs, short
// slots) for three slots; in the middle one, replica b is killed with SIGKILL while it
// holds leases and restarted at once. Asserted: every supplier walked exactly once per
// slot (a walk the kill cut is recovered INTERRUPTED and retried in the same slot), no
// two walks of a supplier overlap, no run left `running`, and each replica's PostgreSQL
// connections (pg_stat_activity, sampled every 200 ms) never above its pool size plus
// its running leases. The figures go to the runner's table and bench/README.md, Fleet (under Scale-out).
//
// The three slots checked are the first whole ones after the start: the start-up
// catch-up lands in the slot before them (and may spill into the first, where each
// supplier is still walked once). A slot's walks take ~40 s on a loaded 2-core box, so
// slots are 60 s; FLEET_INTERVAL_S overrides that when tuning on other hardware.
import { readFileSync } from "node:fs";
import pg from "pg";
import type { Test } from "tap";
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, type CliProcess, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector } from "../helpers/fixtures.js";
import { assertInvariants } from "./helpers/invariants.js";
import { scenario } from "./helpers/scenario.js";

const SUPPLIERS = Array.from({ length: 1_000 }, (_, i) => `f${String(i).padStart(4, "0")}`);
const INTERVAL_MS = Number(process.env.FLEET_INTERVAL_S ?? 60) * 1000;
const SLOTS = 3;
const POOL_MAX = 8;
const TICKS = 4;
/** USER_HZ: the unit of utime/stime in /proc/<pid>/stat on Linux. */
const CLOCK_TICKS_PER_SECOND = 100;

interface ProcStats {
  cpuSeconds: number;
  peakRssMb: number;
}

function procStats(pid: number): ProcStats {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const hwm = /VmHWM:\s+(\d+) kB/.exec(status);
  return {
    cpuSeconds: (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND,
    peakRssMb: hwm ? Number(hwm[1]) / 1024 : Number.NaN,
  };
}

interface Replica {
  name: string;
  proc: CliProcess;
  startedAt: number;
  stats?: ProcStats;
  stoppedAt?: number;
}

/** Samples connections and held advisory leases per application_name until stopped. */
function sampleConnections(url: string) {
  const peak = new Map<string, { conns: number; leases: number; overBudget: number[] }>();
  let samples = 0;
  let stop = false;
  let failure: unknown;
  const client = new pg.Client({ connectionString: url });
  // The scenario's database is dropped on teardown: a sampler still connected then just ends.
  client.on("error", () => {});
  const done = (async () => {
    await client.connect();
    try {
      while (!stop) {
        const { rows } = await client.query<{ app: string; conns: number; leases: number }>(
          `select a.application_name as app, count(distinct a.pid)::int as conns,
                  count(l.pid)::int as leases
             from pg_stat_activity a
             left join pg_locks l on l.pid = a.pid and l.locktype = 'advisory' and l.granted
            where a.application_name like 'replica-%'
            group by 1`,
        );
        samples++;
        for (const r of rows) {
          const p = peak.get(r.app) ?? { conns: 0, leases: 0, overBudget: [] };
          p.conns = Math.max(p.conns, r.conns);
          p.leases = Math.max(p.leases, r.leases);
          if (r.conns > POOL_MAX + r.leases) p.overBudget.push(r.conns);
          peak.set(r.app, p);
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      await client.end().catch(() => {});
    }
  })().catch((err: unknown) => {
    if (!stop) failure = err;
  });
  return {
    peak,
    get samples() {
      return samples;
    },
    async stop() {
      stop = true;
      await done;
      if (failure) throw failure;
    },
  };
}

async function dbNowMs(url: string): Promise<number> {
  return (
    (await query<{ ms: number }>(url, "select extract(epoch from clock_timestamp())::float8 * 1000 as ms"))[0]
      ?.ms ?? Number.NaN
  );
}

/** Polls `fn` on one connection (a new connection per poll would cost the server a fork each). */
async function poll<T>(
  db: pg.Client,
  fn: (db: pg.Client) => Promise<T | undefined>,
  opts: { timeoutMs: number; everyMs: number; what: string; explain?: () => Promise<string> },
): Promise<T> {
  const deadline = Date.now() + opts.timeoutMs;
  for (;;) {
    const v = await fn(db);
    if (v !== undefined) return v;
    if (Date.now() > deadline) {
      const why = opts.explain ? `: ${await opts.explain()}` : "";
      throw new Error(`timed out after ${opts.timeoutMs} ms waiting for ${opts.what}${why}`);
    }
    await new Promise((r) => setTimeout(r, opts.everyMs));
  }
}

/** The suppliers with no success in `slot` yet, and their runs there: what a timeout reports. */
async function missingIn(db: pg.Client, slot: number): Promise<string> {
  const { rows } = await db.query<{ supplier: string; runs: unknown }>(
    `select s.supplier,
            coalesce(json_agg(json_build_object('state', r.state, 'error', r.error_code,
                       'pid', r.owner->>'pid', 'started', r.started_at)) filter (where r.id is not null), '[]') as runs
       from unnest($2::text[]) as s(supplier)
       left join ingestion_runs r on r.supplier = s.supplier and r.slot_start = $1
      group by 1
     having count(*) filter (where r.state = 'succeeded') = 0
      order by 1`,
    [new Date(slot), SUPPLIERS],
  );
  return `${rows.length} without a success, e.g. ${JSON.stringify(rows.slice(0, 5))}`;
}

scenario(
  "19. fleet: 3 daemons x 1,000 suppliers, 3 slots, one replica SIGKILLed and restarted",
  { timeoutMs: 400_000 },
  async (t: Test) => {
    const url = await createTestDatabase(t);
    const sim = await startSimulator({
      suppliers: Object.fromEntries(SUPPLIERS.map((n) => [n, { size: 3, faults: { latencyMs: 20 } }])),
    });
    t.teardown(() => sim.close());
    const dir = connectorsDir(
      Object.fromEntries(
        SUPPLIERS.map((n) => [
          n,
          simConnector(sim.baseUrl(n), {
            pagination: { type: "none" },
            rateLimit: { requestsPerSecond: 5, burst: 5, maxConcurrency: 1 },
          }),
        ]),
      ),
    );
    const env = (app: string) =>
      baseEnv({
        DATABASE_URL: `${url}?application_name=${app}`,
        SUPPLIER_SYNC_SUPPLIERS: SUPPLIERS.map((n) => `${n}:${INTERVAL_MS / 1000}s`).join(","),
        SUPPLIER_SYNC_CONNECTORS_DIR: dir,
        SUPPLIER_SYNC_MAX_CONCURRENT_TICKS: String(TICKS),
        SUPPLIER_SYNC_DB_POOL_MAX: String(POOL_MAX),
        SUPPLIER_SYNC_LOG_LEVEL: "warn",
      });
    const start = (name: string): Replica => ({
      name,
      proc: startCli(t, [], env(`replica-${name}`)),
      startedAt: Date.now(),
    });

    const first = Math.floor((await dbNowMs(url)) / INTERVAL_MS + 1) * INTERVAL_MS;
    const sampler = sampleConnections(url);
    t.teardown(() => sampler.stop());
    const replicas: Replica[] = [start("a"), start("b"), start("c")];
    const slots = Array.from({ length: SLOTS }, (_, i) => first + i * INTERVAL_MS);
    const slotDone: number[] = [];
    const victimPid = replicas[1]!.proc.child.pid;
    const watch = new pg.Client({ connectionString: url });
    watch.on("error", () => {});
    await watch.connect();
    t.teardown(() => watch.end().catch(() => {}));
    try {
      for (const [i, slot] of slots.entries()) {
        if (i === 1) {
          // Mid-way: kill b while it holds walks of this slot, restart it at once.
          const victim = replicas[1]!;
          const pid = victim.proc.child.pid!;
          await poll(
            watch,
            async (db) => {
              const { rows } = await db.query<{ n: number }>(
                `select count(*)::int as n from ingestion_runs
                  where state = 'running' and slot_start = $1 and (owner->>'pid')::int = $2`,
                [new Date(slot), pid],
              );
              return (rows[0]?.n ?? 0) > 0 ? true : undefined;
            },
            { timeoutMs: INTERVAL_MS, everyMs: 20, what: "replica b holding walks of the second slot" },
          );
          victim.stats = procStats(pid);
          victim.stoppedAt = Date.now();
          victim.proc.child.kill("SIGKILL");
          t.equal(await victim.proc.exited(10_000), 137, "replica b killed with SIGKILL");
          replicas.push(start("b2"));
        }
        await poll(
          watch,
          async (db) => {
            const { rows } = await db.query<{ n: number }>(
              "select count(*)::int as n from ingestion_runs where state = 'succeeded' and slot_start = $1",
              [new Date(slot)],
            );
            return rows[0]?.n === SUPPLIERS.length ? true : undefined;
          },
          {
            timeoutMs: slot + INTERVAL_MS - Date.now() + 2_000,
            everyMs: 250,
            what: `1,000 successes in slot ${i + 1}`,
            explain: () => missingIn(watch, slot),
          },
        );
        slotDone.push(Date.now() - slot);
      }
      for (const r of replicas) {
        if (r.stats) continue;
        r.stats = procStats(r.proc.child.pid!);
        r.stoppedAt = Date.now();
      }
    } finally {
      for (const r of replicas) if (r.proc.child.exitCode === null) r.proc.child.kill("SIGTERM");
    }
    for (const r of replicas.filter((r) => r.name !== "b")) {
      t.equal(await r.proc.exited(30_000), 0, `replica ${r.name} exits 0 on SIGTERM`);
    }
    await sampler.stop();

    // --- per (supplier, slot): exactly one success; the only extra runs are the cut ones.
    const runs = await query<{
      supplier: string;
      slot: number;
      state: string;
      error_code: string | null;
      trigger: string;
      pid: number;
      started: number;
    }>(
      url,
      `select supplier, (extract(epoch from slot_start) * 1000)::float8 as slot, state, error_code,
              trigger, (owner->>'pid')::int as pid,
              (extract(epoch from started_at) * 1000)::float8 as started
         from ingestion_runs order by started_at, id`,
    );
    const inSlots = runs.filter((r) => slots.includes(r.slot));
    const catchUp = runs.filter((r) => r.slot < first);
    const after = runs.filter((r) => r.slot > (slots.at(-1) ?? 0));
    t.same(
      after.filter((r) => r.error_code !== "SHUTDOWN"),
      [],
      "no run after the three slots (but a walk cut by the final SIGTERM)",
    );
    t.same(
      catchUp.filter((r) => r.state !== "succeeded"),
      [],
      `the start-up catch-up before them: ${catchUp.length} walks, all succeeded`,
    );
    const key = (r: { supplier: string; slot: number }) => `${r.supplier}@${r.slot}`;
    const wins = new Map<string, number>();
    for (const r of inSlots) if (r.state === "succeeded") wins.set(key(r), (wins.get(key(r)) ?? 0) + 1);
    t.equal(wins.size, SUPPLIERS.length * SLOTS, "every supplier succeeded in every slot");
    t.same(
      [...wins].filter(([, n]) => n !== 1),
      [],
      "exactly one success per supplier per slot",
    );
    const cut = inSlots.filter((r) => r.pid === victimPid && r.error_code === "INTERRUPTED");
    const killedRuns = cut.length;
    t.ok(killedRuns >= 1, `the kill cut ${killedRuns} run(s) mid-way`);
    const extra = inSlots.filter((r) => r.state !== "succeeded");
    t.same(
      extra.filter((r) => r.error_code !== "INTERRUPTED" || r.slot !== slots[1]),
      [],
      "the only runs that did not succeed are the ones the kill cut, in the kill's slot",
    );
    t.equal(extra.length, killedRuns, `the ${killedRuns} cut run(s) were recovered INTERRUPTED`);
    t.same(
      extra.filter((r) => !wins.has(key(r))),
      [],
      "and each was retried to success in the same slot",
    );

    // --- the supplier's side: walks per slot, and no two walks of a supplier overlapping.
    // Each walk belongs to the supplier's run started last before it (run rows are written
    // before the first request; the simulator and PostgreSQL read the same host clock).
    const walksPerSlot = slots.map(() => 0);
    const successWalksPerSlot = slots.map(() => 0);
    const runsBySupplier = new Map<string, typeof runs>();
    for (const r of runs) runsBySupplier.set(r.supplier, [...(runsBySupplier.get(r.supplier) ?? []), r]);
    let overlaps = 0;
    let orphanWalks = 0;
    let twiceWalked = 0;
    let requests = 0;
    for (const name of SUPPLIERS) {
      const stats = sim.stats(name);
      requests += stats.requests;
      const mine = runsBySupplier.get(name) ?? [];
      const owners = new Set<(typeof runs)[number]>();
      const walks = [...stats.walks].sort((a, b) => a.startedAt - b.startedAt);
      for (let i = 0; i < walks.length; i++) {
        const w = walks[i]!;
        const owner = mine.filter((r) => r.started <= w.startedAt + 5).at(-1);
        if (!owner) orphanWalks++;
        else {
          if (owners.has(owner)) twiceWalked++;
          owners.add(owner);
          const s = slots.indexOf(owner.slot);
          if (s >= 0) walksPerSlot[s] = (walksPerSlot[s] ?? 0) + 1;
          if (s >= 0 && owner.state === "succeeded")
            successWalksPerSlot[s] = (successWalksPerSlot[s] ?? 0) + 1;
        }
        const prev = walks[i - 1];
        if (prev?.endedAt && prev.endedAt > w.startedAt) overlaps++;
      }
    }
    t.equal(overlaps, 0, "0 overlapping walks of one supplier");
    t.equal(orphanWalks, 0, "every walk belongs to a run");
    t.equal(twiceWalked, 0, "no run walked its catalog twice");
    t.same(
      successWalksPerSlot,
      slots.map(() => SUPPLIERS.length),
      "each slot: 1,000 walks by the runs that succeeded",
    );
    // A cut run may have died before its first request (between its row and the walk).
    const cutPerSlot = slots.map((slot) => extra.filter((r) => r.slot === slot).length);
    t.ok(
      walksPerSlot.every((n, i) => n - (successWalksPerSlot[i] ?? 0) <= (cutPerSlot[i] ?? 0)),
      `the only other walks are the cut ones: walks per slot ${walksPerSlot.join(" / ")}, cut runs ${cutPerSlot.join(" / ")}`,
    );

    // --- connections: each replica within its pool size plus its running leases.
    for (const [app, p] of sampler.peak) {
      t.same(p.overBudget, [], `${app}: never above ${POOL_MAX} pool + running leases (peak ${p.conns})`);
    }
    t.ok(sampler.samples > 50, `${sampler.samples} pg_stat_activity samples`);
    const invariants = await assertInvariants(t, { url, suppliers: [] });

    // --- figures
    const spread = slots.map((slot) =>
      replicas.map(
        (r) =>
          inSlots.filter((x) => x.slot === slot && x.state === "succeeded" && x.pid === r.proc.child.pid)
            .length,
      ),
    );
    const lines = [
      `slot ${INTERVAL_MS / 1000} s; walks per slot ${walksPerSlot.join(" / ")}; all 1,000 done ${slotDone.map((ms) => `${(ms / 1000).toFixed(1)}`).join(" / ")} s into their slot; ${requests} supplier requests; ${killedRuns} run(s) cut by the kill (recovered INTERRUPTED, retried in the slot)`,
      `successes per replica (${replicas.map((r) => r.name).join(" / ")}) by slot: ${spread.map((s) => s.join(" / ")).join("; ")}`,
      ...replicas.map((r) => {
        const p = sampler.peak.get(`replica-${r.name}`);
        const wall = ((r.stoppedAt ?? Date.now()) - r.startedAt) / 1000;
        return `replica ${r.name}: peak ${p?.conns ?? 0} connections (pool ${POOL_MAX}), peak ${p?.leases ?? 0} leases; CPU ${r.stats?.cpuSeconds.toFixed(1)} s over ${wall.toFixed(0)} s (${(((r.stats?.cpuSeconds ?? 0) / wall) * 100).toFixed(1)} %); peak RSS ${r.stats?.peakRssMb.toFixed(0)} MB`;
      }),
    ];
    for (const line of lines) {
      t.comment(line);
      process.stderr.write(`fleet: ${line}\n`);
    }
    return {
      invariants: [
        ...invariants,
        "one-success-per-supplier-per-slot",
        "cut-walks-retried-in-slot",
        "no-overlapping-walks",
        "connections-within-pool-plus-leases",
      ],
      note: lines.join("\n"),
    };
  },
);
