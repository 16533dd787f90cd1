// docs/operations.md, Schedules: two real daemons on a seconds-level cron (`*/2 * * * * *`): every
// run's slot is a fire time of the expression, the slots follow one another, and no slot has two
// succeeded runs although both replicas schedule the supplier.
import t from "tap";
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector, until } from "../helpers/fixtures.js";

t.test("two daemons on cron(*/2 * * * * *) walk once per 2 s slot", async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({ suppliers: { fast: { size: 5 } } });
  t.teardown(() => sim.close());
  const dir = connectorsDir({ fast: simConnector(sim.baseUrl("fast")) });
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "fast:cron(*/2 * * * * *)",
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
    SUPPLIER_SYNC_LOG_LEVEL: "warn",
  });
  const daemons = [startCli(t, [], env), startCli(t, [], env)];
  const succeeded = () =>
    query<{ slot: string; trigger: string }>(
      url,
      `select extract(epoch from slot_start)::bigint::text as slot, trigger
         from ingestion_runs where supplier = 'fast' and state = 'succeeded' order by slot_start`,
    );
  const runs = await until(
    async () => {
      const rows = await succeeded();
      return rows.length >= 5 ? rows : null;
    },
    30_000,
    "five succeeded runs",
  );
  const slots = runs.map((r) => Number(r.slot));
  t.ok(
    slots.every((s) => s % 2 === 0),
    `every slot starts on an even second (${slots.join(", ")})`,
  );
  t.equal(new Set(slots).size, slots.length, "one success per slot with two replicas");
  const gaps = slots.slice(1).map((s, i) => s - (slots[i] ?? 0));
  t.ok(
    gaps.filter((g) => g === 2).length >= 3,
    `most consecutive runs are in consecutive 2 s slots (gaps ${gaps.join(", ")})`,
  );
  t.ok(
    runs.every((r) => r.trigger === "schedule"),
    "scheduled runs",
  );
  for (const d of daemons) d.child.kill("SIGTERM");
  for (const d of daemons) t.equal(await d.exited(30_000), 0, "daemon stops cleanly");
});
