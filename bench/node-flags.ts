/**
 * The V8 heap sizing the daemon runs with in the container image (Dockerfile: the
 * `supplier-sync` wrapper runs `node --heap-growing-percent=25 …`), applied to every
 * bench child that measures a peak RSS, so the figures are those of the image.
 *
 * Why: a page's parsed JSON and offers live across a few awaits (prefetch + commit),
 * so they are promoted to the old generation and die there; V8 then grows the old
 * generation by up to 4× its live size after each full GC, and over a long walk the
 * heap ratchets up. On a 1M-SKU first load, growing by 25 % instead of V8's default
 * keeps the peak RSS well below the default's, with no measurable slowdown (figures,
 * date and method: bench/README.md, Heap growth). It is a growth heuristic, not a cap: a larger page still fits.
 *
 * It is a node command-line flag, not a run-time `v8.setFlagsFromString` call, and
 * not in `NODE_OPTIONS`: Node refuses it there ("--heap-growing-percent= is not
 * allowed in NODE_OPTIONS", exit 9). `BENCH_HEAP_FLAGS` replaces it (space-separated;
 * empty: V8's default sizing) to compare.
 */
export const DAEMON_HEAP_FLAGS = ["--heap-growing-percent=25"] as const;

/** The heap flags of the measured children: {@link DAEMON_HEAP_FLAGS}, or `BENCH_HEAP_FLAGS`. */
export function heapFlags(env: NodeJS.ProcessEnv = process.env): string[] {
  const override = env.BENCH_HEAP_FLAGS;
  if (override === undefined) return [...DAEMON_HEAP_FLAGS];
  return override.split(" ").filter((flag) => flag !== "");
}
