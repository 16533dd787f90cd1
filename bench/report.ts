/** The benchmark's outputs: a table on stdout and `bench/results.json`. */
import { writeFileSync } from "node:fs";
import { arch, cpus, release, totalmem } from "node:os";
import type { Measurement } from "./measure.js";

export interface Target {
  /** Measurement id and the figure checked (`median`, `ratio`, or a details key). */
  id: string;
  figure: string;
  op: ">=" | "<=";
  value: number;
  text: string;
}

export interface TargetCheck extends Target {
  actual: number | undefined;
  met: boolean | undefined;
}

export function figureOf(m: Measurement | undefined, figure: string): number | undefined {
  if (!m) return undefined;
  if (figure === "median") return m.median;
  if (figure === "ratio") return m.ratioToCeiling;
  const v = m.details[figure];
  return typeof v === "number" ? v : undefined;
}

export function checkTargets(results: Measurement[], targets: Target[]): TargetCheck[] {
  return targets.map((t) => {
    const actual = figureOf(
      results.find((m) => m.id === t.id),
      t.figure,
    );
    const met = actual === undefined ? undefined : t.op === ">=" ? actual >= t.value : actual <= t.value;
    return { ...t, actual, met };
  });
}

function format(n: number | undefined, unit = ""): string {
  if (n === undefined || Number.isNaN(n)) return "-";
  const abs = Math.abs(n);
  const text =
    abs >= 100
      ? Math.round(n).toLocaleString("en-US")
      : abs >= 1
        ? n.toFixed(2)
        : n.toFixed(3).replace(/0+$/, "0");
  return unit ? `${text} ${unit}` : text;
}

export function formatTable(results: Measurement[], checks: TargetCheck[]): string {
  const lines = ["| case | median | min–max | × ceiling | details |", "| --- | ---: | ---: | ---: | --- |"];
  for (const m of results) {
    const details = Object.entries(m.details)
      .map(([k, v]) => `${k}=${typeof v === "number" ? format(v) : v}`)
      .join(", ");
    lines.push(
      `| ${m.label} | ${format(m.median, m.unit)} | ${format(m.min)}–${format(m.max)} | ${
        m.ratioToCeiling === undefined ? "" : `${m.ratioToCeiling.toFixed(2)}×`
      } | ${details} |`,
    );
  }
  if (checks.length > 0) {
    lines.push("", "| target | actual | met |", "| --- | ---: | --- |");
    for (const c of checks) {
      lines.push(
        `| ${c.text} | ${format(c.actual)} | ${c.met === undefined ? "not measured" : c.met ? "yes" : "NO"} |`,
      );
    }
  }
  return lines.join("\n");
}

export function machineInfo(): Record<string, string | number> {
  const cpu = cpus();
  return {
    node: process.version,
    platform: `${process.platform} ${release()} ${arch()}`,
    cpu: `${cpu.length} × ${cpu[0]?.model ?? "unknown"}`,
    memory_mb: Math.round(totalmem() / 2 ** 20),
  };
}

export function writeResults(
  path: string,
  content: {
    startedAt: string;
    durationS: number;
    machine: Record<string, string | number>;
    versions: Record<string, string>;
    database: Record<string, string>;
    method: Record<string, string | number>;
    results: Measurement[];
    targets: TargetCheck[];
  },
): void {
  writeFileSync(path, `${JSON.stringify(content, null, 2)}\n`);
}
