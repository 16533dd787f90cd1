import t from "tap";
import { ManualClock } from "../../platform/clock.js";
import { RateLimiter } from "./rate-limiter.js";

function limiter(clock: ManualClock, o: { rps?: number; burst?: number; max?: number } = {}) {
  const waits: number[] = [];
  const l = new RateLimiter({
    requestsPerSecond: o.rps ?? 5,
    burst: o.burst ?? 5,
    maxConcurrency: o.max ?? 10,
    clock,
    onWait: (ms) => waits.push(ms),
  });
  return { l, waits };
}

t.test("the burst leaves at once (minus the latency margin), then the refill rate applies", async (t) => {
  const clock = new ManualClock(0);
  const { l, waits } = limiter(clock);
  for (let i = 0; i < 4; i++) (await l.acquire())();
  t.same(waits, [0, 0, 0, 0], "4 immediate: the 5th token waits for the margin");
  let done = 0;
  const fifth = l.acquire().then((r) => {
    done++;
    r();
  });
  await clock.advance(90);
  t.equal(done, 0, "not yet after 90 ms");
  await clock.advance(20);
  await fifth;
  t.equal(done, 1, "after the 100 ms margin");
  const times: number[] = [];
  const next = (async () => {
    for (let i = 0; i < 5; i++) {
      (await l.acquire())();
      times.push(clock.now());
    }
  })();
  for (let i = 0; i < 20 && times.length < 5; i++) await clock.advance(100);
  await next;
  const gaps = times.slice(1).map((x, i) => x - (times[i] ?? 0));
  t.ok(
    gaps.every((g) => g >= 200 && g <= 300),
    `spacing ≈ 1/0.98 of 200 ms: ${gaps}`,
  );
});

t.test("the concurrency cap holds requests until a slot is released", async (t) => {
  const clock = new ManualClock(0);
  const { l } = limiter(clock, { rps: 1000, burst: 100, max: 2 });
  const a = await l.acquire();
  const b = await l.acquire();
  let third = false;
  const c = l.acquire().then((r) => {
    third = true;
    return r;
  });
  await clock.advance(10);
  t.equal(third, false, "third waits for a slot");
  t.equal(l.active, 2);
  a();
  a();
  const release = await c;
  t.equal(third, true);
  t.equal(l.active, 2, "idempotent release freed exactly one slot");
  b();
  release();
  t.equal(l.active, 0);
});

t.test("pause() holds every request until it ends", async (t) => {
  const clock = new ManualClock(1_000);
  const { l, waits } = limiter(clock);
  l.pause(2_000);
  let got = false;
  const p = l.acquire().then((r) => {
    got = true;
    r();
  });
  await clock.advance(1_999);
  t.equal(got, false);
  await clock.advance(1);
  await p;
  t.equal(got, true);
  t.same(waits, [2_000], "the pause is counted as waiting");
  l.pause(100);
  l.pause(50);
  const q = l.acquire();
  await clock.advance(99);
  t.equal(clock.pendingSleepers > 0, true, "a shorter pause never shortens a longer one");
  await clock.advance(1);
  (await q)();
});

t.test("waiting honours the abort signal and holds nothing afterwards", async (t) => {
  const clock = new ManualClock(0);
  const { l } = limiter(clock, { rps: 1, burst: 1, max: 1 });
  const hold = await l.acquire();
  const controller = new AbortController();
  const waiting = l.acquire(controller.signal);
  controller.abort(new Error("stop"));
  await t.rejects(waiting, { message: "stop" });
  hold();
  t.equal(l.active, 0, "the aborted waiter took no slot");
  const token = new AbortController();
  const waitingToken = l.acquire(token.signal);
  await clock.advance(10);
  token.abort(new Error("stop2"));
  await t.rejects(waitingToken, { message: "stop2" });
  t.equal(l.active, 0, "the slot is released when the token wait aborts");
});
