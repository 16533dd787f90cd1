/**
 * The control watcher (docs/operations.md, Pausing and triggering): each replica polls
 * `ingestion_controls` and `ingestion_triggers` every `pollMs` (2 s by default) and
 *
 * - aborts the pause signal of a supplier that became paused, so a walk in progress
 *   stops at its next step boundary (`PAUSED`) within one poll;
 * - asks for a catch-up tick of a supplier that was resumed (the due gate decides);
 * - asks for a manual tick of each enabled, unpaused supplier with a pending trigger
 *   request; every replica asks, the lease picks one, and the request is claimed
 *   under it exactly once (internal/control/controls.ts).
 *
 * The ticks themselves check the pause under the lease; the watcher only makes a
 * pause reach a walk already running, and a trigger reach an idle daemon.
 * `start()`/`stop()` tolerate never-started and double-stop.
 */
import type { Clock } from "../platform/clock.js";
import { errorMessage } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";
import type { Queryable } from "../store/queryable.js";
import { type ControlSnapshot, readControls } from "./controls.js";

export interface ControlWatcherOptions {
  db: Queryable;
  clock: Clock;
  log: Logger;
  /** The suppliers this replica schedules (the enabled ones). */
  suppliers: readonly string[];
  /** Poll period in ms (default 2000). */
  pollMs?: number;
  /** A pending trigger request of an unpaused supplier: run a manual tick of it. */
  onTrigger(supplier: string): void;
  /** A supplier was resumed: tick it (its due gate decides whether it walks). */
  onResume(supplier: string): void;
}

export const DEFAULT_CONTROL_POLL_MS = 2_000;

export class ControlWatcher {
  private readonly paused = new Set<string>();
  private readonly pauseControllers = new Map<string, AbortController>();
  private readonly stopped = new AbortController();
  private loop: Promise<void> | undefined;
  private failing = false;
  private readonly known: ReadonlySet<string>;

  constructor(private readonly options: ControlWatcherOptions) {
    this.known = new Set(options.suppliers);
  }

  /** Reads the controls once (so the first ticks already see them), then polls. */
  async start(): Promise<void> {
    if (this.loop || this.stopped.signal.aborted) return;
    await this.poll(false);
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped.abort();
    await this.loop;
  }

  /** Aborts when `supplier` is paused: a walk passes it as its pause signal. */
  pauseSignal(supplier: string): AbortSignal {
    let controller = this.pauseControllers.get(supplier);
    if (!controller) {
      controller = new AbortController();
      if (this.paused.has(supplier)) controller.abort();
      this.pauseControllers.set(supplier, controller);
    }
    return controller.signal;
  }

  private async run(): Promise<void> {
    const pollMs = this.options.pollMs ?? DEFAULT_CONTROL_POLL_MS;
    for (;;) {
      try {
        await this.options.clock.sleep(pollMs, this.stopped.signal);
      } catch {
        return;
      }
      await this.poll(true);
    }
  }

  private async poll(act: boolean): Promise<void> {
    let snapshot: ControlSnapshot;
    try {
      snapshot = await readControls(this.options.db);
      if (this.failing) this.options.log.info("control watcher: database reachable again");
      this.failing = false;
    } catch (err) {
      if (!this.failing)
        this.options.log.warn({ err: errorMessage(err) }, "control watcher could not read controls");
      this.failing = true;
      return;
    }
    for (const supplier of this.known) {
      const pause = snapshot.paused.get(supplier);
      if (pause && !this.paused.has(supplier)) {
        this.paused.add(supplier);
        this.options.log.info(
          { supplier, paused_by: pause.pausedBy, reason: pause.reason ?? undefined },
          "supplier paused: walks stop at their next step boundary",
        );
        this.pauseControllers.get(supplier)?.abort();
      } else if (!pause && this.paused.has(supplier)) {
        this.paused.delete(supplier);
        this.pauseControllers.delete(supplier);
        this.options.log.info({ supplier }, "supplier resumed");
        if (act) this.options.onResume(supplier);
      }
      if (act && !pause && (snapshot.pendingTriggers.get(supplier) ?? 0) > 0)
        this.options.onTrigger(supplier);
    }
  }
}
