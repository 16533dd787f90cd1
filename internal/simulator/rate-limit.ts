/**
 * Server-side token bucket enforcing a supplier's published rate limit:
 * `burst` tokens, refilled at `requestsPerSecond`. Time comes from the injected
 * clock so tests can reason about budgets without sleeping.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly requestsPerSecond: number,
    private readonly burst: number,
    private readonly now: () => number,
  ) {
    this.tokens = burst;
    this.last = now();
  }

  /** Takes one token if available; false means the request is over budget. */
  tryTake(): boolean {
    const t = this.now();
    const elapsed = Math.max(0, t - this.last);
    this.last = t;
    this.tokens = Math.min(this.burst, this.tokens + (elapsed * this.requestsPerSecond) / 1000);
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}
