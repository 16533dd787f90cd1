import t from "tap";
import { ConfigError } from "../platform/errors.js";
import { formatSuppliers, parseSuppliers } from "./suppliers.js";
import type { SupplierConfig } from "./types.js";

const H = 3_600_000;

const good: Array<[input: string, expected: SupplierConfig[]]> = [
  [
    "etm:6h:true,iek:12h:true,systeme:6h:false",
    [
      { name: "etm", intervalMs: 6 * H, enabled: true },
      { name: "iek", intervalMs: 12 * H, enabled: true },
      { name: "systeme", intervalMs: 6 * H, enabled: false },
    ],
  ],
  ["etm:6h", [{ name: "etm", intervalMs: 6 * H, enabled: true }]],
  [
    "  etm:90s , iek:1h30m:false ",
    [
      { name: "etm", intervalMs: 90_000, enabled: true },
      { name: "iek", intervalMs: 5_400_000, enabled: false },
    ],
  ],
  ["a:1s", [{ name: "a", intervalMs: 1_000, enabled: true }]],
  ["x_y-9:1d", [{ name: "x_y-9", intervalMs: 86_400_000, enabled: true }]],
  ["etm : 15m : true", [{ name: "etm", intervalMs: 900_000, enabled: true }]],
  ["etm:1.5h", [{ name: "etm", intervalMs: 5_400_000, enabled: true }]],
  [`${"a".repeat(63)}:1m`, [{ name: "a".repeat(63), intervalMs: 60_000, enabled: true }]],
  ["etm:365d", [{ name: "etm", intervalMs: 365 * 86_400_000, enabled: true }]],
];

/** Each rejection (docs/operations.md, Environment) with a token the message must name. */
const bad: Array<[why: string, input: string | undefined, mustName: string[]]> = [
  ["unset", undefined, ["is required"]],
  ["empty", "", ["is required"]],
  ["blank", "   ", ["is required"]],
  ["empty entry in the middle", "etm:6h,,iek:1h", ["entry 2 of 3 is empty"]],
  ["trailing comma", "etm:6h,", ["entry 2 of 2 is empty"]],
  ["no interval", "etm", ['"etm"', "1 part"]],
  ["too many parts", "etm:6h:true:x", ['"etm:6h:true:x"', "4 part"]],
  ["empty name", ":6h", ['""', "must match"]],
  ["upper-case name", "ETM:6h", ['"ETM"']],
  ["name starting with a digit", "1etm:6h", ['"1etm"']],
  ["name with a dot", "e.tm:6h", ['"e.tm"']],
  ["path traversal name", "../etc:6h", ['"../etc"']],
  ["name of 64 characters", `${"a".repeat(64)}:6h`, ["a".repeat(64)]],
  ["duplicate name", "etm:6h,iek:1h,etm:12h", ['duplicate supplier name "etm"']],
  ["zero interval", "etm:0h:true", ['"etm:0h:true"', '"0h"', "greater than zero"]],
  ["zero seconds", "etm:0s", ['"0s"', "greater than zero"]],
  ["negative interval", "etm:-1h", ['"-1h"', "negative"]],
  ["unit missing", "etm:6", ['"6"', "not a duration"]],
  ["unknown unit", "etm:6w", ['"6w"', "not a duration"]],
  ["empty interval", "etm:", ['""', "not a duration"]],
  ["below one second", "etm:0.5s", ['"0.5s"', "minimum of 1s"]],
  ["fractional seconds", "etm:1.5s", ['"1.5s"', "whole number of seconds"]],
  ["above a year", "etm:366d", ['"366d"', "maximum"]],
  ["bad enabled flag", "etm:6h:yes", ['"yes"', "true or false"]],
  ["capitalised enabled flag", "etm:6h:True", ['"True"']],
  ["empty enabled flag", "etm:6h:", ['""', "true or false"]],
  ["every supplier disabled", "etm:6h:false,iek:1h:false", ["every supplier is disabled", "etm", "iek"]],
  ["control characters are escaped", "e\u001btm\u0085:6h", [String.raw`"e\u001btm\u0085"`]],
];

t.test("valid lists parse", async (t) => {
  for (const [input, expected] of good) {
    t.same(parseSuppliers(input), expected, input);
  }
});

t.test("each rejection is a ConfigError naming the variable and the token", async (t) => {
  for (const [why, input, mustName] of bad) {
    let caught: unknown;
    try {
      parseSuppliers(input);
    } catch (err) {
      caught = err;
    }
    t.type(caught, ConfigError, `${why}: ConfigError`);
    const message = (caught as Error | undefined)?.message ?? "";
    t.match(message, /^SUPPLIER_SYNC_SUPPLIERS: /, `${why}: names the variable`);
    for (const token of mustName) t.ok(message.includes(token), `${why}: ${message} includes ${token}`);
  }
});

t.test("the example from the brief names both etm and 0h", async (t) => {
  t.throws(() => parseSuppliers("etm:0h:true"), { name: "ConfigError", message: /etm.*0h/ });
});

t.test("a long token is cut in the message", async (t) => {
  const err = t.throws(() => parseSuppliers(`${"x".repeat(5_000)}:6h`)) as Error;
  t.ok(err.message.length < 500, `message of ${err.message.length} characters`);
});

t.test("formatSuppliers is the inverse of parseSuppliers", async (t) => {
  for (const [input, expected] of good) {
    const text = formatSuppliers(expected);
    t.same(parseSuppliers(text), expected, `${input} -> ${text}`);
  }
  t.equal(formatSuppliers(parseSuppliers("etm:1h30m,iek:90s:false")), "etm:1h30m:true,iek:1m30s:false");
});

t.test(
  "cron schedules: 5 or 6 fields, optional zone, commas and colons stay inside the parentheses",
  async (t) => {
    const now = Date.parse("2026-12-05T00:00:00Z");
    const list = parseSuppliers(
      "etm:cron(0 3 * * * @Europe/Moscow):true, iek:cron(0 3,15 * * 1-5), fast:cron(*/5 * * * * *):false,sys:6h",
      now,
    );
    t.same(
      list.map((s) => [s.name, s.cron, s.intervalMs, s.enabled]),
      [
        ["etm", { expression: "0 3 * * *", zone: "Europe/Moscow" }, 24 * H, true],
        ["iek", { expression: "0 3,15 * * 1-5", zone: "UTC" }, 12 * H, true],
        ["fast", { expression: "*/5 * * * * *", zone: "UTC" }, 5_000, false],
        ["sys", undefined, 6 * H, true],
      ],
    );
    t.equal(
      formatSuppliers(list),
      "etm:cron(0 3 * * * @Europe/Moscow):true,iek:cron(0 3,15 * * 1-5):true,fast:cron(*/5 * * * * *):false,sys:6h:true",
    );
    t.same(parseSuppliers(formatSuppliers(list), now), list, "formatSuppliers is still the inverse");
  },
);

t.test("bad cron schedules are ConfigErrors naming the entry and what is wrong", async (t) => {
  const cases: Array<[input: string, mustName: string[]]> = [
    [
      "etm:cron(0 3 * * * @Mars/Olympus)",
      ['"etm:cron(0 3 * * * @Mars/Olympus)"', 'unknown time zone "Mars/Olympus"'],
    ],
    ["etm:cron(0 3 * *)", ['"etm:cron(0 3 * *)"', 'malformed expression "0 3 * *"']],
    ["etm:cron(61 * * * *)", ["malformed expression", "minute"]],
    ["etm:cron(0 0 3 * * * 2027)", ["malformed expression", "7 parts"]],
    ["etm:cron()", ["has no expression"]],
    ["etm:cron(0 3 * * * @)", ["empty time zone"]],
    ["etm:cron(0 0 30 2 *)", ["does not fire repeatedly"]],
    ["etm:cron(0 3 * * *", ["must be cron(<expr>)"]],
  ];
  for (const [input, mustName] of cases) {
    const err = t.throws(() => parseSuppliers(input)) as Error;
    t.type(err, ConfigError, input);
    t.match(err.message, /^SUPPLIER_SYNC_SUPPLIERS: entry /, `${input}: names the variable and entry`);
    for (const token of mustName)
      t.ok(err.message.includes(token), `${input}: ${err.message} includes ${token}`);
  }
});
