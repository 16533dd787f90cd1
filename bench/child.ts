/** Spawning the worker and the daemon as child processes, every wait bounded. */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { FetchLoopReport } from "./fetch-loop.js";
import { heapFlags } from "./node-flags.js";
import type { WorkerReport } from "./worker.js";

const WORKER = fileURLToPath(new URL("./worker.js", import.meta.url));
const FETCH_LOOP = fileURLToPath(new URL("./fetch-loop.js", import.meta.url));
export const DAEMON = fileURLToPath(new URL("../cmd/supplier-sync/main.js", import.meta.url));
export const PROJECT_ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** A connectors folder with one declarative definition per supplier, pointing at the simulator. */
export function writeConnectors(
  definitions: Record<string, { baseUrl: string; limit: number; requestsPerSecond: number; burst: number }>,
): string {
  const dir = mkdtempSync(join(tmpdir(), "supplier-sync-bench-connectors-"));
  for (const [name, d] of Object.entries(definitions)) {
    const definition = {
      baseUrl: d.baseUrl,
      auth: { type: "none" },
      rateLimit: { requestsPerSecond: d.requestsPerSecond, burst: d.burst, maxConcurrency: 2 },
      request: { path: "/v1/offers", query: { limit: String(d.limit) } },
      pagination: { type: "page", param: "page", start: 1 },
      records: { path: "data.items" },
      // The simulator moves a changed price by up to 5.00 modulo its 1.00–999.99 range, so a
      // price near the top can wrap to near the bottom: a jump the default factor (10) holds.
      // The guards stay on and run the same SQL; only the factor is wide enough that "1 %
      // changed" applies every change, as the case expects.
      // BENCH_GUARDS=off writes `"guards": false` instead: the pipeline without the guards'
      // statement, to measure what they cost (bench/README.md, Guards).
      guards: process.env.BENCH_GUARDS === "off" ? false : { priceJumpFactor: 1000 },
      fields: {
        sku: "article",
        name: "title",
        price: "price.value",
        currency: "price.currency",
        stock: "stock.total",
      },
    };
    writeFileSync(join(dir, `${name}.json`), JSON.stringify(definition, null, 2));
  }
  return dir;
}

/** Kills `child` if it has not exited within `ms`, and rejects. */
export function exitOf(child: ChildProcess, ms: number, what: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${what} did not finish within ${ms} ms`));
    }, ms);
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve(code ?? (signal ? 128 : 0));
    });
  });
}

/**
 * Extra Node.js flags for the worker child, from `BENCH_WORKER_FLAGS` (space-separated),
 * e.g. `--cpu-prof --cpu-prof-dir=prof` for a CPU profile of every measured tick.
 */
function workerFlags(): string[] {
  return (process.env.BENCH_WORKER_FLAGS ?? "").split(" ").filter((flag) => flag !== "");
}

/**
 * Runs one worker tick (bench/worker.ts) with the daemon's variables in `env` and the
 * image's heap flags (bench/node-flags.ts);
 * `script` runs another build's worker instead (an A/B comparison).
 */
export function runWorker(
  env: Record<string, string>,
  timeoutMs: number,
  script: string = WORKER,
): Promise<WorkerReport> {
  return runChild<WorkerReport>(
    [...heapFlags(), ...workerFlags(), script, JSON.stringify(env)],
    timeoutMs,
    "worker",
  );
}

/** Runs the fetch baseline (bench/fetch-loop.ts) over one simulator supplier. */
export function runFetchLoop(baseUrl: string, pageSize: number, timeoutMs: number): Promise<FetchLoopReport> {
  return runChild<FetchLoopReport>([FETCH_LOOP, baseUrl, String(pageSize)], timeoutMs, "fetch loop");
}

/** Runs a bench child script with an empty environment; its last stdout line is its JSON report. */
async function runChild<T>(args: string[], timeoutMs: number, what: string): Promise<T> {
  const child = spawn(process.execPath, args, {
    cwd: PROJECT_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: {},
  });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const code = await exitOf(child, timeoutMs, what);
  const line = stdout.trim().split("\n").at(-1) ?? "";
  if (code !== 0 || !line.startsWith("{")) {
    throw new Error(`${what} exited ${code}: ${stderr.trim() || stdout.slice(-2000)}`);
  }
  return JSON.parse(line) as T;
}
