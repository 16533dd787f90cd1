import { hashString } from "./catalog.js";
import type { SimulatorFaults } from "./types.js";

/** What a request gets instead of (or on top of) its normal page. */
export type FaultAction =
  | { kind: "redirect"; location: string }
  | { kind: "reset" }
  | { kind: "hang" }
  | { kind: "status"; code: number }
  | { kind: "retryAfter"; seconds: number; httpDate: boolean }
  | { kind: "truncate" }
  | { kind: "invalidJson" }
  | { kind: "missingRecords" }
  | { kind: "oversized"; bytes: number }
  | { kind: "bodyError"; code: number; message: string }
  | { kind: "bomb" };

/** mulberry32: tiny seeded PRNG, so `rate` faults hit the same requests on every run. */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The fault settings of one supplier and the counters that make them
 * deterministic. Setting faults resets the counters and the PRNG, and wakes
 * hanging requests so they re-check whether they are still meant to hang.
 */
export class FaultState {
  private faults: SimulatorFaults = {};
  private statusUsed = 0;
  private retryAfterUsed = 0;
  private bodyErrorUsed = 0;
  private random: () => number;
  private readonly hangWaiters = new Set<() => void>();

  constructor(private readonly supplier: string) {
    this.random = seededRandom(hashString(supplier));
  }

  get current(): SimulatorFaults {
    return this.faults;
  }

  set(faults: SimulatorFaults): void {
    this.faults = { ...faults };
    this.statusUsed = 0;
    this.retryAfterUsed = 0;
    this.bodyErrorUsed = 0;
    this.random = seededRandom(hashString(this.supplier));
    for (const wake of [...this.hangWaiters]) wake();
  }

  /**
   * The fault for `page` of a walk, consuming its `times` budget, or null to
   * serve normally. Checked in a fixed order so combined faults stay predictable.
   */
  decide(page: number): FaultAction | null {
    const f = this.faults;
    if (f.redirectTo !== undefined) return { kind: "redirect", location: f.redirectTo };
    if (f.resetOnPage === page) return { kind: "reset" };
    if (f.hangOnPage === page) return { kind: "hang" };
    const s = f.status;
    if (
      s &&
      (s.onPage === undefined || s.onPage === page) &&
      (s.times === undefined || this.statusUsed < s.times)
    ) {
      // Draw only for eligible requests, so the sequence depends on the walk, not on unrelated pages.
      if (s.rate === undefined || this.random() < s.rate) {
        this.statusUsed++;
        return { kind: "status", code: s.code };
      }
    }
    const r = f.retryAfter;
    if (
      r &&
      (r.onPage === undefined || r.onPage === page) &&
      (r.times === undefined || this.retryAfterUsed < r.times)
    ) {
      this.retryAfterUsed++;
      return { kind: "retryAfter", seconds: r.seconds ?? 1, httpDate: r.httpDate ?? false };
    }
    const b = f.bodyError;
    if (
      b &&
      (b.onPage === undefined || b.onPage === page) &&
      (b.times === undefined || this.bodyErrorUsed < b.times)
    ) {
      this.bodyErrorUsed++;
      return { kind: "bodyError", code: b.code, message: b.message ?? `simulated supplier error ${b.code}` };
    }
    if (f.bombOnPage === page) return { kind: "bomb" };
    if (f.truncateOnPage === page) return { kind: "truncate" };
    if (f.invalidJsonOnPage === page) return { kind: "invalidJson" };
    if (f.missingRecordsPathOnPage === page) return { kind: "missingRecords" };
    if (f.oversizedBodyBytes !== undefined) return { kind: "oversized", bytes: f.oversizedBodyBytes };
    return null;
  }

  /**
   * Waits while `page` is meant to hang. Resolves true once the fault no longer
   * names this page (the request is then served), false when `signal` aborts
   * (client gone or server closing).
   */
  waitWhileHanging(page: number, signal: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      if (signal.aborted) {
        resolve(false);
        return;
      }
      const finish = (released: boolean) => {
        this.hangWaiters.delete(check);
        signal.removeEventListener("abort", onAbort);
        resolve(released);
      };
      const check = () => {
        if (this.faults.hangOnPage !== page) finish(true);
      };
      const onAbort = () => finish(false);
      this.hangWaiters.add(check);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }
}
