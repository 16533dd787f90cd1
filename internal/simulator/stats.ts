import type { SimulatorStats, SimulatorWalk } from "./types.js";

const REQUEST_TIMES_CAP = 100_000;

/**
 * Counters of one supplier. `requestTimes` is a ring buffer so recording a
 * request stays O(1) however long a benchmark runs.
 */
export class SupplierStats {
  requests = 0;
  byStatus: Record<number, number> = {};
  walksStarted = 0;
  walksCompleted = 0;
  walks: SimulatorWalk[] = [];
  concurrency = 0;
  maxConcurrency = 0;
  overBudget = 0;
  logins = 0;
  loginFailures = 0;
  loginViolations = 0;
  issuedTokens: string[] = [];
  expiredRequests = 0;
  bodies: { contentType: string | undefined; body: string }[] = [];
  urls: string[] = [];
  private times: number[] = [];
  private timesHead = 0;

  recordRequest(at: number): void {
    this.requests++;
    if (this.times.length < REQUEST_TIMES_CAP) this.times.push(at);
    else {
      this.times[this.timesHead] = at;
      this.timesHead = (this.timesHead + 1) % REQUEST_TIMES_CAP;
    }
  }

  /** Keeps the last 20 of `list`. */
  static remember<T>(list: T[], item: T): void {
    list.push(item);
    if (list.length > 20) list.shift();
  }

  recordStatus(code: number): void {
    this.byStatus[code] = (this.byStatus[code] ?? 0) + 1;
  }

  enter(): void {
    this.concurrency++;
    if (this.concurrency > this.maxConcurrency) this.maxConcurrency = this.concurrency;
  }

  leave(): void {
    this.concurrency--;
  }

  startWalk(at: number): void {
    this.walksStarted++;
    this.walks.push({ startedAt: at, endedAt: null });
  }

  /**
   * Closes the most recent open walk. The latest, not the oldest: a walk that
   * failed half-way stays open (endedAt null) instead of borrowing the end of a
   * later walk and looking like an overlap.
   */
  completeWalk(at: number): void {
    this.walksCompleted++;
    for (let i = this.walks.length - 1; i >= 0; i--) {
      const w = this.walks[i]!;
      if (w.endedAt === null) {
        w.endedAt = at;
        return;
      }
    }
  }

  reset(): void {
    this.requests = 0;
    this.byStatus = {};
    this.walksStarted = 0;
    this.walksCompleted = 0;
    this.walks = [];
    // In-flight requests are still in flight: keep `concurrency`, restart the high-water mark from it.
    this.maxConcurrency = this.concurrency;
    this.overBudget = 0;
    this.logins = 0;
    this.loginFailures = 0;
    this.loginViolations = 0;
    this.issuedTokens = [];
    this.expiredRequests = 0;
    this.bodies = [];
    this.urls = [];
    this.times = [];
    this.timesHead = 0;
  }

  snapshot(): SimulatorStats {
    return {
      requests: this.requests,
      byStatus: { ...this.byStatus },
      walksStarted: this.walksStarted,
      walksCompleted: this.walksCompleted,
      walks: this.walks.map((w) => ({ ...w })),
      concurrency: this.concurrency,
      maxConcurrency: this.maxConcurrency,
      overBudget: this.overBudget,
      logins: this.logins,
      loginFailures: this.loginFailures,
      loginViolations: this.loginViolations,
      issuedTokens: [...this.issuedTokens],
      expiredRequests: this.expiredRequests,
      bodies: this.bodies.map((b) => ({ ...b })),
      urls: [...this.urls],
      requestTimes: [...this.times.slice(this.timesHead), ...this.times.slice(0, this.timesHead)],
    };
  }
}
