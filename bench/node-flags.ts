/**
 * The V8 heap flags of every bench child that measures a peak RSS. By default none:
 * the figures are those of `npx supplier-sync` and `node dist/cmd/supplier-sync/main.js`
 * as a user runs them (issue 32: the RSS targets hold without any node flag).
 *
 * The container image still runs `node --heap-growing-percent=25 …` (the Dockerfile's
 * `supplier-sync` wrapper) as extra margin: after each full GC the old generation grows
 * by 25 % of what is live instead of up to 4× it. `BENCH_HEAP_FLAGS` (space-separated)
 * measures with flags, e.g. `BENCH_HEAP_FLAGS=--heap-growing-percent=25` for the
 * image's figures (bench/README.md, Memory without heap flags). It is a command-line
 * flag: Node refuses it in `NODE_OPTIONS` ("--heap-growing-percent= is not allowed in
 * NODE_OPTIONS", exit 9).
 */
export const IMAGE_HEAP_FLAGS = ["--heap-growing-percent=25"] as const;

/** The heap flags of the measured children: none, or `BENCH_HEAP_FLAGS`. */
export function heapFlags(env: NodeJS.ProcessEnv = process.env): string[] {
  return (env.BENCH_HEAP_FLAGS ?? "").split(" ").filter((flag) => flag !== "");
}
