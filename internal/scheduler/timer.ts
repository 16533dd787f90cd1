import { Cron } from "croner";
import { type Clock, systemClock } from "../platform/clock.js";

/** Fires a callback once at an absolute time. The scheduler's only source of wake-ups. */
export interface OneShotTimer {
  at(timeMs: number, fn: () => void): { cancel(): void };
}

/**
 * Real timers on croner one-shot jobs: each supplier has its own job, re-armed after
 * every fire, so ticks stay aligned to epoch slots rather than drifting like setInterval.
 *
 * `timeMs` is on `clock` (the database clock), which may be minutes away from the host
 * clock that croner and setTimeout run on (`host`): every wait is computed on `clock`,
 * and croner is given the host time at which `clock` reaches `timeMs`.
 */
export function cronerTimer(clock: Clock, host: Clock = systemClock): OneShotTimer {
  return {
    at(timeMs, fn) {
      let cancelled = false;
      let cancelCurrent: () => void = () => {};
      const arm = () => {
        if (cancelled) return;
        const wait = timeMs - clock.now();
        if (wait > APPROACH_MS) {
          // croner wakes every 30 s to re-check a pending job; with 1,000 suppliers at 1h
          // that is 33 wake-ups a second for nothing. Far-off fires wait on one plain
          // timer and hand over to croner for the final approach.
          const timer = setTimeout(arm, Math.min(wait - APPROACH_MS / 2, MAX_TIMEOUT_MS));
          cancelCurrent = () => clearTimeout(timer);
          return;
        }
        // croner refuses dates in the past; a due time that has passed fires now.
        const when = Math.max(timeMs, clock.now() + 5) - clock.now() + host.now();
        // croner works in whole seconds and may fire up to a second early, and setTimeout
        // (on the monotonic clock) up to a millisecond early on `clock`: finish the wait
        // precisely, checking again after each timer, so a fire never lands early.
        const fireWhenDue = () => {
          if (cancelled) return;
          const rest = timeMs - clock.now();
          if (rest <= 0) {
            fn();
            return;
          }
          const timer = setTimeout(fireWhenDue, rest);
          cancelCurrent = () => clearTimeout(timer);
        };
        const job = new Cron(new Date(when), { timezone: "UTC", catch: true }, fireWhenDue);
        cancelCurrent = () => job.stop();
      };
      arm();
      return {
        cancel: () => {
          cancelled = true;
          cancelCurrent();
        },
      };
    },
  };
}

/** How close to its due time a fire is handed to croner. */
const APPROACH_MS = 60_000;
/** setTimeout's largest delay (about 24.8 days). */
const MAX_TIMEOUT_MS = 2_147_483_647;

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
