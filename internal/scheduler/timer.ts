import { Cron } from "croner";
import type { Clock } from "../platform/clock.js";

/** Fires a callback once at an absolute time. The scheduler's only source of wake-ups. */
export interface OneShotTimer {
  at(timeMs: number, fn: () => void): { cancel(): void };
}

/**
 * Real timers on croner one-shot jobs: each supplier has its own job, re-armed after
 * every fire, so ticks stay aligned to epoch slots rather than drifting like setInterval.
 */
export function cronerTimer(clock: Clock): OneShotTimer {
  return {
    at(timeMs, fn) {
      // croner refuses dates in the past; a due time that has passed fires now.
      const when = Math.max(timeMs, clock.now() + 5);
      const job = new Cron(new Date(when), { timezone: "UTC", catch: true }, () => fn());
      return { cancel: () => job.stop() };
    },
  };
}

/** Timers on an injected clock (tests step `ManualClock` through hours in milliseconds). */
export function clockTimer(clock: Clock): OneShotTimer {
  return {
    at(timeMs, fn) {
      const controller = new AbortController();
      clock.sleep(timeMs - clock.now(), controller.signal).then(fn, () => {});
      return { cancel: () => controller.abort() };
    },
  };
}
