/**
 * Cases 2-6, the whole product over loopback HTTP: the simulator (in this process)
 * serves the catalog, a worker child process (bench/worker.ts: `buildApp` +
 * `tickOnce`, forced) fetches, parses, validates, hashes and commits it.
 * - pipeline: first load, unchanged re-sync, 1 % changed (rows/s over the tick's
 *   wall time; WAL, dead tuples and observations between database probes; CPU seconds
 *   of PostgreSQL, the worker and the simulator, and the rows/s that CPU allows on this
 *   machine's cores: bench/cpu.ts).
 * - fetch baseline: after each first load, a bare undici loop (bench/fetch-loop.ts)
 *   reads the same pages and `JSON.parse`s them, nothing else: what reading the
 *   catalog costs on this box before any validation or writing.
 * - memory: the worker's peak RSS (`peakRssKb`: VmHWM) at 100k SKUs
 *   and at the full size.
 * - rate limit: a rate-limited supplier walked at the connector's budget; budget
 *   used = requests answered / (burst + rate × walk seconds), and the 429s the
 *   simulator's own bucket answered.
 * - scheduler: bench/cases/scheduler-idle.ts.
 */
import { rmSync } from "node:fs";
import { startSimulator } from "../../internal/simulator/index.js";
import type { Simulator } from "../../internal/simulator/types.js";
import { runFetchLoop, runWorker, writeConnectors } from "../child.js";
import { type ServerCpu, serverCpu } from "../cpu.js";
import { probeDatabase, resetTables, waitForSessionsToEnd, walBytesBetween } from "../database.js";
import { type Measurement, measurement, median, rowsPerSecond } from "../measure.js";
import type { WorkerReport } from "../worker.js";
import type { CaseContext } from "./context.js";
import { measureSchedulerIdle } from "./scheduler-idle.js";
import { type WalkCost, walkMeasurements } from "./store-write.js";

const MEMORY_SMALL = 100_000;
const RATE = { requestsPerSecond: 20, burst: 20, pageSize: 100, seconds: 10 };

function workerEnv(ctx: CaseContext, connectorsDir: string, suppliers: string[]): Record<string, string> {
  return {
    SUPPLIER_SYNC_SUPPLIERS: suppliers.map((s) => `${s}:1h`).join(","),
    DATABASE_URL: ctx.url,
    SUPPLIER_SYNC_CONNECTORS_DIR: connectorsDir,
    SUPPLIER_SYNC_LOG_LEVEL: "warn",
    SUPPLIER_SYNC_HTTP_ADDR: "127.0.0.1:0",
  };
}

function assertSuccess(report: WorkerReport, what: string): void {
  const failed = report.results.filter((r) => r.outcome !== "success");
  if (failed.length > 0) throw new Error(`${what}: tick outcome ${failed.map((r) => r.outcome).join(",")}`);
}

/** One worker tick between two database probes (the worker's sessions end with it, so its stats are flushed). */
async function measuredTick(
  ctx: CaseContext,
  databaseCpu: ServerCpu | undefined,
  env: Record<string, string>,
  rows: number,
  what: string,
): Promise<{ cost: WalkCost; rssMb: number }> {
  const before = await probeDatabase(ctx.pool);
  const databaseStart = databaseCpu?.();
  const benchStart = process.cpuUsage();
  const report = await runWorker(env, 600_000);
  const bench = process.cpuUsage(benchStart);
  assertSuccess(report, what);
  await waitForSessionsToEnd(ctx.pool, "supplier-sync");
  const databaseEnd = databaseCpu?.();
  const after = await probeDatabase(ctx.pool);
  const cpu =
    databaseStart === undefined || databaseEnd === undefined
      ? undefined
      : {
          database: databaseEnd - databaseStart,
          worker: report.tickCpuS,
          supplier: (bench.user + bench.system) / 1e6,
        };
  return {
    cost: {
      rowsPerSecond: rowsPerSecond(rows, report.tickMs),
      walBytes: await walBytesBetween(ctx.pool, before, after),
      deadTuples: after.offersDead - before.offersDead,
      updatedRows: after.offersUpdated - before.offersUpdated,
      newObservations: after.observations - before.observations,
      state: report.results[0]?.outcome ?? "none",
      cpu,
      rows,
    },
    rssMb: report.maxRssKb / 1024,
  };
}

async function measureWalks(ctx: CaseContext, sim: Simulator, memory: boolean): Promise<Measurement[]> {
  const { size, pageSize, supplier } = ctx.catalog;
  const dir = writeConnectors({
    [supplier]: { baseUrl: sim.baseUrl(supplier), limit: pageSize, requestsPerSecond: 10_000, burst: 10_000 },
    small: { baseUrl: sim.baseUrl("small"), limit: pageSize, requestsPerSecond: 10_000, burst: 10_000 },
  });
  const databaseCpu = await serverCpu(ctx.pool);
  try {
    const env = workerEnv(ctx, dir, [supplier]);
    const costs: { first: WalkCost; unchanged: WalkCost; changed: WalkCost }[] = [];
    const rssLarge: number[] = [];
    const rssSmall: number[] = [];
    const fetched: number[] = [];
    for (let rep = 1; rep <= ctx.repetitions; rep++) {
      await resetTables(ctx.pool);
      sim.configure(supplier, { size, pageSize });
      const first = await measuredTick(ctx, databaseCpu, env, size, "first load");
      const loop = await runFetchLoop(sim.baseUrl(supplier), pageSize, 600_000);
      if (loop.records !== size) throw new Error(`fetch loop read ${loop.records} records, expected ${size}`);
      fetched.push(rowsPerSecond(loop.records, loop.ms));
      const unchanged = await measuredTick(ctx, databaseCpu, env, size, "unchanged re-sync");
      sim.mutate(supplier, { changePrices: Math.round(size / 100) });
      const changed = await measuredTick(ctx, databaseCpu, env, size, "1 % changed");
      costs.push({ first: first.cost, unchanged: unchanged.cost, changed: changed.cost });
      rssLarge.push(Math.max(first.rssMb, unchanged.rssMb, changed.rssMb));
      ctx.progress(
        `pipeline rep ${rep}: first ${Math.round(first.cost.rowsPerSecond)}, bare fetch ${Math.round(fetched.at(-1) ?? 0)}, unchanged ${Math.round(unchanged.cost.rowsPerSecond)}, changed ${Math.round(changed.cost.rowsPerSecond)} rows/s, peak RSS ${Math.round(rssLarge.at(-1) ?? 0)} MB`,
      );
      const cpuText = (c: WalkCost) =>
        c.cpu
          ? `${c.cpu.database.toFixed(1)}/${c.cpu.worker.toFixed(1)}/${c.cpu.supplier.toFixed(1)}`
          : "n/a";
      ctx.progress(
        `pipeline rep ${rep}: CPU s PostgreSQL/worker/simulator: first ${cpuText(first.cost)}, unchanged ${cpuText(unchanged.cost)}, changed ${cpuText(changed.cost)}`,
      );
      if (memory) {
        sim.configure("small", { size: Math.min(MEMORY_SMALL, size), pageSize });
        const small = await measuredTick(
          ctx,
          databaseCpu,
          workerEnv(ctx, dir, ["small"]),
          MEMORY_SMALL,
          "memory 100k",
        );
        rssSmall.push(small.rssMb);
      }
    }
    const results = walkMeasurements("pipeline", "Pipeline over HTTP", costs);
    results.push(
      measurement(
        "fetch.bare",
        "Fetch baseline: bare undici loop + JSON.parse, same pages",
        "rows/s",
        fetched,
      ),
    );
    if (memory) {
      results.push(
        measurement(
          "memory.rss_100k",
          `Worker peak RSS, ${Math.min(MEMORY_SMALL, size)} SKUs`,
          "MB",
          rssSmall,
        ),
        measurement("memory.rss_1m", `Worker peak RSS, ${size} SKUs`, "MB", rssLarge, {
          growth_vs_100k: median(rssLarge) / median(rssSmall) - 1,
        }),
      );
    }
    return results;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function measureRateLimit(ctx: CaseContext, sim: Simulator): Promise<Measurement> {
  const name = "limited";
  const rate = { requestsPerSecond: RATE.requestsPerSecond, burst: RATE.burst };
  const dir = writeConnectors({ [name]: { baseUrl: sim.baseUrl(name), limit: RATE.pageSize, ...rate } });
  const used: number[] = [];
  let overBudget = 0;
  let requests = 0;
  try {
    for (let rep = 1; rep <= ctx.repetitions; rep++) {
      // Enough pages for RATE.seconds at the budget, past the initial burst.
      const pages = RATE.burst + RATE.requestsPerSecond * RATE.seconds;
      sim.configure(name, { size: pages * RATE.pageSize - 1, pageSize: RATE.pageSize, rateLimit: rate });
      const report = await runWorker(workerEnv(ctx, dir, [name]), 120_000);
      assertSuccess(report, "rate limit");
      const stats = sim.stats(name);
      const walk = stats.walks.at(-1);
      const seconds = walk?.endedAt ? (walk.endedAt - walk.startedAt) / 1000 : Number.NaN;
      const answered = stats.requests - stats.overBudget;
      used.push(answered / (RATE.burst + RATE.requestsPerSecond * seconds));
      overBudget += stats.overBudget;
      requests += stats.requests;
      ctx.progress(
        `rate limit rep ${rep}: ${stats.requests} requests in ${seconds.toFixed(2)} s, ${stats.overBudget} over budget`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return measurement(
    "rate_limit.budget_used",
    `Rate limit ${RATE.requestsPerSecond}/s burst ${RATE.burst}: share of budget used`,
    "",
    used,
    { over_budget: overBudget, requests },
  );
}

export async function runPipelineCases(
  ctx: CaseContext,
  which: { pipeline: boolean; memory: boolean; rateLimit: boolean; scheduler: boolean },
): Promise<Measurement[]> {
  const sim = await startSimulator();
  const results: Measurement[] = [];
  try {
    if (which.pipeline || which.memory) results.push(...(await measureWalks(ctx, sim, which.memory)));
    if (which.rateLimit) results.push(await measureRateLimit(ctx, sim));
    if (which.scheduler) results.push(await measureSchedulerIdle(ctx, sim));
  } finally {
    await sim.close();
  }
  return results;
}
