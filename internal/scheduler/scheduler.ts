/**
 * One ticker per enabled supplier (docs/architecture.md, Scheduler).
 *
 * - Each supplier fires at a stable offset into each epoch-aligned slot.
 * - At start, a supplier with no success in the current slot ticks at once (catch-up).
 * - At most `maxConcurrentTicks` ticks run at once; a supplier whose previous tick is
 *   still running or waiting is skipped (`skipped_overlap`), never queued twice. A
 *   tick fired late in its slot (catch-up, retry) that ran into the next slot fires
 *   once more when it ends, for that slot, if it still lasts (the due gate decides); a
 *   walk slower than its schedule makes up nothing.
 * - After `failed` / `partial` / `lease_lost`, a retry is armed within the slot with
 *   backoff (retryBackoffMs, doubling, capped at the interval); each retry is a new
 *   run with trigger `retry`. A complete walk held by a guard (`partial`, `GUARD`) is
 *   the slot's walk and is not retried.
 * - `clock` is the database clock (the host clock plus its measured offset): fire
 *   times are on the database's slot grid. A tick reads its slot from the database
 *   itself; if that slot is earlier than the one it was fired for, the offset is
 *   stale: the clock is re-measured and the supplier fired again for its slot.
 * - Scale-out: a fire waits for a free tick *before* the tick takes its lease, so a
 *   replica whose ticks are all busy holds no lease it cannot use; another replica
 *   with capacity takes it, and this one later finds it `lease_busy` or `not_due`.
 */
import type { SupplierConfig } from "../config/types.js";
import type { RunTrigger, TickOutcome } from "../ingestion/ports.js";
import { fireTimeOf, nextFireAt, supplierSlotAt } from "../ingestion/slots.js";
import type { TickResult } from "../ingestion/tick.js";
import type { Metrics } from "../observability/metrics.js";
import type { Clock } from "../platform/clock.js";
import { errorMessage } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";
import type { OneShotTimer } from "./timer.js";

export interface SchedulerOptions {
  suppliers: SupplierConfig[];
  maxConcurrentTicks: number;
  retryBackoffMs: number;
  clock: Clock;
  timer: OneShotTimer;
  log: Logger;
  metrics: Metrics;
  /** Runs one tick; never throws for supplier-level failures. */
  tick(supplier: SupplierConfig, trigger: RunTrigger): Promise<TickResult>;
  /** Last success per supplier, for catch-up at start. */
  lastSuccesses(): Promise<Map<string, Date | null>>;
  /** Re-measures `clock`'s offset to the database (a tick found the database in an earlier slot). */
  resyncClock?(): Promise<unknown>;
}

export type SchedulerState = "idle" | "running" | "stopping" | "stopped";

const RETRY_OUTCOMES: ReadonlySet<TickOutcome> = new Set(["failed", "partial", "lease_lost"]);
/** Shortest wait before firing again for a slot the database had not reached yet. */
const REFIRE_MIN_MS = 250;

interface Ticker {
  supplier: SupplierConfig;
  timer?: { cancel(): void };
  busy: boolean;
  /** When the running tick was fired, and how long the slot it fired in lasts. */
  running?: { sinceMs: number; slotMs: number };
  /**
   * The slot whose fire was skipped because a tick fired late in the previous slot was
   * still running (not a walk slower than its schedule): made up when that tick ends,
   * if the slot is still current.
   */
  overlappedSlot?: number;
  /** Consecutive failed ticks in the current slot (the retry backoff's exponent). */
  failures: AttemptsInSlot;
  /** Checks of a lease whose holder walks an earlier slot, in the current slot. */
  behindChecks: AttemptsInSlot;
}

/** Attempts counted within one slot, for a doubling backoff: a new slot starts again from the first. */
class AttemptsInSlot {
  private slotStartMs = Number.NaN;
  private count = 0;

  /** Counts one more attempt in the slot starting at `slotStartMs`; returns how many came before it there. */
  next(slotStartMs: number): number {
    if (this.slotStartMs !== slotStartMs) {
      this.slotStartMs = slotStartMs;
      this.count = 0;
    }
    return this.count++;
  }

  reset(): void {
    this.count = 0;
  }
}

export class Scheduler {
  private state: SchedulerState = "idle";
  private readonly tickers = new Map<string, Ticker>();
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Tick permits in use: at most `maxConcurrentTicks` ticks run at once. */
  private permitsInUse = 0;
  /** Fires waiting for a tick permit, first come first served. */
  private readonly waitingForPermit: (() => void)[] = [];

  constructor(private readonly options: SchedulerOptions) {}

  get lifecycle(): SchedulerState {
    return this.state;
  }

  /** Arms every enabled supplier; catches up those with no success in the current slot. */
  async start(): Promise<void> {
    if (this.state !== "idle") return;
    this.state = "running";
    const { clock, log } = this.options;
    let last = new Map<string, Date | null>();
    try {
      last = await this.options.lastSuccesses();
    } catch (err) {
      log.warn({ err: errorMessage(err) }, "could not read last successes; catching up every supplier");
    }
    const now = clock.now();
    for (const supplier of this.options.suppliers) {
      if (!supplier.enabled) continue;
      const ticker: Ticker = {
        supplier,
        busy: false,
        failures: new AttemptsInSlot(),
        behindChecks: new AttemptsInSlot(),
      };
      this.tickers.set(supplier.name, ticker);
      const lastSuccess = last.get(supplier.name)?.getTime();
      const slotStart = supplierSlotAt(now, supplier).startMs;
      if (lastSuccess === undefined || lastSuccess < slotStart) {
        this.fire(ticker, "schedule");
      } else {
        this.arm(ticker, nextFireAt(now, supplier), "schedule");
      }
    }
    log.info({ suppliers: this.tickers.size }, "scheduler started");
  }

  /** Stops arming ticks and waits for the running ones. Safe before start and twice. */
  async stop(): Promise<void> {
    if (this.state === "idle") {
      this.state = "stopped";
      return;
    }
    if (this.state === "running") this.state = "stopping";
    for (const ticker of this.tickers.values()) ticker.timer?.cancel();
    for (const wake of this.waitingForPermit.splice(0)) wake();
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    this.state = "stopped";
  }

  /**
   * Ticks `supplier` now, outside its schedule: a resumed supplier catches up (trigger
   * `schedule`, the due gate decides, retries as usual), and a trigger request is served
   * (`manual`: no retry and no re-arming; the request stays pending if this tick does not
   * serve it, and the watcher asks again). Skipped quietly while its previous tick runs.
   */
  runNow(supplier: string, trigger: "schedule" | "manual"): void {
    const ticker = this.tickers.get(supplier);
    if (!ticker || ticker.busy || this.state !== "running") return;
    if (trigger === "schedule") {
      this.fire(ticker, "schedule");
      return;
    }
    ticker.busy = true;
    const slot = supplierSlotAt(this.options.clock.now(), ticker.supplier);
    ticker.running = { sinceMs: this.options.clock.now(), slotMs: slot.endMs - slot.startMs };
    const run = (async () => {
      await this.acquireTickPermit();
      try {
        if (this.state === "running") await this.options.tick(ticker.supplier, "manual");
      } catch (err) {
        this.options.log.error({ supplier, err: errorMessage(err) }, "manual tick threw");
      } finally {
        this.releaseTickPermit();
      }
    })().finally(() => {
      ticker.busy = false;
      ticker.running = undefined;
      this.inFlight.delete(run);
      this.makeUpOverlappedSlot(ticker);
    });
    this.inFlight.add(run);
  }

  private arm(ticker: Ticker, atMs: number, trigger: RunTrigger): void {
    ticker.timer?.cancel();
    if (this.state !== "running") return;
    ticker.timer = this.options.timer.at(atMs, () => this.fire(ticker, trigger));
  }

  private fire(ticker: Ticker, trigger: RunTrigger): void {
    if (this.state !== "running") return;
    const { supplier } = ticker;
    if (ticker.busy) {
      this.options.metrics.tickAttempts.inc({ supplier: supplier.name, outcome: "skipped_overlap" });
      // A warning when the walk is slower than its schedule: it has run a whole slot. A tick
      // fired late in its slot (a daemon started near a boundary, a retry) that runs into
      // the next one is the schedule working: the same line at info, counted the same.
      const running = ticker.running;
      const runningMs = running ? this.options.clock.now() - running.sinceMs : undefined;
      const slow = running === undefined || (runningMs ?? 0) >= running.slotMs;
      this.options.log[slow ? "warn" : "info"](
        { supplier: supplier.name, outcome: "skipped_overlap", running_ms: runningMs },
        "previous tick has not completed; scheduled tick skipped",
      );
      if (!slow) ticker.overlappedSlot = supplierSlotAt(this.options.clock.now(), supplier).startMs;
      this.arm(ticker, nextFireAt(this.options.clock.now(), supplier), "schedule");
      return;
    }
    ticker.busy = true;
    const slot = supplierSlotAt(this.options.clock.now(), supplier);
    ticker.running = { sinceMs: this.options.clock.now(), slotMs: slot.endMs - slot.startMs };
    // The next slot is armed now, not when this tick ends: a tick that outlives its
    // slot makes the next fire a visible `skipped_overlap`, as the contract says.
    this.arm(ticker, nextFireAt(this.options.clock.now(), supplier), "schedule");
    const firedSlot = slot.startMs;
    const run = this.runTicker(ticker, trigger, firedSlot).finally(() => {
      ticker.busy = false;
      ticker.running = undefined;
      this.inFlight.delete(run);
      this.makeUpOverlappedSlot(ticker);
    });
    this.inFlight.add(run);
  }

  /**
   * A tick fired late in its slot (a start-up catch-up, a retry) ran into the next slot
   * and that slot's fire was skipped: fire for it now that the tick has ended, while the
   * slot lasts (the due gate decides: `not_due` if another replica walked it). Left alone,
   * the slot could go without a walk: the other replicas found the lease busy with a
   * holder that, at that moment, was no longer behind. A walk slower than its schedule
   * makes nothing up: its skipped slots stay skipped.
   */
  private makeUpOverlappedSlot(ticker: Ticker): void {
    const slot = ticker.overlappedSlot;
    ticker.overlappedSlot = undefined;
    if (slot === undefined || ticker.busy || this.state !== "running") return;
    if (supplierSlotAt(this.options.clock.now(), ticker.supplier).startMs !== slot) return;
    this.options.log.info(
      { supplier: ticker.supplier.name, slot: new Date(slot).toISOString() },
      "the previous tick ran into this slot and its fire was skipped; ticking for it now",
    );
    this.fire(ticker, "schedule");
  }

  private async runTicker(ticker: Ticker, trigger: RunTrigger, firedSlot: number): Promise<void> {
    const { supplier } = ticker;
    await this.acquireTickPermit();
    let result: TickResult | undefined;
    try {
      if (this.state !== "running") return;
      result = await this.options.tick(supplier, trigger);
    } catch (err) {
      this.options.log.error({ supplier: supplier.name, err: errorMessage(err) }, "tick threw");
    } finally {
      this.releaseTickPermit();
    }
    const ranSlot = result?.slotStart?.getTime();
    if (ranSlot !== undefined && ranSlot < firedSlot) {
      await this.refireForSlot(ticker, ranSlot, firedSlot);
      return;
    }
    // A complete walk a guard held is the slot's walk (docs/connectors.md, Guards): the verdict is about
    // the data, so it is not retried; the next slot's walk checks again.
    // A walk stopped by a pause is not retried either: resume ticks the supplier again.
    const settled = result?.errorCode === "GUARD" || result?.errorCode === "PAUSED";
    const outcome = settled ? "success" : (result?.outcome ?? "failed");
    this.armAfter(ticker, outcome, result?.leaseBusyUntilMs, result?.leaseHolderBehind === true);
  }

  /**
   * The database put the tick in an earlier slot than this clock fired it for: the
   * measured offset is stale (the host clock stepped, or drifted since the last
   * measurement). Re-measure, then fire again for the intended slot, so its walk is
   * not lost to a `not_due` of the previous one.
   */
  private async refireForSlot(ticker: Ticker, ranSlot: number, firedSlot: number): Promise<void> {
    const { supplier } = ticker;
    this.options.log.warn(
      {
        supplier: supplier.name,
        slot: new Date(firedSlot).toISOString(),
        database_slot: new Date(ranSlot).toISOString(),
      },
      "tick ran in an earlier slot of the database clock than it was fired for; re-measuring the clock offset",
    );
    try {
      await this.options.resyncClock?.();
    } catch (err) {
      this.options.log.warn({ err: errorMessage(err) }, "could not re-measure the database clock");
    }
    const now = this.options.clock.now();
    const due = fireTimeOf(supplierSlotAt(firedSlot, supplier), supplier);
    this.arm(ticker, Math.max(due, now + REFIRE_MIN_MS), "schedule");
  }

  private armAfter(
    ticker: Ticker,
    outcome: TickOutcome,
    leaseBusyUntilMs?: number,
    leaseHolderBehind = false,
  ): void {
    const { supplier } = ticker;
    const now = this.options.clock.now();
    const nextSlot = nextFireAt(now, supplier);
    const current = supplierSlotAt(now, supplier);
    if (outcome === "lease_busy" && leaseBusyUntilMs !== undefined) {
      // A table lease's holder may have died: it is replaced only by a tick after the
      // lease's expiry, so check again then (the due gate makes it not_due if the holder
      // finished; a live holder has renewed it and it is busy again). Spread over a
      // second so replicas do not all ask at once.
      const at = Math.max(now, leaseBusyUntilMs) + 50 + Math.floor(Math.random() * 950);
      if (at < current.endMs && at < nextSlot) this.arm(ticker, at, "retry");
      return;
    }
    if (outcome === "lease_busy" && leaseHolderBehind) {
      // The holder is still walking an earlier slot (its walk ran over), and skips this
      // slot as an overlap when it fires: left to it, the slot would have no walk. Check
      // again, from a tenth of the slot (or the retry backoff, if shorter) doubling, until
      // the lease is free: then the due gate decides.
      const base = Math.min(this.options.retryBackoffMs, (current.endMs - current.startMs) / 10);
      const at = now + base * 2 ** Math.min(ticker.behindChecks.next(current.startMs), 30);
      if (at < current.endMs && at < nextSlot) this.arm(ticker, at, "retry");
      return;
    }
    if (!RETRY_OUTCOMES.has(outcome)) {
      if (outcome === "success") ticker.failures.reset();
      return;
    }
    const before = ticker.failures.next(current.startMs);
    const backoff = Math.min(
      this.options.retryBackoffMs * 2 ** Math.min(before, 30),
      current.endMs - current.startMs,
    );
    const retryAt = now + backoff;
    if (retryAt < current.endMs && retryAt < nextSlot) {
      this.options.log.info(
        { supplier: supplier.name, outcome, retry_in_ms: backoff, attempt: before + 1 },
        "retrying within the slot",
      );
      this.arm(ticker, retryAt, "retry");
    }
  }

  /** Waits for one of the `maxConcurrentTicks` tick permits (at once when stopping). */
  private async acquireTickPermit(): Promise<void> {
    while (this.permitsInUse >= this.options.maxConcurrentTicks && this.state === "running") {
      await new Promise<void>((resolve) => this.waitingForPermit.push(resolve));
    }
    this.permitsInUse++;
  }

  private releaseTickPermit(): void {
    this.permitsInUse--;
    this.waitingForPermit.shift()?.();
  }
}
