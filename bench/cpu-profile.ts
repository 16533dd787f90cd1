#!/usr/bin/env node
/**
 * Summarises a worker's `.cpuprofile` (bench/README.md, Where the time goes):
 *
 *   BENCH_HEAP_FLAGS="" BENCH_WORKER_FLAGS="--cpu-prof --cpu-prof-dir=/tmp/prof" \
 *     node dist/bench/run.js --only pipeline --skus 200000 --reps 1
 *   node dist/bench/cpu-profile.js --pages 40 /tmp/prof/*.cpuprofile
 *
 * One profile per worker run (first load, unchanged, 1 % changed, in that order). Only
 * the walk is counted: from the first to the last sample under `decodeJsonPage`, so
 * module loading and migrations stay out. Each sample's time goes to the first bucket
 * its stack matches, in the order below; `--top N` also lists the N functions with the
 * most self time. The sampler runs on wall time: on a loaded machine every figure grows.
 */
import { readFileSync } from "node:fs";
import { basename } from "node:path";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Buckets in matching order: a stack counts for the first that matches any of its frames. */
const BUCKETS: [string, RegExp][] = [
  ["page scan (scanJsonLimits)", /^scanJsonLimits /],
  ["JSON.parse and body decoding (decodeJsonPage)", /^decodeJsonPage /],
  ["normalisation and validation (normalizeRecords)", /^normalizeRecords /],
  ["store: columns, statement, pg (internal/store, pg)", /dist\/internal\/store\/|node_modules\/pg\//],
  ["HTTP body read (readLimited)", /^readLimited /],
  ["undici", /node_modules\/undici\//],
  ["garbage collector", /^\(garbage collector\)/],
];

function frameName(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  return `${functionName || "(anonymous)"} ${url.replace(/^.*\/(dist|node_modules)\//, "$1/")}:${lineNumber}`;
}

function summarise(path: string, pages: number, top: number): void {
  const profile = JSON.parse(readFileSync(path, "utf8")) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stacks = new Map<number, string[]>();
  const stackOf = (id: number): string[] => {
    let stack = stacks.get(id);
    if (stack === undefined) {
      stack = [];
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const node = byId.get(at);
        if (node) stack.push(frameName(node));
      }
      stacks.set(id, stack);
    }
    return stack;
  };
  const { samples, timeDeltas } = profile;
  let first = -1;
  let last = -1;
  for (let i = 0; i < samples.length; i++) {
    if (stackOf(samples[i] as number).some((f) => f.startsWith("decodeJsonPage "))) {
      if (first < 0) first = i;
      last = i;
    }
  }
  if (first < 0) {
    console.log(`${basename(path)}: no page decoded`);
    return;
  }
  const sums = new Map<string, number>([
    ...BUCKETS.map(([name]) => [name, 0] as [string, number]),
    ["other", 0],
  ]);
  const self = new Map<string, number>();
  let busy = 0;
  let idle = 0;
  for (let i = first; i <= last; i++) {
    // A sample's time is the delta to the next one.
    const us = timeDeltas[i + 1] ?? 0;
    const stack = stackOf(samples[i] as number);
    const leaf = stack[0] ?? "";
    if (leaf.startsWith("(idle)")) {
      idle += us;
      continue;
    }
    busy += us;
    self.set(leaf, (self.get(leaf) ?? 0) + us);
    const bucket = BUCKETS.find(([, pattern]) => stack.some((f) => pattern.test(f)))?.[0] ?? "other";
    sums.set(bucket, (sums.get(bucket) ?? 0) + us);
  }
  const perPage = (us: number) => (us / 1000 / pages).toFixed(2).padStart(6);
  console.log(`${basename(path)}: busy ${perPage(busy)} ms a page, idle ${perPage(idle)} (${pages} pages)`);
  for (const [name, us] of sums) console.log(`  ${perPage(us)}  ${name}`);
  if (top > 0) {
    console.log("  self time, ms a page:");
    for (const [name, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top)) {
      console.log(`  ${perPage(us)}  ${name}`);
    }
  }
}

const args = process.argv.slice(2);
let pages = 40;
let top = 0;
const files: string[] = [];
for (let i = 0; i < args.length; i++) {
  const arg = args[i] as string;
  if (arg === "--pages") pages = Number(args[++i]);
  else if (arg === "--top") top = Number(args[++i]);
  else files.push(arg);
}
if (files.length === 0 || !(pages > 0)) {
  console.error("usage: cpu-profile.js [--pages N] [--top N] <file.cpuprofile>...");
  process.exit(2);
}
for (const file of files) summarise(file, pages, top);
