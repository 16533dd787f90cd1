// The guards as an operator meets them (docs/operations.md, Held data): real daemon and CLI
// processes, the simulator over loopback, a real database. A supplier switching to
// kopecks and truncating its catalog is held, seen in `runs`, `/readyz` and `/metrics`,
// not retried within its slot, and applied once by two operators approving at once
// after a restart.
import t from "tap";
import { skuOf } from "../../internal/simulator/catalog.js";
import { startSimulator } from "../../internal/simulator/index.js";
import type { HeldItem } from "../../internal/store/held.js";
import { baseEnv, runCli, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector, until } from "../helpers/fixtures.js";

/** An item of `held --json` (its dates are strings there; they are not read here). */
type HeldJson = Pick<HeldItem, "runId" | "kind" | "sku" | "reason" | "state">;

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
