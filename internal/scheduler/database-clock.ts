/**
 * The clock the scheduler runs on: the host's clock corrected by its measured
 * offset to PostgreSQL's (docs/architecture.md, Scheduler: slots follow the database's clock).
 *
 * Invariants:
 * - A tick never trusts this clock for its slot: it reads `now()` under its lease.
 *   This clock only decides *when* ticks fire, so that replicas whose host clocks
 *   disagree by minutes still fire in the slot the database will assign.
 * - The offset is measured at start and every `resyncEveryMs` (10 minutes), and on
 *   demand when a tick finds itself in an earlier slot than it was fired for. Each
 *   measurement takes several round trips and keeps the one with the shortest round
 *   trip (its midpoint is the tightest bound on when the server read its clock).
 * - A failed measurement keeps the previous offset: the clock never jumps to 0.
 * - `start()`/`stop()` tolerate never-started and double-stop.
 */
import { type Clock, OffsetClock } from "../platform/clock.js";
import { errorMessage } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";

export interface DatabaseClockOptions {
  /** This host's clock (in tests, possibly skewed on purpose). */
  host: Clock;
  /** The database server's clock at the moment the statement runs (`clock_timestamp()`), in ms. */
  readDatabaseMs(): Promise<number>;
  log: Logger;
  /** Re-measure this often; default 10 minutes. */
  resyncEveryMs?: number;
  /** Offsets larger than this (either way) are logged as a warning; default 1 s. */
  warnAboveMs?: number;
  /** Round trips per measurement; default 5. */
  samples?: number;
}

/** One measurement of the host's offset to the database clock. */
export interface ClockMeasurement {
  /** Database clock minus host clock, in ms: positive when the database is ahead. */
  offsetMs: number;
  /** Round trip of the sample the offset comes from: the offset is known to ± half of it. */
  roundTripMs: number;
}

export const DEFAULT_RESYNC_EVERY_MS = 600_000;
export const DEFAULT_WARN_ABOVE_MS = 1_000;

export class DatabaseClock implements Clock {
  private readonly clock: OffsetClock;
  private readonly resyncEveryMs: number;
  private readonly warnAboveMs: number;
  private readonly samples: number;
  private state: "idle" | "running" | "stopped" = "idle";
  private readonly stopper = new AbortController();
  private loop: Promise<void> | undefined;
  private measuring: Promise<ClockMeasurement | undefined> | undefined;
  private last: ClockMeasurement | undefined;

  constructor(private readonly options: DatabaseClockOptions) {
    this.clock = new OffsetClock(options.host, 0);
    this.resyncEveryMs = options.resyncEveryMs ?? DEFAULT_RESYNC_EVERY_MS;
    this.warnAboveMs = options.warnAboveMs ?? DEFAULT_WARN_ABOVE_MS;
    this.samples = Math.max(1, options.samples ?? 5);
  }

  now(): number {
    return this.clock.now();
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return this.clock.sleep(ms, signal);
  }

  /** The offset in force (0 until the first measurement succeeded). */
  get offsetMs(): number {
    return this.clock.offsetMs;
  }

  /** The last successful measurement, if any. */
  get lastMeasurement(): ClockMeasurement | undefined {
    return this.last;
  }

  /** Measures once (awaited), then again every `resyncEveryMs` until `stop()`. */
  async start(): Promise<void> {
    if (this.state !== "idle") return;
    this.state = "running";
    await this.resync();
    this.loop = (async () => {
      for (;;) {
        try {
          await this.options.host.sleep(this.resyncEveryMs, this.stopper.signal);
        } catch {
          return;
        }
        await this.resync();
      }
    })();
  }

  async stop(): Promise<void> {
    if (this.state === "stopped") return;
    this.state = "stopped";
    this.stopper.abort();
    await this.loop;
    await this.measuring;
  }

  /**
   * Measures the offset now and applies it; concurrent calls share one measurement.
   * Returns undefined (and keeps the previous offset) when the database did not answer.
   */
  resync(): Promise<ClockMeasurement | undefined> {
    this.measuring ??= this.measureAndApply().finally(() => {
      this.measuring = undefined;
    });
    return this.measuring;
  }

  private async measureAndApply(): Promise<ClockMeasurement | undefined> {
    const { log } = this.options;
    let m: ClockMeasurement;
    try {
      m = await this.measure();
    } catch (err) {
      log.warn(
        { err: errorMessage(err), offset_ms: this.clock.offsetMs },
        "could not measure the database clock; keeping the previous offset",
      );
      return undefined;
    }
    const first = this.last === undefined;
    this.last = m;
    this.clock.offsetMs = m.offsetMs;
    const line = { offset_ms: Math.round(m.offsetMs), round_trip_ms: Math.round(m.roundTripMs * 10) / 10 };
    if (Math.abs(m.offsetMs) > this.warnAboveMs) {
      log.warn(
        { ...line, threshold_ms: this.warnAboveMs },
        "host clock differs from the database clock by more than the threshold; scheduling by the database clock",
      );
    } else if (first) {
      log.info(line, "database clock offset measured");
    } else {
      log.debug(line, "database clock offset measured");
    }
    return m;
  }

  /** Several round trips; the one with the shortest round trip gives the offset. */
  private async measure(): Promise<ClockMeasurement> {
    const { host, readDatabaseMs } = this.options;
    let best: ClockMeasurement | undefined;
    for (let i = 0; i < this.samples; i++) {
      const sent = host.now();
      const db = await readDatabaseMs();
      const received = host.now();
      const roundTripMs = Math.max(0, received - sent);
      const sample = { offsetMs: db - (sent + received) / 2, roundTripMs };
      if (!best || sample.roundTripMs < best.roundTripMs) best = sample;
    }
    if (!best) throw new Error("no sample");
    return best;
  }
}
