/**
 * The invariants (docs/architecture.md, The invariants; docs/failure-modes.md, Invariants checked after every scenario), asserted with SQL (and the simulator's counters) after
 * every chaos scenario. Each check is a query whose expected answer is "no rows", so a
 * failure prints the offending rows.
 */
import type { Test } from "tap";
import type { Simulator } from "../../../internal/simulator/index.js";
import { query } from "../../helpers/fixtures.js";

export interface InvariantOptions {
  /** The scenario's database. */
  url: string;
  /** The simulator that served the suppliers, for the record and walk counts. */
  sim?: Simulator;
  /** Suppliers served by `sim`, with their interval (the slot length). */
  suppliers: { name: string; intervalMs: number }[];
  /**
   * Suppliers whose catalog must be fully accounted for by their last succeeded run:
   * live offers + that run's rejects = what the simulator serves, SKU for SKU.
   */
  complete?: string[];
}

type Row = Record<string, unknown>;

async function expectNone(
  t: Test,
  url: string,
  what: string,
  sql: string,
  params: unknown[] = [],
): Promise<void> {
  const rows = await query<Row>(url, sql, params);
  t.same(rows, [], what);
}

/** Asserts every invariant that applies; returns the names of those checked. */
export async function assertInvariants(t: Test, o: InvariantOptions): Promise<string[]> {
  const checked: string[] = [];
  const { url } = o;

  await expectNone(
    t,
    url,
    "no duplicate offer (supplier, sku)",
    "select supplier, sku, count(*)::int as n from supplier_offers group by 1, 2 having count(*) > 1",
  );
  await expectNone(
    t,
    url,
    "no duplicate observation (supplier, sku, run_id)",
    "select supplier, sku, run_id, count(*)::int as n from supplier_offer_observations group by 1, 2, 3 having count(*) > 1",
  );
  // Re-walking unchanged data (a retry, a recovery) must not observe it again. A delisting
  // or relisting observes the offer's unchanged content by design (docs/changes.md).
  await expectNone(
    t,
    url,
    "no observation repeats the previous one of its offer",
    `select supplier, sku, run_id from (
       select supplier, sku, run_id, content_hash, kind,
              lag(content_hash) over (partition by supplier, sku order by observed_at, run_id) as prev
         from supplier_offer_observations) o
      where content_hash = prev and kind is distinct from 'delisted' and kind is distinct from 'relisted'`,
  );
  checked.push("no-duplicates");

  await expectNone(
    t,
    url,
    "no run left running",
    "select id, supplier, owner from ingestion_runs where state = 'running'",
  );
  checked.push("no-running-run");

  await expectNone(
    t,
    url,
    "no succeeded run with a failed, running or missing step",
    `select r.id, r.pages, s.n, s.ok, s.max_seq from ingestion_runs r
       left join lateral (
         select count(*)::int as n, count(*) filter (where state = 'succeeded')::int as ok,
                coalesce(max(seq), 0)::int as max_seq
           from ingestion_run_steps where run_id = r.id) s on true
      where r.state = 'succeeded'
        and (r.error_code is not null or s.n = 0 or s.ok <> s.n or s.n <> r.pages or s.max_seq <> s.n)`,
  );
  await expectNone(
    t,
    url,
    "a LEASE_LOST / INTERRUPTED / SHUTDOWN / DEADLINE run is never succeeded",
    "select id, state, error_code from ingestion_runs where error_code is not null and state = 'succeeded'",
  );
  checked.push("no-false-success");

  // Every record of a committed page is an offer (inserted, updated or unchanged: together
  // records_seen) or a reject; every counted reject is a kept row (failed steps included).
  await expectNone(
    t,
    url,
    "records_seen = inserted + updated + unchanged, and records_rejected = its reject rows",
    `select r.id, r.records_seen, r.records_inserted, r.records_updated, r.records_unchanged,
            r.records_rejected, j.n as reject_rows
       from ingestion_runs r
       left join lateral (select count(*)::int as n from ingestion_rejects x where x.run_id = r.id) j on true
      where r.state <> 'running'
        and (r.records_seen <> r.records_inserted + r.records_updated + r.records_unchanged
             or r.records_rejected <> j.n)`,
  );
  for (const name of o.complete ?? []) {
    if (!o.sim) throw new Error("complete needs the simulator");
    const served = o.sim.offers(name).map((r) => r.article);
    const last = (
      await query<{ id: number; records_seen: number; records_rejected: number }>(
        url,
        "select id, records_seen, records_rejected from ingestion_runs where supplier = $1 and state = 'succeeded' order by finished_at desc limit 1",
        [name],
      )
    )[0];
    t.ok(last, `${name}: a succeeded run exists`);
    if (!last) continue;
    t.equal(
      last.records_seen + last.records_rejected,
      o.sim.liveCount(name),
      `${name}: the last success saw every record served (offers ${last.records_seen} + rejects ${last.records_rejected})`,
    );
    const live = await query<{ sku: string }>(
      url,
      "select sku from supplier_offers where supplier = $1 and delisted_at is null order by sku",
      [name],
    );
    t.equal(
      live.length + last.records_rejected,
      o.sim.liveCount(name),
      `${name}: live offers (${live.length}) + rejects (${last.records_rejected}) = records served`,
    );
    const servedSet = new Set(served);
    t.same(
      live.filter((r) => !servedSet.has(r.sku)).slice(0, 5),
      [],
      `${name}: every live offer is a SKU the supplier serves`,
    );
  }
  checked.push(o.complete?.length ? "records-accounted(full catalog)" : "records-accounted");

  if (o.sim) {
    for (const s of o.suppliers) await assertOneWalkPerSlot(t, url, o.sim, s.name, s.intervalMs);
    checked.push("one-walk-per-slot");
  }
  return checked;
}

/**
 * Invariant 1 from both sides. Every walk the simulator saw belongs to the run that
 * was started last before it (run rows are written before the first request), and:
 * - a run walks the catalog at most once;
 * - at most one non-forced success per slot, and no non-forced run starts in a slot
 *   after that slot's success finished (the due gate), so the walks of a slot are
 *   1 + the retries of failed runs;
 * - walks that ended never overlap another walk in time (the lease).
 */
async function assertOneWalkPerSlot(
  t: Test,
  url: string,
  sim: Simulator,
  supplier: string,
  intervalMs: number,
): Promise<void> {
  const runs = await query<{
    id: number;
    started: number;
    finished: number | null;
    state: string;
    trigger: string;
    slot: number;
  }>(
    url,
    `select id, (extract(epoch from started_at) * 1000)::float8 as started,
            (extract(epoch from finished_at) * 1000)::float8 as finished, state, trigger,
            (extract(epoch from slot_start) * 1000)::float8 as slot
       from ingestion_runs where supplier = $1 order by started_at, id`,
    [supplier],
  );
  const walks = [...sim.stats(supplier).walks].sort((a, b) => a.startedAt - b.startedAt);
  const walksPerRun = new Map<number, number>();
  const orphans: number[] = [];
  for (const w of walks) {
    let owner: (typeof runs)[number] | undefined;
    // 5 ms of slack: PostgreSQL's now() and Date.now() read the same host clock.
    for (const r of runs) if (r.started <= w.startedAt + 5) owner = r;
    if (!owner) orphans.push(w.startedAt);
    else walksPerRun.set(owner.id, (walksPerRun.get(owner.id) ?? 0) + 1);
  }
  t.same(orphans, [], `${supplier}: every walk belongs to a run`);
  t.same(
    [...walksPerRun].filter(([, n]) => n > 1),
    [],
    `${supplier}: no run walked the catalog twice (${walks.length} walks, ${runs.length} runs)`,
  );
  const bySlot = new Map<number, typeof runs>();
  for (const r of runs.filter((r) => r.trigger !== "forced")) {
    t.equal(r.slot % intervalMs, 0, `run ${r.id}: slot aligned to the interval`);
    bySlot.set(r.slot, [...(bySlot.get(r.slot) ?? []), r]);
  }
  for (const [slot, inSlot] of bySlot) {
    const wins = inSlot.filter((r) => r.state === "succeeded");
    t.ok(wins.length <= 1, `${supplier}: at most one success in slot ${new Date(slot).toISOString()}`);
    const win = wins[0];
    if (win?.finished) {
      const after = inSlot.filter((r) => r.started > win.finished!);
      t.same(
        after.map((r) => r.id),
        [],
        `${supplier}: no run after the slot's success (due gate)`,
      );
    }
  }
  for (let i = 1; i < walks.length; i++) {
    const prev = walks[i - 1]!;
    const cur = walks[i]!;
    if (prev.endedAt !== null && prev.endedAt > cur.startedAt) {
      t.fail(`${supplier}: walks overlap (${prev.startedAt}-${prev.endedAt} and ${cur.startedAt})`);
    }
  }
}
