import fc from "fast-check";
import t from "tap";
import { ConfigError } from "../platform/errors.js";
import { formatSuppliers, MIN_INTERVAL_MS, parseSuppliers, SUPPLIER_NAME } from "./suppliers.js";
import type { SupplierConfig } from "./types.js";

/** Either a config that holds every invariant, or a ConfigError: never anything else. */
function check(text: string): SupplierConfig[] | ConfigError {
  try {
    const suppliers = parseSuppliers(text);
    if (suppliers.length === 0) throw new Error("empty result");
    const names = new Set<string>();
    for (const s of suppliers) {
      if (!SUPPLIER_NAME.test(s.name)) throw new Error(`bad name ${s.name}`);
      if (!Number.isSafeInteger(s.intervalMs) || s.intervalMs < MIN_INTERVAL_MS) {
        throw new Error(`bad interval ${s.intervalMs}`);
      }
      if (names.has(s.name)) throw new Error(`duplicate ${s.name}`);
      names.add(s.name);
    }
    if (!suppliers.some((s) => s.enabled)) throw new Error("none enabled");
    return suppliers;
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
}

/** Strings made of the grammar's own pieces, mostly well-formed, so that both outcomes are common. */
const nameToken = fc.oneof(
  { weight: 4, arbitrary: fc.stringMatching(/^[a-z][a-z0-9_-]{0,8}$/) },
  { weight: 1, arbitrary: fc.constantFrom("etm", "ETM", "1a", "", " ", "a.b", "a".repeat(64)) },
);
const intervalToken = fc.oneof(
  { weight: 4, arbitrary: fc.stringMatching(/^[1-9]\d{0,2}[smhd]$/) },
  {
    weight: 1,
    arbitrary: fc.constantFrom("0h", "0.5s", "1.5s", "-1h", "1h30m", "6", "1e3s", "366d", "1.0001h", ""),
  },
);
const enabledToken = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom("true", "false", undefined) },
  { weight: 1, arbitrary: fc.constantFrom("TRUE", "yes", "") },
);
const entry = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .tuple(nameToken, intervalToken, enabledToken)
      .map(([n, i, e]) => (e === undefined ? `${n}:${i}` : `${n}:${i}:${e}`)),
  },
  { weight: 1, arbitrary: fc.array(fc.string({ maxLength: 4 }), { maxLength: 4 }).map((p) => p.join(":")) },
);
const grammarish = fc
  .tuple(fc.array(entry, { minLength: 0, maxLength: 4 }), fc.constantFrom(",", " , ", ",", ",", ",,"))
  .map(([entries, sep]) => entries.join(sep));

t.test("arbitrary unicode strings: a valid config or a ConfigError", async (t) => {
  fc.assert(
    fc.property(fc.string({ unit: "grapheme", maxLength: 200 }), (text) => {
      check(text);
    }),
    { numRuns: 2_000 },
  );
  t.pass("no other exception and no broken invariant");
});

t.test("grammar-shaped strings: a valid config or a ConfigError, and both outcomes occur", async (t) => {
  let valid = 0;
  let rejected = 0;
  fc.assert(
    fc.property(grammarish, (text) => {
      if (check(text) instanceof ConfigError) rejected++;
      else valid++;
    }),
    { numRuns: 3_000 },
  );
  t.ok(valid > 50, `${valid} valid inputs generated`);
  t.ok(rejected > 50, `${rejected} rejected inputs generated`);
});

const supplierList = fc
  .uniqueArray(
    fc.record({
      name: fc.stringMatching(/^[a-z][a-z0-9_-]{0,62}$/),
      intervalMs: fc.integer({ min: 1, max: 365 * 86_400 }).map((s) => s * 1_000),
      enabled: fc.boolean(),
    }),
    { minLength: 1, maxLength: 8, selector: (s) => s.name },
  )
  .filter((list) => list.some((s) => s.enabled));

t.test("every valid config round-trips through formatSuppliers", async (t) => {
  fc.assert(
    fc.property(supplierList, (suppliers) => {
      const text = formatSuppliers(suppliers);
      const back = parseSuppliers(text);
      if (JSON.stringify(back) !== JSON.stringify(suppliers)) {
        throw new Error(`${text} parsed as ${JSON.stringify(back)}`);
      }
    }),
    { numRuns: 1_000 },
  );
  t.pass("round trip holds");
});

t.test("parsed configs round-trip too", async (t) => {
  fc.assert(
    fc.property(grammarish, (text) => {
      const parsed = check(text);
      if (parsed instanceof ConfigError) return;
      const again = parseSuppliers(formatSuppliers(parsed));
      if (JSON.stringify(again) !== JSON.stringify(parsed)) throw new Error(`${text} does not round-trip`);
    }),
    { numRuns: 2_000 },
  );
  t.pass("round trip holds");
});
