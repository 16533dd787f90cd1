/** Repetitions, medians and the shape of one result row of the benchmark. */
import { readFileSync } from "node:fs";

export interface Measurement {
  /** Stable id, e.g. `ceiling.copy`, `pipeline.first_load`. */
  id: string;
  label: string;
  unit: string;
  /** One value per repetition. */
  samples: number[];
  median: number;
  min: number;
  max: number;
  /** rows/s of this case over the ceiling's median rows/s, where it applies. */
  ratioToCeiling?: number;
  /** Other figures of the case (medians where repeated), e.g. WAL bytes, dead tuples. */
  details: Record<string, number | string | boolean>;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export function measurement(
  id: string,
  label: string,
  unit: string,
  samples: number[],
  details: Record<string, number | string | boolean> = {},
): Measurement {
  return {
    id,
    label,
    unit,
    samples,
    median: median(samples),
    min: Math.min(...samples),
    max: Math.max(...samples),
    details,
  };
}

/** Median of one numeric detail collected per repetition. */
export function medianOf<T>(items: T[], pick: (item: T) => number): number {
  return median(items.map(pick));
}

/** Milliseconds of `fn`, measured with the monotonic clock. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const start = process.hrtime.bigint();
  const value = await fn();
  return { ms: Number(process.hrtime.bigint() - start) / 1e6, value };
}

export function rowsPerSecond(rows: number, ms: number): number {
  return ms > 0 ? (rows * 1000) / ms : 0;
}

/**
 * This process's peak RSS in KiB since it started: `VmHWM` of /proc/self/status on Linux.
 * Not `process.resourceUsage().maxRSS`: Linux carries that high-water mark over from the
 * forked parent through `exec`, so a bench child reported the bench process's RSS
 * whenever that was larger (a fresh `node -e` spawned by a process of 343 MB: maxRSS
 * 304 MB, VmHWM 39 MB). `maxRSS` only where /proc is missing.
 */
export function peakRssKb(): number {
  try {
    const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
    if (match) return Number(match[1]);
  } catch {
    // not Linux: below
  }
  return process.resourceUsage().maxRSS;
}
