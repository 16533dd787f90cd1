/**
 * The time source. Domain code never calls `Date.now()` or `setTimeout` directly,
 * so tests can step through hours of schedule in milliseconds.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep(ms, signal) {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      const timer = setTimeout(
        () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
        Math.max(0, ms),
      );
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  },
};

/**
 * A clock that only moves when told to. `advance(ms)` runs every sleeper whose
 * time has come, in order, yielding to the event loop between them.
 */
export class ManualClock implements Clock {
  private current: number;
  private sleepers: { at: number; resolve: () => void }[] = [];
  constructor(start = 0) {
    this.current = start;
  }
  now(): number {
    return this.current;
  }
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const entry = { at: this.current + Math.max(0, ms), resolve };
      this.sleepers.push(entry);
      signal?.addEventListener(
        "abort",
        () => {
          this.sleepers = this.sleepers.filter((s) => s !== entry);
          reject(signal.reason);
        },
        { once: true },
      );
    });
  }
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    for (;;) {
      // Let work started by the previous wake-up settle before time moves on.
      await new Promise((r) => setImmediate(r));
      this.sleepers.sort((a, b) => a.at - b.at);
      const next = this.sleepers[0];
      if (!next || next.at > target) break;
      this.sleepers.shift();
      this.current = Math.max(this.current, next.at);
      next.resolve();
    }
    this.current = target;
    await new Promise((r) => setImmediate(r));
  }
  get pendingSleepers(): number {
    return this.sleepers.length;
  }
}

/**
 * Another clock shifted by `offsetMs`, which may change at any time (the database
 * clock's measured offset, or a test's injected skew). Sleeps are the base clock's:
 * a duration does not depend on where the clock's zero is.
 */
export class OffsetClock implements Clock {
  constructor(
    private readonly base: Clock,
    public offsetMs = 0,
  ) {}
  now(): number {
    return this.base.now() + this.offsetMs;
  }
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return this.base.sleep(ms, signal);
  }
}
