import t from "tap";
import { checkCronSpec, cronFireTimes, cronSlotAt, formatInZone } from "./cron-slots.js";
import { fireTimeOf, MAX_CRON_JITTER_MS, nextFireAt, supplierSlotAt } from "./slots.js";

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();

t.test("a slot runs from one fire time to the next; a fire time starts its own slot", async (t) => {
  const spec = { expression: "*/5 * * * * *", zone: "UTC" };
  const before = cronSlotAt(spec, at("2026-10-24T12:00:04.999Z"));
  t.same([iso(before.startMs), iso(before.endMs)], ["2026-10-24T12:00:00.000Z", "2026-10-24T12:00:05.000Z"]);
  const exactly = cronSlotAt(spec, at("2026-10-24T12:00:05.000Z"));
  t.same(
    [iso(exactly.startMs), iso(exactly.endMs)],
    ["2026-10-24T12:00:05.000Z", "2026-10-24T12:00:10.000Z"],
  );
});

t.test(
  "Europe/London: the slots around both DST changes are 23 h and 25 h, at 01:30 wall time",
  async (t) => {
    const spec = { expression: "30 1 * * *", zone: "Europe/London" };
    // 2026-03-29 01:00 GMT the clocks jump to 02:00 BST: 01:30 does not exist that day, croner fires at
    // the first valid time after the gap (02:00 BST = 01:00Z).
    const spring = cronFireTimes(spec, at("2026-03-27T12:00:00Z"), 4).map(iso);
    t.same(spring, [
      "2026-03-28T01:30:00.000Z",
      "2026-03-29T01:00:00.000Z",
      "2026-03-30T00:30:00.000Z",
      "2026-03-31T00:30:00.000Z",
    ]);
    const short = cronSlotAt(spec, at("2026-03-29T12:00:00Z"));
    t.equal((short.endMs - short.startMs) / 3_600_000, 23.5, "the slot over the gap is shorter");
    // 2026-10-25 02:00 BST the clocks go back to 01:00 GMT: 01:30 occurs twice, the job fires once.
    const autumn = cronFireTimes(spec, at("2026-10-24T12:00:00Z"), 3).map(iso);
    t.same(autumn, ["2026-10-25T00:30:00.000Z", "2026-10-26T01:30:00.000Z", "2026-10-27T01:30:00.000Z"]);
    const long = cronSlotAt(spec, at("2026-10-25T12:00:00Z"));
    t.equal((long.endMs - long.startMs) / 3_600_000, 25, "the slot over the repeated hour is 25 h");
  },
);

t.test("fire times print in UTC and in the zone with its offset", async (t) => {
  t.equal(formatInZone(at("2026-12-02T00:00:00Z"), "UTC"), "2026-12-02T00:00:00Z");
  t.equal(formatInZone(at("2026-12-02T00:00:00Z"), "Europe/Moscow"), "2026-12-02T03:00:00+03:00");
  t.equal(formatInZone(at("2026-07-01T12:00:00Z"), "America/New_York"), "2026-07-01T08:00:00-04:00");
  t.equal(formatInZone(at("2026-01-01T12:00:00Z"), "Asia/Kolkata"), "2026-01-01T17:30:00+05:30");
});

t.test("bad specs: unknown zone, malformed or 7-field expression, one that never fires", async (t) => {
  const now = at("2026-12-05T00:00:00Z");
  t.throws(
    () => checkCronSpec({ expression: "0 3 * * *", zone: "Mars/Olympus" }, now),
    /unknown time zone "Mars\/Olympus"/,
  );
  t.throws(
    () => checkCronSpec({ expression: "0 3 * *", zone: "UTC" }, now),
    /malformed expression "0 3 \* \*"/,
  );
  t.throws(() => checkCronSpec({ expression: "0 0 3 * * * 2027", zone: "UTC" }, now), /malformed expression/);
  t.throws(
    () => checkCronSpec({ expression: "99 * * * *", zone: "UTC" }, now),
    /malformed expression.*minute/,
  );
  t.throws(() => checkCronSpec({ expression: "0 0 30 2 *", zone: "UTC" }, now), /does not fire repeatedly/);
  t.doesNotThrow(() => checkCronSpec({ expression: "0 3 * * *", zone: "Europe/Moscow" }, now));
});

t.test("jitter into a cron slot: stable, at most a tenth of the slot and 15 s", async (t) => {
  const daily = {
    name: "etm",
    intervalMs: 86_400_000,
    cron: { expression: "0 3 * * *", zone: "Europe/Moscow" },
  };
  const slot = supplierSlotAt(at("2026-12-02T12:00:00Z"), daily);
  t.equal(iso(slot.startMs), "2026-12-02T00:00:00.000Z");
  const fire = fireTimeOf(slot, daily);
  t.ok(fire - slot.startMs < MAX_CRON_JITTER_MS && fire >= slot.startMs);
  t.equal(nextFireAt(at("2026-12-02T12:00:00Z"), daily), fire + 86_400_000, "same offset in the next slot");
  const fast = { name: "etm", intervalMs: 2_000, cron: { expression: "*/2 * * * * *", zone: "UTC" } };
  const s2 = supplierSlotAt(at("2026-12-02T12:00:01Z"), fast);
  t.ok(fireTimeOf(s2, fast) - s2.startMs < 200, "a 2 s slot jitters under 200 ms");
  const interval = { name: "etm", intervalMs: 3_600_000 };
  t.same(supplierSlotAt(at("2026-12-02T12:34:00Z"), interval), {
    startMs: at("2026-12-02T12:00:00Z"),
    endMs: at("2026-12-02T13:00:00Z"),
  });
});
