// deploy/grafana/supplier-sync.json uses only metrics the daemon exports (issue 20):
// every PromQL query of the dashboard is parsed, and each metric name (and each label
// it matches or groups by) is checked against a live /metrics of the real daemon,
// which has walked a simulated supplier (with a retried 503) so every family has samples.
import { readFileSync } from "node:fs";
import t from "tap";
import { checkPrometheusText } from "../../internal/server/test-support.js";
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, simConnector } from "../helpers/fixtures.js";

const DASHBOARD = new URL("../../deploy/grafana/supplier-sync.json", import.meta.url);

/** What the dashboard must show (issue 20), by the metric that carries it. */
const TOPICS: Record<string, string> = {
  "freshness per supplier": "ingestion_last_success_age_seconds",
  "tick outcomes": "ingestion_tick_attempt_total",
  records: "ingestion_records_total",
  "HTTP codes": "ingestion_http_requests_total",
  retries: "ingestion_http_retries_total",
  "rate-limit waits": "ingestion_rate_limit_wait_seconds_total",
  logins: "ingestion_auth_logins_total",
};

const FUNCTIONS_AND_KEYWORDS = new Set([
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "bool",
  "and",
  "or",
  "unless",
  "offset",
  "inf",
  "nan",
]);

interface Uses {
  metrics: Set<string>;
  labels: Map<string, Set<string>>;
}

/**
 * Metric names and label names a PromQL expression uses. Grafana variables
 * (`$supplier`, `$__rate_interval`) and string literals are dropped first; label
 * names come from selectors (`{supplier=~"…"}`, tied to the metric they follow) and
 * from `by (…)` / `without (…)` (tied to every metric of the expression).
 */
export function promqlUses(expr: string): Uses {
  const metrics = new Set<string>();
  const labels = new Map<string, Set<string>>();
  const addLabel = (metric: string, label: string) => {
    const set = labels.get(metric) ?? new Set<string>();
    set.add(label);
    labels.set(metric, set);
  };
  const labelValues = /^label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*([a-zA-Z_]\w*)\s*\)$/.exec(expr.trim());
  if (labelValues) {
    const [, metric, label] = labelValues as unknown as [string, string, string];
    metrics.add(metric);
    addLabel(metric, label);
    return { metrics, labels };
  }
  let text = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""').replace(/\$\{?\w+\}?/g, " ");
  const grouped: string[] = [];
  text = text.replace(
    /\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g,
    (_m, _k, list: string) => {
      for (const l of list.split(",")) if (l.trim()) grouped.push(l.trim());
      return " ";
    },
  );
  text = text.replace(
    /([a-zA-Z_:][\w:]*)?\s*\{([^}]*)\}/g,
    (_m, metric: string | undefined, matchers: string) => {
      for (const m of matchers.matchAll(/([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)/g)) {
        if (metric && m[1]) addLabel(metric, m[1]);
      }
      return metric ? ` ${metric} ` : " ";
    },
  );
  text = text.replace(/\[[^\]]*\]/g, " ");
  for (const m of text.matchAll(/([a-zA-Z_:][\w:]*)\s*(\()?/g)) {
    const [, name, call] = m as unknown as [string, string, string | undefined];
    if (call || FUNCTIONS_AND_KEYWORDS.has(name.toLowerCase())) continue;
    metrics.add(name);
  }
  for (const metric of metrics) for (const l of grouped) addLabel(metric, l);
  return { metrics, labels };
}

/** Every PromQL query of the dashboard: panel targets (rows included) and query variables. */
function dashboardQueries(dashboard: Record<string, unknown>): string[] {
  const out: string[] = [];
  const walkPanels = (panels: unknown) => {
    for (const p of (panels as Record<string, unknown>[] | undefined) ?? []) {
      for (const target of (p["targets"] as { expr?: string }[] | undefined) ?? []) {
        if (typeof target.expr === "string") out.push(target.expr);
      }
      walkPanels(p["panels"]);
    }
  };
  walkPanels(dashboard["panels"]);
  const vars = (
    (dashboard["templating"] as { list?: Record<string, unknown>[] } | undefined)?.list ?? []
  ).filter((v) => v["type"] === "query");
  for (const v of vars) {
    const q = v["query"];
    out.push(typeof q === "string" ? q : String((q as { query?: string }).query ?? ""));
  }
  return out;
}

/** Families and the label names seen on each sample name in Prometheus text. */
function exported(text: string): { names: Set<string>; labels: Map<string, Set<string>> } {
  const { families } = checkPrometheusText(text);
  const names = new Set<string>();
  for (const [name, type] of families) {
    names.add(name);
    if (type === "histogram") for (const s of ["_bucket", "_sum", "_count"]) names.add(`${name}${s}`);
    if (type === "summary") for (const s of ["_sum", "_count"]) names.add(`${name}${s}`);
  }
  const labels = new Map<string, Set<string>>();
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)\{([^}]*)\}/.exec(line);
    if (!m?.[1]) continue;
    const set = labels.get(m[1]) ?? new Set<string>();
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_]\w*)="/g)) if (l[1]) set.add(l[1]);
    labels.set(m[1], set);
  }
  return { names, labels };
}

t.test("the PromQL reader finds metrics and labels, and so can fail", async (t) => {
  const uses = promqlUses(
    'histogram_quantile(0.95, sum by (le, supplier) (rate(ingestion_bogus_seconds_bucket{supplier=~"$supplier", code!="200"}[$__rate_interval]))) / ignoring(code) other_metric',
  );
  t.same([...uses.metrics].sort(), ["ingestion_bogus_seconds_bucket", "other_metric"]);
  t.same([...(uses.labels.get("ingestion_bogus_seconds_bucket") ?? [])].sort(), ["code", "le", "supplier"]);
  t.same(
    [...promqlUses("label_values(ingestion_tick_attempt_total, supplier)").metrics],
    ["ingestion_tick_attempt_total"],
  );
  t.same([...promqlUses("count(up == -1) or vector(0)").metrics], ["up"]);
});

t.test("every query of the dashboard uses only what a live daemon exports", async (t) => {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, "utf8")) as Record<string, unknown>;
  const queries = dashboardQueries(dashboard);
  t.ok(queries.length >= 10, `${queries.length} queries found`);

  const url = await createTestDatabase(t);
  const sim = await startSimulator({
    suppliers: { acme: { size: 120, pageSize: 50, faults: { status: { code: 503, onPage: 2, times: 1 } } } },
  });
  t.teardown(() => sim.close());
  const dir = connectorsDir({ acme: simConnector(sim.baseUrl("acme")) });
  const daemon = startCli(
    t,
    [],
    baseEnv({ DATABASE_URL: url, SUPPLIER_SYNC_SUPPLIERS: "acme:1h", SUPPLIER_SYNC_CONNECTORS_DIR: dir }),
  );
  const listening = await daemon.waitForLog((l) => l.msg === "health and metrics server listening");
  await daemon.waitForLog((l) => l.supplier === "acme" && l.outcome === "success", 30_000);
  const res = await fetch(`http://${listening.addr as string}/metrics`);
  t.equal(res.status, 200);
  const live = exported(await res.text());
  daemon.child.kill("SIGTERM");
  t.equal(await daemon.exited(30_000), 0);

  const used = new Set<string>();
  for (const expr of queries) {
    const uses = promqlUses(expr);
    t.ok(uses.metrics.size > 0, `uses a metric: ${expr}`);
    for (const metric of uses.metrics) {
      used.add(metric.replace(/_(bucket|sum|count)$/, ""));
      t.ok(live.names.has(metric), `${metric} is exported (${expr})`);
      const known = live.labels.get(metric);
      for (const label of uses.labels.get(metric) ?? []) {
        t.ok(known?.has(label), `${metric} has label ${label} (${expr})`);
      }
    }
  }
  for (const [topic, metric] of Object.entries(TOPICS)) t.ok(used.has(metric), `shows ${topic} (${metric})`);
});
