#!/usr/bin/env node
/**
 * The benchmark's worker process: one `--tick-once --force` of the whole app
 * (`buildApp` → connector over loopback HTTP → runTick → store), run as a child so
 * its peak RSS is its own. Reads its environment from argv[2] (JSON, the same
 * variables the daemon reads), never from `process.env`; prints one JSON line.
 * Spawned with the image's heap flags (bench/node-flags.ts, bench/child.ts).
 */
import { buildApp } from "../internal/app/app.js";
import { loadConfig } from "../internal/config/env.js";
import type { TickResult } from "../internal/ingestion/tick.js";
import { runMain } from "./child-main.js";
import { peakRssKb } from "./measure.js";

/** The line the worker prints on stdout. */
export interface WorkerReport {
  /** Wall time of tickOnce only (not process start, connect or migrations). */
  tickMs: number;
  /** CPU seconds of this process (user + system) during tickOnce. */
  tickCpuS: number;
  /** Peak RSS in KiB (`peakRssKb`: VmHWM), at the end. */
  maxRssKb: number;
  results: Pick<TickResult, "supplier" | "outcome" | "counts">[];
}

async function main(): Promise<WorkerReport> {
  const env = JSON.parse(process.argv[2] ?? "{}") as Record<string, string>;
  const config = loadConfig(env, process.cwd());
  const app = buildApp(config);
  await app.open();
  const start = process.hrtime.bigint();
  const cpuStart = process.cpuUsage();
  const results = await app.tickOnce({ suppliers: config.suppliers.filter((s) => s.enabled), force: true });
  const tickMs = Number(process.hrtime.bigint() - start) / 1e6;
  const cpu = process.cpuUsage(cpuStart);
  await app.stop();
  return {
    tickMs,
    tickCpuS: (cpu.user + cpu.system) / 1e6,
    maxRssKb: peakRssKb(),
    results: results.map((r) => ({ supplier: r.supplier, outcome: r.outcome, counts: r.counts })),
  };
}

runMain(main);
