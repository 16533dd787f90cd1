import t from "tap";
import type { SupplierConfig } from "../config/types.js";
import type { RunTrigger, TickOutcome } from "../ingestion/ports.js";
import { slotOffsetOf } from "../ingestion/slots.js";
import type { TickResult } from "../ingestion/tick.js";
import { createMetrics } from "../observability/metrics.js";
import { ManualClock } from "../platform/clock.js";
import { createLogger, type Logger } from "../platform/logger.js";
import { SecretRegistry } from "../platform/redact.js";
import { Scheduler } from "./scheduler.js";
import { clockTimer } from "./timer.js";

const HOUR = 3_600_000;
const MIN = 60_000;
const silent = createLogger({ level: "silent", secrets: new SecretRegistry() });

interface Fired {
  supplier: string;
  trigger: RunTrigger;
  at: number;
}

function harness(
  suppliers: SupplierConfig[],
  opts: {
    start?: number;
    maxConcurrentTicks?: number;
    outcome?: (f: Fired) => TickOutcome;
    errorCode?: (f: Fired) => string | null;
    tickMs?: (f: Fired) => number;
    last?: Map<string, Date | null>;
    /** The slot the database put the tick in (ms); the scheduler's own slot when absent. */
    databaseSlot?: (f: Fired) => number | undefined;
    /** A table lease's `leaseBusyUntilMs` for a `lease_busy` tick. */
    busyUntil?: (f: Fired) => number | undefined;
    /** An advisory lease's holder walks an earlier slot, for a `lease_busy` tick. */
    holderBehind?: (f: Fired) => boolean;
    log?: Logger;
  } = {},
) {
  const clock = new ManualClock(opts.start ?? 10 * HOUR);
  const metrics = createMetrics({ processMetrics: false });
  const fired: Fired[] = [];
  let running = 0;
  let maxRunning = 0;
  let resyncs = 0;
  const scheduler = new Scheduler({
    suppliers,
    maxConcurrentTicks: opts.maxConcurrentTicks ?? 4,
    retryBackoffMs: MIN,
    clock,
    timer: clockTimer(clock),
    log: opts.log ?? silent,
    metrics,
    lastSuccesses: async () => opts.last ?? new Map(),
    resyncClock: async () => {
      resyncs++;
    },
    async tick(supplier, trigger): Promise<TickResult> {
      const f = { supplier: supplier.name, trigger, at: clock.now() };
      fired.push(f);
      running++;
      maxRunning = Math.max(maxRunning, running);
      const ms = opts.tickMs?.(f) ?? 0;
      if (ms > 0) await clock.sleep(ms);
      running--;
      const slot = opts.databaseSlot?.(f);
      const busyUntil = opts.busyUntil?.(f);
      return {
        ...(busyUntil === undefined ? {} : { leaseBusyUntilMs: busyUntil }),
        ...(opts.holderBehind?.(f) ? { leaseHolderBehind: true } : {}),
        supplier: supplier.name,
        outcome: opts.outcome?.(f) ?? "success",
        ...(opts.errorCode ? { errorCode: opts.errorCode(f) } : {}),
        durationMs: ms,
        ...(slot === undefined ? {} : { slotStart: new Date(slot) }),
      };
    },
  });
  return { clock, scheduler, fired, metrics, maxRunning: () => maxRunning, resyncs: () => resyncs };
}

t.test("catch-up at start, then one tick per slot at a stable offset", async (t) => {
  const s: SupplierConfig = { name: "etm", intervalMs: HOUR, enabled: true };
  const h = harness([s], { start: 10 * HOUR + 5 * MIN });
  await h.scheduler.start();
  await h.clock.advance(0);
  t.equal(h.fired.length, 1, "no success in the current slot: ticks at once");
  t.equal(h.fired[0]?.at, 10 * HOUR + 5 * MIN);
  await h.clock.advance(10 * HOUR);
  const offset = slotOffsetOf("etm", HOUR);
  t.ok(offset <= 5 * MIN, "offset at most a tenth of the interval and 5 minutes");
  t.same(
    h.fired.slice(1).map((f) => f.at),
    Array.from({ length: 10 }, (_, i) => (11 + i) * HOUR + offset),
    "one tick per slot, each at the same offset",
  );
  await h.scheduler.stop();
});

t.test("a supplier that already succeeded in this slot waits for the next one", async (t) => {
  const s: SupplierConfig = { name: "iek", intervalMs: HOUR, enabled: true };
  const h = harness([s], {
    start: 10 * HOUR + 30 * MIN,
    last: new Map([["iek", new Date(10 * HOUR + MIN)]]),
  });
  await h.scheduler.start();
  await h.clock.advance(29 * MIN);
  t.equal(h.fired.length, 0);
  await h.clock.advance(31 * MIN + 5 * MIN);
  t.equal(h.fired.length, 1);
  t.equal(h.fired[0]?.at, 11 * HOUR + slotOffsetOf("iek", HOUR));
  await h.scheduler.stop();
});

t.test("disabled suppliers never tick", async (t) => {
  const h = harness([
    { name: "on", intervalMs: MIN, enabled: true },
    { name: "off", intervalMs: MIN, enabled: false },
  ]);
  await h.scheduler.start();
  await h.clock.advance(10 * MIN);
  t.ok(h.fired.length >= 10);
  t.notOk(h.fired.some((f) => f.supplier === "off"));
  await h.scheduler.stop();
});

t.test("a tick still running when the next fires is skipped, not queued", async (t) => {
  const s: SupplierConfig = { name: "slow", intervalMs: MIN, enabled: true };
  const h = harness([s], { tickMs: () => 150_000 });
  await h.scheduler.start();
  await h.clock.advance(10 * MIN);
  const skipped = await h.metrics.tickAttempts.get();
  const value = skipped.values.find((v) => v.labels.outcome === "skipped_overlap")?.value ?? 0;
  t.ok(value >= 2, `skipped_overlap counted (${value})`);
  const starts = h.fired.map((f) => f.at);
  for (let i = 1; i < starts.length; i++) t.ok(starts[i]! - starts[i - 1]! >= 150_000, "never two at once");
  t.equal(h.maxRunning(), 1);
  const stopping = h.scheduler.stop();
  await h.clock.advance(200_000);
  await stopping;
});

t.test("a skipped overlap warns only when the walk ran a whole slot", async (t) => {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({
    level: "info",
    secrets: new SecretRegistry(),
    destination: { write: (s: string) => lines.push(JSON.parse(s) as Record<string, unknown>) },
  });
  const skips = () =>
    lines
      .filter((l) => l.outcome === "skipped_overlap")
      .map((l) => ({ level: l.level, running_ms: l.running_ms }));
  // Started 50 s into a 1-minute slot: the first walk (fired at once) takes 30 s, so it
  // runs 20 s into the next slot: the schedule working, said at info.
  const late = harness([{ name: "late", intervalMs: MIN, enabled: true }], {
    start: 10 * HOUR + 50_000,
    tickMs: (f) => (f.at === 10 * HOUR + 50_000 ? 30_000 : 0),
    log,
  });
  await late.scheduler.start();
  await late.clock.advance(3 * MIN);
  await late.scheduler.stop();
  t.equal(late.fired[0]?.at, 10 * HOUR + 50_000, "the first walk fired at once, late in its slot");
  const overlap = skips();
  t.equal(overlap.length, 1, "its next slot's fire was skipped");
  t.equal(overlap[0]?.level, 30, "at info: the walk had not run a whole slot");
  t.ok((overlap[0]?.running_ms as number) < MIN, `running_ms ${overlap[0]?.running_ms}`);
  // The skipped slot is not lost: it is ticked for when the late walk ends (20 s into it),
  // and the slots after it at their offset.
  const offset = slotOffsetOf("late", MIN);
  t.same(
    late.fired.map((f) => f.at),
    [10 * HOUR + 50_000, 10 * HOUR + 80_000, 10 * HOUR + 2 * MIN + offset, 10 * HOUR + 3 * MIN + offset],
    "the overlapped slot made up when the walk ended, then one tick per slot",
  );

  // A walk of 150 s on 1-minute slots is slower than its schedule: a warning.
  lines.length = 0;
  const slow = harness([{ name: "slow", intervalMs: MIN, enabled: true }], { tickMs: () => 150_000, log });
  await slow.scheduler.start();
  await slow.clock.advance(5 * MIN);
  const stopping = slow.scheduler.stop();
  await slow.clock.advance(200_000);
  await stopping;
  const warned = skips().filter((s) => s.level === 40);
  t.ok(warned.length >= 1, `${warned.length} warnings`);
  const starts = slow.fired.map((f) => f.at);
  t.ok(
    starts.slice(1).every((at) => (at - 10 * HOUR) % MIN === slotOffsetOf("slow", MIN)),
    `a walk slower than its schedule makes up nothing: every later tick at the slot's offset (${starts.map((a) => (a - 10 * HOUR) / 1000).join(", ")} s)`,
  );
  t.ok(
    warned.every((s) => (s.running_ms as number) >= MIN),
    "each after the walk had run a whole slot",
  );
});

t.test("at most maxConcurrentTicks run at once", async (t) => {
  const suppliers = ["a", "b", "c", "d", "e"].map((name) => ({ name, intervalMs: HOUR, enabled: true }));
  const h = harness(suppliers, { maxConcurrentTicks: 2, tickMs: () => 1_000 });
  await h.scheduler.start();
  await h.clock.advance(10_000);
  t.equal(h.fired.length, 5, "all caught up");
  t.equal(h.maxRunning(), 2);
  await h.scheduler.stop();
});

t.test("failed ticks retry within the slot with doubling backoff", async (t) => {
  const s: SupplierConfig = { name: "flaky", intervalMs: HOUR, enabled: true };
  const start = 10 * HOUR;
  let n = 0;
  const h = harness([s], { start, outcome: () => (++n <= 3 ? "failed" : "success") });
  await h.scheduler.start();
  await h.clock.advance(HOUR - 1);
  t.same(
    h.fired.map((f) => [f.at - start, f.trigger]),
    [
      [0, "schedule"],
      [MIN, "retry"],
      [MIN + 2 * MIN, "retry"],
      [3 * MIN + 4 * MIN, "retry"],
    ],
    "1m, 2m, 4m, then success stops retrying",
  );
  await h.scheduler.stop();
});

t.test(
  "a walk held by a guard (partial, GUARD) is the slot's walk: no retry, next slot as usual",
  async (t) => {
    const s: SupplierConfig = { name: "held", intervalMs: HOUR, enabled: true };
    const start = 10 * HOUR;
    const h = harness([s], { start, outcome: () => "partial", errorCode: () => "GUARD" });
    await h.scheduler.start();
    await h.clock.advance(2 * HOUR - 1);
    const offset = slotOffsetOf("held", HOUR);
    t.same(
      h.fired.map((f) => [f.at - start, f.trigger]),
      [
        [0, "schedule"],
        [HOUR + offset, "schedule"],
      ],
      "one walk per slot, never a retry",
    );
    await h.scheduler.stop();
  },
);

t.test("backoff is capped at the interval and does not cross into the next slot", async (t) => {
  const s: SupplierConfig = { name: "down", intervalMs: 5 * MIN, enabled: true };
  const h = harness([s], { start: 10 * HOUR, outcome: () => "failed" });
  await h.scheduler.start();
  await h.clock.advance(30 * MIN);
  const gaps = h.fired.slice(1).map((f, i) => f.at - h.fired[i]!.at);
  t.ok(
    gaps.every((g) => g <= 5 * MIN + 30_000),
    "no gap beyond the interval plus its offset",
  );
  t.ok(h.fired.length >= 6, "keeps trying every slot");
  await h.scheduler.stop();
});

t.test("stop tolerates never-started and double stop, and waits for running ticks", async (t) => {
  const idle = harness([{ name: "x", intervalMs: MIN, enabled: true }]);
  await idle.scheduler.stop();
  await idle.scheduler.stop();
  t.equal(idle.scheduler.lifecycle, "stopped");

  const h = harness([{ name: "y", intervalMs: MIN, enabled: true }], { tickMs: () => 5_000 });
  await h.scheduler.start();
  await h.clock.advance(0);
  let stopped = false;
  const stopping = h.scheduler.stop().then(() => {
    stopped = true;
  });
  await h.clock.advance(1_000);
  t.notOk(stopped, "waits for the running tick");
  await h.clock.advance(5_000);
  await stopping;
  t.ok(stopped);
  await h.clock.advance(10 * MIN);
  t.equal(h.fired.length, 1, "nothing fires after stop");
  await h.scheduler.stop();
});

t.test("a tick the database put in the previous slot: re-measure, fire again for the slot", async (t) => {
  const s: SupplierConfig = { name: "etm", intervalMs: HOUR, enabled: true };
  const offset = slotOffsetOf("etm", HOUR);
  const h = harness([s], {
    last: new Map([["etm", new Date(10 * HOUR + 1)]]),
    // The first scheduled fire (slot 11h) reaches a database still in slot 10h: its
    // clock was 2 s behind what the stale offset said. Later ticks agree.
    databaseSlot: (f) => (f.at === 11 * HOUR + offset ? 10 * HOUR : undefined),
    outcome: (f) => (f.at === 11 * HOUR + offset ? "not_due" : "success"),
  });
  await h.scheduler.start();
  await h.clock.advance(HOUR + offset + 5_000);
  t.equal(h.resyncs(), 1, "the clock offset was re-measured");
  t.same(
    h.fired.map((f) => f.at),
    [11 * HOUR + offset, 11 * HOUR + offset + 250],
    "fired again for slot 11h, shortly after, instead of waiting for slot 12h",
  );
  await h.clock.advance(HOUR);
  t.same(h.fired.map((f) => f.at).slice(2), [12 * HOUR + offset], "then back to one fire per slot");
  await h.scheduler.stop();
});

t.test("a tick in the slot it was fired for, or a later one, changes nothing", async (t) => {
  const s: SupplierConfig = { name: "iek", intervalMs: HOUR, enabled: true };
  const offset = slotOffsetOf("iek", HOUR);
  const h = harness([s], {
    last: new Map([["iek", new Date(10 * HOUR + 1)]]),
    databaseSlot: (f) => Math.floor(f.at / HOUR) * HOUR + (f.at > 12 * HOUR ? HOUR : 0),
  });
  await h.scheduler.start();
  await h.clock.advance(3 * HOUR + offset + 1);
  t.equal(h.resyncs(), 0);
  t.same(
    h.fired.map((f) => f.at),
    [11 * HOUR + offset, 12 * HOUR + offset, 13 * HOUR + offset],
  );
  await h.scheduler.stop();
});

t.test("lease_busy on a table lease is checked again after its expiry, within the slot", async (t) => {
  const s: SupplierConfig = { name: "etm", intervalMs: HOUR, enabled: true };
  const start = 10 * HOUR + 5 * MIN;
  const h = harness([s], {
    start,
    outcome: (f) => (f.at < start + 3 * MIN ? "lease_busy" : "success"),
    busyUntil: (f) => (f.at < start + 3 * MIN ? f.at + MIN : undefined),
  });
  await h.scheduler.start();
  await h.clock.advance(5 * MIN);
  const [first, second, third] = h.fired;
  t.equal(first?.at, start, "catch-up tick: busy");
  t.equal(second?.trigger, "retry", "checked again");
  t.ok(
    second && second.at >= start + MIN + 50 && second.at < start + MIN + 1_000,
    `at the expiry (+${(second?.at ?? 0) - start} ms)`,
  );
  t.ok(
    second && third && third.at >= second.at + MIN + 50 && third.at < second.at + MIN + 1_000,
    "and again while renewed",
  );
  t.ok(h.fired.length >= 4, "until the lease is taken");
  t.equal(
    h.fired.filter((f) => f.at > start + 4 * MIN && f.at < start + 5 * MIN).length,
    0,
    "then no more checks",
  );
  await h.scheduler.stop();
});

t.test("lease_busy on an advisory lease is not retried: the holder is alive", async (t) => {
  const s: SupplierConfig = { name: "etm", intervalMs: HOUR, enabled: true };
  const start = 10 * HOUR + 5 * MIN;
  const h = harness([s], { start, outcome: () => "lease_busy" });
  await h.scheduler.start();
  await h.clock.advance(30 * MIN);
  t.equal(h.fired.length, 1, "one tick in the slot");
  await h.scheduler.stop();
});

t.test(
  "lease_busy on an advisory lease whose holder still walks the previous slot: checked again within the slot",
  async (t) => {
    const s: SupplierConfig = { name: "etm", intervalMs: 8_000, enabled: true };
    const start = 10 * HOUR + 100;
    // The other replica's walk of the previous slot runs 3 s into this one.
    const h = harness([s], {
      start,
      outcome: (f) => (f.at < start + 3_000 ? "lease_busy" : "success"),
      holderBehind: (f) => f.at < start + 3_000,
    });
    await h.scheduler.start();
    await h.clock.advance(7_000);
    t.same(
      h.fired.map((f) => [f.at - start, f.trigger]),
      [
        [0, "schedule"],
        [800, "retry"],
        [2_400, "retry"],
        [5_600, "retry"],
      ],
      "a tenth of the slot, doubling, until the lease is taken",
    );
    await h.scheduler.stop();

    // Retries stop at the slot's end: a holder that walks the previous slot throughout.
    const always = harness([s], { start, outcome: () => "lease_busy", holderBehind: () => true });
    await always.scheduler.start();
    await always.clock.advance(7_800);
    t.same(
      always.fired.map((f) => f.at - start),
      [0, 800, 2_400, 5_600],
      "no check past the slot's end (the next would be at 12,000)",
    );
    await always.scheduler.stop();
  },
);

t.test(
  "a cron supplier in Europe/London fires once per slot across both DST changes (injected clock)",
  async (t) => {
    const DAY = 24 * HOUR;
    const s: SupplierConfig = {
      name: "etm",
      intervalMs: DAY,
      enabled: true,
      cron: { expression: "30 1 * * *", zone: "Europe/London" },
    };
    for (const [start, expected] of [
      [
        "2026-03-27T12:00:00Z",
        ["2026-03-28T01:30", "2026-03-29T01:00", "2026-03-30T00:30", "2026-03-31T00:30"],
      ],
      [
        "2026-10-23T12:00:00Z",
        ["2026-10-24T00:30", "2026-10-25T00:30", "2026-10-26T01:30", "2026-10-27T01:30"],
      ],
    ] as const) {
      const startMs = Date.parse(start);
      // The slot containing the start has its success: no catch-up, only scheduled fires.
      const h = harness([s], { start: startMs, last: new Map([["etm", new Date(startMs)]]) });
      await h.scheduler.start();
      await h.clock.advance(4 * DAY - HOUR);
      await h.scheduler.stop();
      const fired = h.fired.map((f) => f.at);
      t.same(
        fired.map((at) => new Date(at).toISOString().slice(0, 16)),
        expected,
        `${start}: one fire per slot at 01:30 London (02:00 BST on the spring day)`,
      );
      const jitter = fired.map((at) => at % 60_000);
      t.ok(
        jitter.every((j) => j === jitter[0] && j < 15_000),
        `same jitter under 15 s in every slot (${jitter[0]} ms)`,
      );
    }
  },
);

t.test("a failed cron tick retries within its slot, capped by the slot's end", async (t) => {
  const s: SupplierConfig = {
    name: "etm",
    intervalMs: 10 * MIN,
    enabled: true,
    cron: { expression: "*/10 * * * *", zone: "UTC" },
  };
  const h = harness([s], { start: 10 * HOUR + MIN, outcome: () => "failed" });
  await h.scheduler.start();
  await h.clock.advance(9 * MIN - 1);
  const inSlot = h.fired.filter((f) => f.at < 10 * HOUR + 10 * MIN);
  t.same(
    inSlot.map((f) => [f.trigger, (f.at - 10 * HOUR) / MIN]),
    [
      ["schedule", 1],
      ["retry", 2],
      ["retry", 4],
      ["retry", 8],
    ],
    "backoff 1m, 2m, 4m; the next, 8m later, would pass the slot's end at 10:10",
  );
  await h.scheduler.stop();
});
