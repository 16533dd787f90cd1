// The guards as an operator meets them (docs/operations.md, Held data): real daemon and CLI
// processes, the simulator over loopback, a real database. A supplier switching to
// kopecks and truncating its catalog is held, seen in `runs`, `/readyz` and `/metrics`,
// not retried within its slot, and applied once by two operators approving at once
// after a restart.
import t from "tap";
import { skuOf } from "../../internal/simulator/catalog.js";
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, runCli, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector, until } from "../helpers/fixtures.js";

interface HeldJson {
  runId: number;
  kind: string;
  sku: string | null;
  reason: string;
  state: string;
}

async function getJson(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

t.test("kopecks and a truncated catalog: held, seen everywhere, approved once after a restart", async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({ suppliers: { acme: { size: 300, pageSize: 100 } } });
  t.teardown(() => sim.close());
  const dir = connectorsDir({ acme: simConnector(sim.baseUrl("acme")) });
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "acme:10s",
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
  });
  const isTick = (l: Record<string, unknown>) => typeof l.outcome === "string" && l.supplier === "acme";

  const daemon = startCli(t, [], env);
  const listening = await daemon.waitForLog((l) => l.msg === "health and metrics server listening", 30_000);
  const base = `http://${String(listening.addr)}`;
  await daemon.waitForLog((l) => isTick(l) && l.outcome === "success", 30_000);

  const kopecks = Object.fromEntries(
    sim
      .offers("acme")
      .slice(0, 10)
      .map((r) => [r.article, `${r.price.value.replace(".", "")}`]),
  );
  sim.mutate("acme", { setPrices: kopecks, remove: 200 });
  const held = await daemon.waitForLog((l) => isTick(l) && l.error_code === "GUARD", 30_000);
  t.equal(held.outcome, "partial");
  t.equal(held.held, 11, "10 price jumps and the delisting");
  const heldRun = Number(held.run_id);

  const listed = await query<{ n: number }>(
    url,
    "select count(*)::int as n from supplier_offers where supplier = 'acme' and delisted_at is null",
  );
  t.equal(listed[0]?.n, 300, "nothing delisted");
  const first = skuOf("acme", 0);
  const [stored] = await query<{ price: string }>(
    url,
    "select price::text as price from supplier_offers where sku = $1",
    [first],
  );
  t.not(stored?.price, kopecks[first], "the kopeck price is not applied");

  const ready = await until(async () => {
    const r = await getJson(`${base}/readyz`);
    const acme = (r.body.suppliers as Record<string, Record<string, unknown>>).acme;
    return acme?.status === "held" ? { r, acme } : undefined;
  }, 15_000);
  t.equal(ready.r.status, 200, "a hold is not a reason to pull the pod");
  t.equal(ready.acme.held_run_id, heldRun);
  t.equal(ready.acme.held_items, 11);
  const metrics = await (await fetch(`${base}/metrics`)).text();
  t.match(metrics, /ingestion_guard_held_total\{supplier="acme",kind="price_jump"\} 10$/m);
  t.match(metrics, /ingestion_guard_held_total\{supplier="acme",kind="delist"\} 1$/m);
  t.match(metrics, /ingestion_held_items\{supplier="acme"\} 11$/m);

  // The next slot holds again (the supplier still sends kopecks); nothing ran in between.
  const again = await daemon.waitForLog(
    (l) => isTick(l) && l.error_code === "GUARD" && l.run_id !== held.run_id,
    30_000,
  );
  const runs = await query<{ id: string; trigger: string }>(
    url,
    "select id, trigger from ingestion_runs order by id",
  );
  t.same(
    runs.map((r) => r.trigger),
    ["schedule", "schedule", "schedule"],
    "one walk per slot: the held walk was not retried",
  );
  daemon.child.kill("SIGTERM");
  t.equal(await daemon.exited(30_000), 0);

  const table = await runCli(t, ["runs", "--supplier", "acme"], baseEnv({ DATABASE_URL: url }));
  t.match(table.stdout, /HELD/);
  t.match(table.stdout, new RegExp(`${again.run_id}\\s+acme.*partial.*\\s11\\s+GUARD: held: 10 price jumps`));

  const listing = await runCli(t, ["held", "--json"], baseEnv({ DATABASE_URL: url }));
  t.equal(listing.code, 0, listing.stderr);
  const items = JSON.parse(listing.stdout) as HeldJson[];
  const latest = Number(again.run_id);
  t.same(
    [...new Set(items.map((i) => i.runId))],
    [latest],
    "the earlier run's items were superseded by the newer run's",
  );
  t.equal(items.filter((i) => i.kind === "price_jump").length, 10);
  t.match(items.find((i) => i.kind === "delist")?.reason, /^delist: 200 of 300 listed \(67 %\) > 25 %/);

  // Two operators approve the same run at once: each item is applied once.
  const env2 = baseEnv({ DATABASE_URL: url });
  const [a, b] = await Promise.all([
    runCli(t, ["approve", String(latest), "--yes"], env2),
    runCli(t, ["approve", String(latest), "--yes"], env2),
  ]);
  t.same([a.code, b.code], [0, 0], `${a.stderr}${b.stderr}`);
  const outputs = [a.stdout, b.stdout].sort((x, y) => x.length - y.length);
  t.match(outputs[0], /nothing left to approve/);
  t.match(outputs[1], /11 items decided/);
  const after = await query<{ listed: number; kopecks: number; observed: number }>(
    url,
    `select (select count(*)::int from supplier_offers where delisted_at is null) as listed,
            (select count(*)::int from supplier_offers where sku = any ($1::text[]) and price::text = any ($2::text[])) as kopecks,
            (select count(*)::int from supplier_offer_observations where run_id = $3) as observed`,
    [Object.keys(kopecks), Object.values(kopecks), latest],
  );
  // 10 price changes and 200 delistings: a delisting is observed too (docs/changes.md).
  t.same(after[0], { listed: 100, kopecks: 10, observed: 210 });

  // A new daemon walks the next slot: nothing to hold any more.
  const restarted = startCli(t, [], env);
  const listening2 = await restarted.waitForLog(
    (l) => l.msg === "health and metrics server listening",
    30_000,
  );
  const ok = await restarted.waitForLog((l) => isTick(l) && l.outcome === "success", 30_000);
  t.equal(ok.held, 0);
  const readyAgain = await until(async () => {
    const r = await getJson(`http://${String(listening2.addr)}/readyz`);
    const acme = (r.body.suppliers as Record<string, Record<string, unknown>>).acme;
    return acme?.status === "ok" ? acme : undefined;
  }, 15_000);
  t.equal(readyAgain.held_items, undefined);
  restarted.child.kill("SIGTERM");
  t.equal(await restarted.exited(30_000), 0);
});

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
