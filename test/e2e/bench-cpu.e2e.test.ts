// bench/cpu.ts, the CPU figures of `npm run bench`'s pipeline walks: the PostgreSQL server's
// CPU is read from /proc and keeps what a backend spent after that backend has exited (the
// bench reads it once the worker's sessions have ended). Skips where the server is not on
// this machine (a remote TEST_DATABASE_URL), as the bench then reports no CPU figures.
import { availableParallelism } from "node:os";
import pg from "pg";
import t from "tap";
import { cpuBounds, processCpuSeconds, serverCpu } from "../../bench/cpu.js";
import { createTestDatabase } from "../helpers/db.js";

/** ~0.4 s of one backend's CPU on this machine (md5 of 500k strings), whatever the load. */
const BURN = "select count(*) from generate_series(1, 500000) g where md5(g::text) like 'a%'";

t.test("the server's CPU counts a backend's work, also after the backend has exited", async (t) => {
  const url = await createTestDatabase(t, { migrated: false });
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  t.teardown(() => pool.end());
  const read = await serverCpu(pool);
  if (!read) {
    t.pass("skipped", { skip: "the test database's server is not on this machine: no /proc to read" });
    return;
  }
  const before = read();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(BURN);
  const whileOpen = read() - before;
  await client.end();
  // The exited backend's CPU moves to the postmaster's reaped-children count.
  let afterExit = read() - before;
  for (let i = 0; i < 50 && afterExit < whileOpen; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    afterExit = read() - before;
  }
  t.ok(whileOpen >= 0.1, `a burning backend shows (${whileOpen.toFixed(2)} s)`);
  t.ok(afterExit >= whileOpen - 0.02, `nothing lost when it exits (${afterExit.toFixed(2)} s)`);
});

t.test("the CPU bound is rows over CPU seconds per core, with and without the supplier", async (t) => {
  const cores = availableParallelism();
  const bounds = cpuBounds(1_000, { database: 1, worker: 2, supplier: 1 });
  t.equal(bounds.all, (1_000 * cores) / 4);
  t.equal(bounds.withoutSupplier, (1_000 * cores) / 3);
  t.ok(Number.isNaN(cpuBounds(1_000, { database: 0, worker: 0, supplier: 0 }).all), "no CPU, no bound");
});

t.test("a process's own CPU: counted for a live one, a clear error for one that is gone", async (t) => {
  const before = processCpuSeconds(process.pid);
  // Busy until Node itself counts 150 ms of CPU (not of wall time: the cores may be shared).
  const start = process.cpuUsage();
  for (;;) {
    const used = process.cpuUsage(start);
    if (used.user + used.system >= 150_000) break;
  }
  t.ok(processCpuSeconds(process.pid) - before >= 0.1, "150 ms of CPU shows (in 10 ms ticks)");
  t.throws(() => processCpuSeconds(2 ** 30), /process 1073741824: no \/proc\/1073741824\/stat/);
});
