/**
 * Case 7: the real daemon (`dist/cmd/supplier-sync/main.js`) idling with 1,000
 * suppliers at 1h. Each has a valid connector pointing at a one-offer simulator
 * supplier, so the start-up catch-up is cheap; once all 1,000 have succeeded, the
 * daemon's CPU time over 30 s is read from /proc/<pid>/stat and its RSS from
 * /proc/<pid>/status. Linux only.
 */
import { spawn } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import type { Simulator } from "../../internal/simulator/types.js";
import { DAEMON, exitOf, PROJECT_ROOT, writeConnectors } from "../child.js";
import { processCpuSeconds } from "../cpu.js";
import { resetTables } from "../database.js";
import { type Measurement, measurement, median } from "../measure.js";
import { heapFlags } from "../node-flags.js";
import type { CaseContext } from "./context.js";

const SUPPLIERS = 1_000;
const IDLE_WINDOW_MS = 30_000;
const SETTLE_MS = 45_000;
const CATCH_UP_TIMEOUT_MS = 300_000;
function rssMb(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return match ? Number(match[1]) / 1024 : Number.NaN;
}

async function waitForCatchUp(ctx: CaseContext, exited: () => boolean): Promise<number> {
  const started = Date.now();
  for (;;) {
    const { rows } = await ctx.pool.query<{ n: number }>(
      "select count(distinct supplier)::int as n from ingestion_runs where state = 'succeeded'",
    );
    if ((rows[0]?.n ?? 0) >= SUPPLIERS) return Date.now() - started;
    if (exited()) throw new Error("daemon exited during catch-up");
    if (Date.now() - started > CATCH_UP_TIMEOUT_MS)
      throw new Error(`catch-up not done in ${CATCH_UP_TIMEOUT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

export async function measureSchedulerIdle(ctx: CaseContext, sim: Simulator): Promise<Measurement> {
  const names = Array.from({ length: SUPPLIERS }, (_, i) => `idle${String(i).padStart(4, "0")}`);
  for (const name of names) sim.configure(name, { size: 1 });
  const dir = writeConnectors(
    Object.fromEntries(
      names.map((n) => [n, { baseUrl: sim.baseUrl(n), limit: 100, requestsPerSecond: 5, burst: 5 }]),
    ),
  );
  const cpu: number[] = [];
  const rss: number[] = [];
  const catchUp: number[] = [];
  try {
    // One daemon start per repetition would cost a catch-up each; the idle window is repeated instead.
    await resetTables(ctx.pool);
    const env = {
      SUPPLIER_SYNC_SUPPLIERS: names.map((n) => `${n}:1h`).join(","),
      DATABASE_URL: ctx.url,
      SUPPLIER_SYNC_CONNECTORS_DIR: dir,
      SUPPLIER_SYNC_HTTP_ADDR: "127.0.0.1:0",
      SUPPLIER_SYNC_LOG_LEVEL: "warn",
    };
    const daemon = spawn(process.execPath, [...heapFlags(), DAEMON], {
      cwd: PROJECT_ROOT,
      env,
      stdio: "ignore",
    });
    let exited = false;
    const exit = exitOf(
      daemon,
      CATCH_UP_TIMEOUT_MS + SETTLE_MS + IDLE_WINDOW_MS * ctx.repetitions + 60_000,
      "daemon",
    );
    exit.then(
      () => {
        exited = true;
      },
      () => {
        exited = true;
      },
    );
    try {
      const pid = daemon.pid;
      if (pid === undefined) throw new Error("daemon did not start");
      catchUp.push(await waitForCatchUp(ctx, () => exited));
      ctx.progress(`scheduler: ${SUPPLIERS} suppliers caught up in ${catchUp[0]} ms`);
      // Idle means after catch-up has settled: its last runs' closes, keep-alive sockets
      // timing out and the garbage collection of 1,000 walks are not idleness.
      await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
      for (let rep = 1; rep <= ctx.repetitions; rep++) {
        const before = processCpuSeconds(pid);
        await new Promise((resolve) => setTimeout(resolve, IDLE_WINDOW_MS));
        cpu.push(((processCpuSeconds(pid) - before) / (IDLE_WINDOW_MS / 1000)) * 100);
        rss.push(rssMb(pid));
        ctx.progress(
          `scheduler idle rep ${rep}: ${cpu.at(-1)?.toFixed(2)} % CPU, ${Math.round(rss.at(-1) ?? 0)} MB RSS`,
        );
      }
    } finally {
      daemon.kill("SIGTERM");
      await exit.catch(() => {});
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return measurement("scheduler.idle", `Daemon idle, ${SUPPLIERS} suppliers at 1h: CPU`, "%", cpu, {
    rss_mb: median(rss),
    catch_up_ms: catchUp[0] ?? Number.NaN,
  });
}
