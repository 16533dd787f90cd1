/**
 * The entry point of a bench script run as a child process (bench/worker.ts,
 * bench/fetch-loop.ts) or by hand (bench/explain-page.ts): runs `main`, prints its
 * report, if it returns one, as the one JSON line the parent reads on stdout, and
 * exits 0; on an error, prints it on stderr and exits 1.
 */
export function runMain(main: () => Promise<unknown>): void {
  main().then(
    (report) => {
      if (report !== undefined) process.stdout.write(`${JSON.stringify(report)}\n`);
      process.exit(0);
    },
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
