import t from "tap";
import { OffsetClock, systemClock } from "../platform/clock.js";
import { cronerTimer } from "./timer.js";

t.test("croner timer fires once at the due time; a cancelled one never fires", async (t) => {
  const timer = cronerTimer(systemClock);
  const start = Date.now();
  const fired = await new Promise<number>((resolve) => {
    timer.at(start + 300, () => resolve(Date.now()));
  });
  t.ok(fired - start >= 290 && fired - start < 1_500, `fired after ${fired - start} ms`);
  let late = false;
  const handle = timer.at(Date.now() + 200, () => {
    late = true;
  });
  handle.cancel();
  const far = timer.at(Date.now() + 3_600_000, () => {
    late = true;
  });
  far.cancel();
  // A timer due after the cancelled one fires first: by then the cancelled one would have.
  await new Promise<void>((resolve) => timer.at(Date.now() + 400, () => resolve()));
  t.notOk(late, "cancelled timers stay silent");
  const past = await new Promise<boolean>((resolve) => timer.at(Date.now() - 10_000, () => resolve(true)));
  t.ok(past, "a due time in the past fires at once");
});

t.test("croner timer on a clock minutes away from the host's fires on that clock", async (t) => {
  for (const offsetMs of [90_000, -90_000, 7_200_000]) {
    const clock = new OffsetClock(systemClock, offsetMs);
    const timer = cronerTimer(clock);
    const due = clock.now() + 300;
    const started = Date.now();
    const firedOnClock = await new Promise<number>((resolve) => {
      timer.at(due, () => resolve(clock.now()));
    });
    const waited = Date.now() - started;
    t.ok(firedOnClock >= due, `offset ${offsetMs}: never early on the clock (${firedOnClock - due} ms)`);
    t.ok(waited >= 290 && waited < 1_500, `offset ${offsetMs}: fired after ${waited} ms of host time`);
  }
});
