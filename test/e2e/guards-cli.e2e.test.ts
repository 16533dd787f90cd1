// Held data from the command line (docs/operations.md, Held data): `preview` says what the
// guards would hold, a tick holds it, and `held`, `approve` and `dismiss` decide it per
// SKU, idempotently, with clear refusals. Real CLI processes, the simulator over
// loopback, a real database. (Apart from guards.e2e.test.ts: each file has tap's own
// time budget, and these ~20 CLI starts take over a minute when CI's two suites share
// the cores.)
import t from "tap";
import { skuOf } from "../../internal/simulator/catalog.js";
import { startSimulator } from "../../internal/simulator/index.js";
import type { HeldItem } from "../../internal/store/held.js";
import { baseEnv, runCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector } from "../helpers/fixtures.js";

/** An item of `held --json` (its dates are strings there; they are not read here). */
type HeldJson = Pick<HeldItem, "sku" | "state">;

t.test("held, approve and dismiss from the command line: per SKU, idempotent, clear refusals", async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({ suppliers: { acme: { size: 50, pageSize: 50 } } });
  t.teardown(() => sim.close());
  const dir = connectorsDir({ acme: simConnector(sim.baseUrl("acme")) });
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "acme:1h",
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
  });
  t.equal((await runCli(t, ["--tick-once", "--force"], env)).code, 0);
  const skus = [0, 1, 2].map((i) => skuOf("acme", i));
  sim.mutate("acme", {
    setPrices: Object.fromEntries(skus.map((s) => [s, "999999.99"])),
    setCurrencies: { [skuOf("acme", 3)]: "USD" },
  });
  // preview, with the database, says what the guards would hold; without it, that it did not check.
  const preview = await runCli(t, ["preview", "acme", "--steps", "5", "--json"], env);
  t.equal(preview.code, 0, preview.stderr);
  const report = JSON.parse(preview.stdout) as {
    complete: boolean;
    guards: { checked: boolean; offers: { sku: string; kind: string; reason: string }[]; delist: unknown };
  };
  t.equal(report.complete, true);
  t.same(
    report.guards.offers.map((o) => [o.sku, o.kind]),
    [...skus.map((s) => [s, "price_jump"]), [skuOf("acme", 3), "currency"]],
  );
  t.match(report.guards.offers[0]?.reason, /^price \d+\.\d+ -> 999999\.99 \(x\d+(\.\d+)?\)$/);
  t.same(report.guards.delist, { listed: 50, missing: 0, held: false, reason: null });
  const { DATABASE_URL: _url, ...noDatabase } = env;
  const text = await runCli(t, ["preview", "acme"], noDatabase);
  t.match(text.stdout, /guards: not checked \(DATABASE_URL is not set\)/);
  const human = await runCli(t, ["preview", "acme", "--steps", "5"], env);
  t.match(human.stdout, new RegExp(`would hold ${skus[0]} \\(step 1\\): price`));
  t.match(human.stdout, /delisting: 0 of 50 listed offers would be delisted/);

  const tick = await runCli(t, ["--tick-once", "--force"], env);
  t.equal(tick.code, 1, "a held walk is partial: exit 1");
  const heldCount = async () =>
    (await query<{ n: number }>(url, "select count(*)::int as n from ingestion_held"))[0]?.n ?? -1;
  const before = await heldCount();
  t.equal(before, 4);
  t.equal((await runCli(t, ["preview", "acme", "--steps", "5", "--json"], env)).code, 0);
  t.equal(await heldCount(), before, "preview writes nothing: no held item of its own");
  const runId = Number(tick.logs.find((l) => l.error_code === "GUARD")?.run_id);
  const db = baseEnv({ DATABASE_URL: url });

  const table = await runCli(t, ["held", "--supplier", "acme"], db);
  t.equal(table.code, 0);
  t.match(table.stdout, /RUN\s+SUPPLIER\s+KIND\s+SKU\/FIELD\s+STORED\s+PROPOSED\s+REASON/);
  t.match(
    table.stdout,
    new RegExp(`${runId}\\s+acme\\s+currency\\s+${skuOf("acme", 3)}\\s+\\S+ EUR, stock \\d+\\s+\\S+ USD`),
  );
  t.match(table.stdout, /supplier-sync approve RUN_ID/);

  const one = await runCli(t, ["dismiss", String(runId), "--sku", skus[0] as string, "--sku", "NOPE"], db);
  t.equal(one.code, 0, one.stderr);
  t.match(one.stdout, new RegExp(`dismissed\\s+price_jump ${skus[0]}`));
  t.match(one.stdout, /not held\s+NOPE/);
  const rest = await runCli(t, ["approve", String(runId), "--sku", skus[1] as string, "--yes"], db);
  t.match(rest.stdout, new RegExp(`approved\\s+price_jump ${skus[1]}: 1 offers written`));
  const all = await runCli(t, ["held", "--all", "--json"], db);
  t.same(
    (JSON.parse(all.stdout) as HeldJson[]).map((i) => [i.sku, i.state]),
    [
      [skus[0], "dismissed"],
      [skus[1], "approved"],
      [skus[2], "held"],
      [skuOf("acme", 3), "held"],
    ],
  );
  const dismissRest = await runCli(t, ["dismiss", String(runId)], db);
  t.match(dismissRest.stdout, /2 items decided/);
  t.match((await runCli(t, ["dismiss", String(runId)], db)).stdout, /nothing left to dismiss/);
  t.match((await runCli(t, ["held"], db)).stdout, /^nothing held$/m);

  const refusals: [string[], RegExp][] = [
    [["approve", "999999", "--yes"], /run 999999 does not exist/],
    [["approve", "abc"], /"abc" is not a run id/],
    [["approve", String(runId)], /confirm with --yes \(stdin is not a terminal\)/],
    [["dismiss", String(runId), "--yes"], /unknown option "--yes" for dismiss/],
    [["held", "--bogus"], /unknown option "--bogus" for held/],
  ];
  await query(
    url,
    `insert into ingestion_runs (supplier, slot_start, trigger, state, owner) values ('acme', now(), 'schedule', 'running', '{}')`,
  );
  const [running] = await query<{ id: string }>(url, "select max(id)::text as id from ingestion_runs");
  refusals.push([["dismiss", String(running?.id)], /is still running: decide once it has closed/]);
  for (const [args, message] of refusals) {
    const r = await runCli(t, args, db);
    t.equal(r.code, 2, args.join(" "));
    t.match(r.stderr, message, args.join(" "));
  }
});
