// docs/feeds.md, Dated files: `{date:…}` is today's date in the supplier's time zone, the one
// its `cron(… @<zone>)` schedule names (DESIGN §3.10). Real CLI processes (--tick-once and
// preview) read the shipped ekf.json from the simulator's EKF profile; the zone is chosen so
// that its date differs from UTC's at the moment the test runs, so a walk that read UTC's
// date would fail the test.
import { readFileSync } from "node:fs";
import t from "tap";
import { dateIn, isoDate } from "../../internal/connectors/schema/placeholders.js";
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, runCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query } from "../helpers/fixtures.js";

const ekf = JSON.parse(
  readFileSync(new URL("../../config/suppliers/ekf.json", import.meta.url), "utf8"),
) as Record<string, unknown>;

/** A zone whose date is not UTC's date now: UTC+14 from 10:00 UTC on, UTC-11 before 11:00 UTC. */
function zoneAwayFromUtc(now: number): string {
  return new Date(now).getUTCHours() >= 10 ? "Pacific/Kiritimati" : "Pacific/Pago_Pago";
}

t.test("{date:…} reads today in the zone of the supplier's cron schedule", async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({ suppliers: { ekf: { size: 12, profile: "ekf" } } });
  t.teardown(() => sim.close());
  const zone = zoneAwayFromUtc(Date.now());
  const dir = connectorsDir({
    ekf: { ...ekf, baseUrl: sim.baseUrl("ekf"), rateLimit: { requestsPerSecond: 100, burst: 100 } },
  });
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: `ekf:cron(0 3 * * * @${zone})`,
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
  });

  const before = Date.now();
  const run = await runCli(t, ["--tick-once", "--force", "--supplier", "ekf"], env);
  const after = Date.now();
  t.equal(run.code, 0, run.stderr);
  const [local, localAfter] = [dateIn(before, zone), dateIn(after, zone)].map(isoDate);
  t.equal(local, localAfter, "the test did not run across midnight in the zone");
  t.not(local, isoDate(dateIn(before)), `${zone}'s date is not UTC's (the test can tell them apart)`);

  const runs = await query<{ state: string; source_date: string }>(
    url,
    "select state, source_date::text as source_date from ingestion_runs where supplier = 'ekf'",
  );
  t.same(runs, [{ state: "succeeded", source_date: local }], "the run read the zone's date");
  t.same(
    sim.stats("ekf").urls.map((u) => /(\d{4}-\d{2}-\d{2})/.exec(u)?.[1]),
    [local],
    "one request, for the file of the zone's date",
  );
  const offers = await query<{ n: number }>(url, "select count(*)::int as n from supplier_offers");
  t.equal(offers[0]?.n, 12);

  // preview takes the zone from the same schedule.
  const preview = await runCli(t, ["preview", "ekf", "--steps", "1", "--json"], env);
  t.equal(preview.code, 0, preview.stderr);
  t.match(preview.stdout, `ekf_pricelist_${local}.xlsx`, "preview asked for the zone's file");

  // Without a zone the schedule is UTC, and so is the date.
  const utc = await runCli(t, ["preview", "ekf", "--steps", "1", "--json"], {
    ...env,
    SUPPLIER_SYNC_SUPPLIERS: "ekf:1h",
  });
  t.equal(utc.code, 0, utc.stderr);
  const utcDate = isoDate(dateIn(Date.now()));
  t.match(utc.stdout, `ekf_pricelist_${utcDate}.xlsx`, "an interval schedule reads UTC's date");
  t.notMatch(utc.stdout, `ekf_pricelist_${local}.xlsx`);
});
