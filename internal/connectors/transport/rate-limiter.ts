import type { Clock } from "../../platform/clock.js";

/**
 * A supplier's client-side rate limiter: a token bucket (`requestsPerSecond`
 * refill, `burst` capacity) plus a cap of `maxConcurrency` requests in flight,
 * plus a supplier-wide pause set by `Retry-After`. One per supplier for the
 * process's lifetime, shared by every walk, so the budget is never spent twice.
 */

export interface RateLimiterOptions {
  requestsPerSecond: number;
  burst: number;
  maxConcurrency: number;
  clock: Clock;
  /** Called with the ms a successful `acquire` waited (0 included), for `rateLimitWait`. */
  onWait?: (ms: number) => void;
}

/**
 * The bucket refills slightly slower than the published rate. The supplier
 * measures arrivals, we measure departures: without headroom, a request that
 * reaches the server a millisecond earlier than its predecessor's spacing
 * would be over budget. 2 % keeps > 95 % of the budget usable and lets the
 * server-side slack grow by one token every 50 requests.
 */
const RATE_HEADROOM = 0.98;

/**
 * Headroom alone starts at zero slack, and a request's latency varies (the
 * first one also pays the TCP connect): a later request that arrives sooner
 * after its predecessor than it left would find the server's bucket a hair
 * short. So a request leaves only when the bucket holds 1 token plus the
 * refill of this allowance (at most one token); the margin stays in the
 * bucket, costing at most one request once. Half a token let requests through
 * early when the worker was busy with other pages (bench/README.md, Figures behind code choices).
 */
const LATENCY_ALLOWANCE_MS = 100;
const MAX_MARGIN_TOKENS = 1;

export class RateLimiter {
  private tokens: number;
  private last: number;
  private pausedUntil = 0;
  private inFlight = 0;
  private readonly slotWaiters: (() => void)[] = [];
  private readonly rate: number;
  /** Tokens a request needs to leave: 1 plus the latency margin, never more than the bucket holds. */
  private readonly threshold: number;

  constructor(private readonly options: RateLimiterOptions) {
    this.tokens = options.burst;
    this.last = options.clock.now();
    this.rate = (options.requestsPerSecond * RATE_HEADROOM) / 1000;
    this.threshold = Math.min(
      options.burst,
      1 + Math.min(MAX_MARGIN_TOKENS, this.rate * LATENCY_ALLOWANCE_MS),
    );
  }

  /**
   * Waits for a concurrency slot and a token, honouring any pause. Returns the
   * release function of the slot (idempotent). Rejects with the signal's
   * reason when it aborts first; nothing is held then.
   */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    const clock = this.options.clock;
    const started = clock.now();
    await this.takeSlot(signal);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.inFlight--;
      this.slotWaiters.shift()?.();
    };
    try {
      for (;;) {
        signal?.throwIfAborted();
        const now = clock.now();
        if (now < this.pausedUntil) {
          await clock.sleep(this.pausedUntil - now, signal);
          continue;
        }
        this.refill(now);
        if (this.tokens >= this.threshold) {
          this.tokens -= 1;
          break;
        }
        await clock.sleep(Math.ceil((this.threshold - this.tokens) / this.rate), signal);
      }
    } catch (err) {
      release();
      throw err;
    }
    this.options.onWait?.(clock.now() - started);
    return release;
  }

  /** Pauses the whole supplier for `ms` from now (`Retry-After`); never shortens a pause. */
  pause(ms: number): void {
    this.pausedUntil = Math.max(this.pausedUntil, this.options.clock.now() + ms);
  }

  /** Requests holding a slot right now. */
  get active(): number {
    return this.inFlight;
  }

  private refill(now: number): void {
    const elapsed = Math.max(0, now - this.last);
    this.last = now;
    this.tokens = Math.min(this.options.burst, this.tokens + elapsed * this.rate);
  }

  private takeSlot(signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    if (this.inFlight < this.options.maxConcurrency) {
      this.inFlight++;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        signal?.removeEventListener("abort", onAbort);
        this.inFlight++;
        resolve();
      };
      const onAbort = () => {
        const at = this.slotWaiters.indexOf(grant);
        if (at >= 0) this.slotWaiters.splice(at, 1);
        reject(signal?.reason);
      };
      this.slotWaiters.push(grant);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}
