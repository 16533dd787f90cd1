import t from "tap";
import type { SupplierConfig } from "../config/types.js";
import type { FreshnessSnapshot } from "./freshness.js";
import { evaluateReadiness, evaluateSupplier } from "./readiness.js";
import { checkPrometheusText } from "./test-support.js";

const HOUR = 3_600_000;
const NOW = Date.parse("2025-03-01T12:00:00Z");
const etm: SupplierConfig = { name: "etm", intervalMs: 6 * HOUR, enabled: true };
const iek: SupplierConfig = { name: "iek", intervalMs: 12 * HOUR, enabled: true };
const at = (msAgo: number) => new Date(NOW - msAgo);

t.test("a supplier is ok below 2 × interval, stale from it on, none without a success", async (t) => {
  t.same(evaluateSupplier(etm, null, NOW), {
    status: "none",
    last_success: null,
    age_seconds: null,
    threshold_seconds: 43_200,
  });
  t.same(evaluateSupplier(etm, at(12 * HOUR - 1), NOW), {
    status: "ok",
    last_success: at(12 * HOUR - 1).toISOString(),
    age_seconds: 43_199.999,
    threshold_seconds: 43_200,
  });
  t.equal(evaluateSupplier(etm, at(12 * HOUR), NOW).status, "stale");
  t.equal(evaluateSupplier(iek, at(12 * HOUR), NOW).status, "ok", "the threshold is per supplier");
  t.same(evaluateSupplier(etm, at(-5_000), NOW).age_seconds, 0, "another host's clock ahead: age 0, fresh");
  t.equal(evaluateSupplier(etm, at(-5_000), NOW).status, "ok");
});

t.test("the verdict: 503 on any stale supplier or an unreachable database, never on none", async (t) => {
  const snapshot = (database: "ok" | "unreachable", etmAgo: number | null, iekAgo: number | null) =>
    ({
      database,
      lastSuccess: new Map([
        ["etm", etmAgo === null ? null : at(etmAgo)],
        ["iek", iekAgo === null ? null : at(iekAgo)],
      ]),
      held: new Map(),
    }) satisfies FreshnessSnapshot;

  const boot = evaluateReadiness([etm, iek], snapshot("ok", null, null), NOW);
  t.equal(boot.httpStatus, 200, "fresh boot does not flap to 503");
  t.equal(boot.body.status, "ok");
  t.same(Object.keys(boot.body.suppliers), ["etm", "iek"]);

  const stale = evaluateReadiness([etm, iek], snapshot("ok", 13 * HOUR, HOUR), NOW);
  t.equal(stale.httpStatus, 503);
  t.same([stale.body.status, stale.body.database], ["stale", "ok"]);
  t.equal(stale.body.suppliers["etm"]?.status, "stale");
  t.equal(stale.body.suppliers["iek"]?.status, "ok");
  t.equal(
    evaluateReadiness([iek], snapshot("ok", 13 * HOUR, HOUR), NOW).httpStatus,
    200,
    "one supplier alone",
  );

  const down = evaluateReadiness([etm, iek], snapshot("unreachable", HOUR, HOUR), NOW);
  t.equal(down.httpStatus, 503);
  t.same([down.body.status, down.body.database], ["unavailable", "unreachable"]);
  t.equal(down.body.suppliers["etm"]?.status, "ok", "last known freshness still shown");
});

t.test("the Prometheus text checker rejects what it must", async (t) => {
  const good = [
    "# HELP a_total A.",
    "# TYPE a_total counter",
    'a_total{supplier="etm",outcome="x"} 0',
    "# TYPE h histogram",
    'h_bucket{le="+Inf"} 1',
    "h_sum 0.5",
    "h_count 1",
    "",
  ].join("\n");
  t.same(checkPrometheusText(good).problems, []);
  t.equal(checkPrometheusText("# TYPE a counter\na{x=1} 0\n").problems.length, 1, "unquoted label");
  t.equal(checkPrometheusText("# TYPE a counter\nb 0\n").problems.length, 1, "sample outside family");
  t.equal(checkPrometheusText("# TYPE a counter\na zero\n").problems.length, 1, "bad value");
  t.same(
    checkPrometheusText("# TYPE a gauge\na Nan\na +Inf\na -inf\n").problems,
    [],
    "NaN and Inf as Go reads them",
  );
  t.equal(checkPrometheusText("# TYPE a counter\na 0").problems.length, 1, "no final newline");
});

t.test(
  "paused wins over stale and held and is never a 503; a cron supplier's threshold is 2 × its slot",
  async (t) => {
    const pausedAt = at(30 * HOUR);
    const snapshot: FreshnessSnapshot = {
      database: "ok",
      lastSuccess: new Map([
        ["etm", at(40 * HOUR)],
        ["iek", at(HOUR)],
      ]),
      held: new Map([["iek", { runId: 7, items: 2 }]]),
      paused: new Map([
        ["etm", pausedAt],
        ["iek", pausedAt],
      ]),
    };
    const verdict = evaluateReadiness([etm, iek], snapshot, NOW);
    t.equal(verdict.httpStatus, 200, "a stale but paused supplier does not fail readiness");
    t.equal(verdict.body.suppliers.etm?.status, "paused");
    t.equal(verdict.body.suppliers.etm?.paused_at, pausedAt.toISOString());
    t.equal(verdict.body.suppliers.iek?.status, "paused", "paused > held");
    const daily: SupplierConfig = {
      name: "etm",
      intervalMs: 24 * HOUR,
      enabled: true,
      cron: { expression: "0 3 * * *", zone: "Europe/Moscow" },
    };
    t.equal(evaluateSupplier(daily, at(HOUR), NOW).threshold_seconds, 2 * 86_400);
  },
);
