#!/usr/bin/env node
/**
 * `npm run bench:console`: the console's overview (`GET /`) on a big history. Writes
 * `--suppliers` (default 1,000) suppliers × `--runs` (default 1,000) runs each, so
 * 1,000,000 runs, in time order (the runs of one supplier spread over the table as
 * in production), plus one run with 2,000 steps and 500 rejects. Then, on the real
 * health server over loopback, one request after the other:
 * - `/` cold: a fresh server each time, so every strip is read and drawn (5 times);
 * - `/` steady: `--requests` times (default 50, after 5 warm-ups), nothing changed;
 * - `/` churn: `--requests` times, a new run for 5 % of the suppliers before each
 *   (the writes are not timed): what an operator refreshing a busy console sees;
 * - `/runs/<id>` of the big run, `--requests` times;
 * - `/suppliers/<name>` (docs/operations.md, Operator console), `--requests` times each: the newest
 *   page; a page deep in the history (`?before=` the supplier's 500th newest run); a
 *   filter that matches 1 run in 10 (`state=failed`), one that matches 1 in 23
 *   (`state=partial`), one that matches none (`trigger=manual`), and both filters;
 *   and `/runs/<id>` of an ordinary run (its previous/next links);
 * - the time to build the supplier page's index (migration 0007) on this history, by
 *   dropping and creating it again: how long a deployment's migration blocks writes
 *   to ingestion_runs.
 * Reports median and p95 against the 200 ms target, prints EXPLAIN (ANALYZE,
 * BUFFERS) of the overview's two statements and the supplier page's, and checks that
 * every scan of the run tables uses an index and no lookup reads more than its limit. Exits 1
 * when a check fails or the churn median of `/` is at or over 200 ms.
 *
 * Usage: node dist/bench/console.js [--suppliers N] [--runs N] [--requests N] [--json]
 * Uses `BENCH_DATABASE_URL` if set, else an embedded PostgreSQL started for this run.
 */
import { request } from "node:http";
import { cpus, loadavg } from "node:os";
import pg from "pg";
import type { SupplierConfig } from "../internal/config/types.js";
import { createMetrics } from "../internal/observability/metrics.js";
import { createLogger } from "../internal/platform/logger.js";
import { SecretRegistry } from "../internal/platform/redact.js";
import { createHealthServer } from "../internal/server/server.js";
import { LATEST_SQL, STRIP_RUNS, STRIPS_SQL } from "../internal/store/console-queries.js";
import {
  CHART_RUNS,
  CHART_SQL,
  HELD_SQL,
  MAX_HELD_SHOWN,
  NEWER_IDS_SQL,
  OLDER_IDS_SQL,
  PAGE_RUNS,
  RUN_STATES,
  RUN_TRIGGERS,
  RUNS_BY_ID_SQL,
  SUCCESS_BEFORE_SQL,
} from "../internal/store/console-supplier-queries.js";
import { explainJson, explainText, type PlanNode, scansOf } from "../internal/store/explain.js";
import { runMain } from "./child-main.js";
import { openBenchDatabase } from "./database.js";

const TARGET_MS = 200;

function intOption(argv: string[], flag: string, fallback: number): number {
  const i = argv.indexOf(flag);
  const raw = i >= 0 ? argv[i + 1] : undefined;
  const n = raw === undefined ? fallback : Number.parseInt(raw, 10);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`${flag} needs a positive integer, got ${raw}`);
  return n;
}

function get(port: number, path: string): Promise<{ status: number; bytes: number; ms: number }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request({ host: "127.0.0.1", port, path, agent: false }, (res) => {
      let bytes = 0;
      res.on("data", (c: Buffer) => {
        bytes += c.length;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, bytes, ms: performance.now() - started }));
      res.on("error", reject);
    });
    req.setTimeout(30_000, () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}

function line(label: string, m: ReturnType<typeof summarise>, note = ""): string {
  return `${label.padEnd(28)} median ${m.medianMs} ms  p95 ${m.p95Ms} ms  max ${m.maxMs} ms  ${m.bytes} bytes  (${m.requests} requests${note ? `, ${note}` : ""}; target < ${TARGET_MS} ms)`;
}

function quantile(sorted: number[], q: number): number {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i] ?? Number.NaN;
}

async function measure(
  port: number,
  path: string,
  requests: number,
  before: (i: number) => Promise<void> = async () => {},
) {
  for (let i = 0; i < 5; i++) await get(port, path);
  const times: number[] = [];
  let bytes = 0;
  for (let i = 0; i < requests; i++) {
    await before(i);
    const r = await get(port, path);
    if (r.status !== 200) throw new Error(`GET ${path} answered ${r.status}`);
    times.push(r.ms);
    bytes = r.bytes;
  }
  return summarise(path, times, bytes);
}

function summarise(path: string, times: number[], bytes: number) {
  times.sort((a, b) => a - b);
  const round = (n: number) => Math.round(n * 10) / 10;
  return {
    path,
    requests: times.length,
    medianMs: round(quantile(times, 0.5)),
    p95Ms: round(quantile(times, 0.95)),
    maxMs: round(times.at(-1) ?? 0),
    bytes,
  };
}

/** Per-loop rows above `max` on a scan of ingestion_runs: a lookup that read more than its limit. */
function overReads(n: PlanNode, max: number): string[] {
  const own =
    n["Relation Name"] === "ingestion_runs" && typeof n["Actual Rows"] === "number" && n["Actual Rows"] > max
      ? [`${n["Node Type"]} ${n["Index Name"] ?? ""} read ${n["Actual Rows"]} rows per loop`]
      : [];
  return [...own, ...(n.Plans ?? []).flatMap((c) => overReads(c, max))];
}

async function seed(db: pg.Pool, suppliers: number, runs: number): Promise<number> {
  const started = performance.now();
  // In time order, 20 slots at a time so progress shows; one slot per run, as the due gate keeps it.
  for (let from = 1; from <= runs; from += 20) {
    const to = Math.min(runs, from + 19);
    await db.query(
      `insert into ingestion_runs (supplier, slot_start, trigger, state, error_code, error_message, owner,
                                   started_at, heartbeat_at, finished_at, pages, records_seen, records_inserted,
                                   records_updated, records_unchanged, records_rejected)
       select 's' || lpad(s::text, 4, '0'),
              timestamptz '2024-01-01' + r * interval '6 hours',
              case when r % 10 = 0 then 'retry' else 'schedule' end,
              case when r % 10 = 0 then 'failed' when r % 23 = 0 then 'partial' else 'succeeded' end,
              case when r % 10 = 0 then 'HTTP_503' when r % 23 = 0 then 'DEADLINE' end,
              case when r % 10 = 0 then 'GET /v1/offers answered 503 after 5 attempts' end,
              jsonb_build_object('hostname', 'bench', 'pid', 1, 'bootId', 'b'),
              timestamptz '2024-01-01' + r * interval '6 hours' + s * interval '1 second',
              timestamptz '2024-01-01' + r * interval '6 hours' + s * interval '1 second' + interval '95 seconds',
              timestamptz '2024-01-01' + r * interval '6 hours' + s * interval '1 second' + interval '95 seconds',
              20, 10000, r % 7, 40 + r % 13, 9900, r % 3
         from generate_series($1::int, $2::int) r, generate_series(1, $3::int) s`,
      [from, to, suppliers],
    );
    process.stderr.write(`bench:console: ${to * suppliers} runs written\r`);
  }
  const { rows } = await db.query<{ id: string }>(
    `insert into ingestion_runs (supplier, slot_start, trigger, state, owner, started_at, heartbeat_at, finished_at, pages)
     values ('s0001', now(), 'forced', 'partial', '{"hostname":"bench","pid":1,"bootId":"b"}', now(), now(), now(), 2000)
     returning id`,
  );
  const big = rows[0]?.id ?? "";
  await db.query(
    `insert into ingestion_run_steps (run_id, seq, state, started_at, finished_at, records, http_attempts)
     select $1, q, 'succeeded', now(), now(), 500, 1 from generate_series(1, 2000) q`,
    [big],
  );
  await db.query(
    `insert into ingestion_rejects (run_id, supplier, seq, reason, raw)
     select $1, 's0001', q % 2000, 'price: not a number',
            jsonb_build_object('article', 'A' || q, 'price', 'n/a', 'title', repeat('x', 200))
       from generate_series(1, 500) q`,
    [big],
  );
  await db.query("vacuum analyze ingestion_runs, ingestion_run_steps, ingestion_rejects");
  process.stderr.write(
    `\nbench:console: history written in ${Math.round((performance.now() - started) / 1000)} s\n`,
  );
  return Number(big);
}

async function main(argv: string[], env: NodeJS.ProcessEnv) {
  const supplierCount = intOption(argv, "--suppliers", 1_000);
  const runsPerSupplier = intOption(argv, "--runs", 1_000);
  const requests = intOption(argv, "--requests", 50);
  const database = await openBenchDatabase(env.BENCH_DATABASE_URL);
  const db = new pg.Pool({ connectionString: database.url, max: 4 });
  const suppliers: SupplierConfig[] = Array.from({ length: supplierCount }, (_, i) => ({
    name: `s${String(i + 1).padStart(4, "0")}`,
    intervalMs: 6 * 3_600_000,
    enabled: true,
  }));
  const serverOptions = {
    secrets: new SecretRegistry(),
    host: "127.0.0.1",
    port: 0,
    db,
    suppliers,
    metrics: createMetrics({ processMetrics: false }),
    log: createLogger({ level: "warn", secrets: new SecretRegistry() }),
    instance: { owner: { hostname: "bench", pid: process.pid, bootId: "bench" }, version: "bench" },
  };
  const server = createHealthServer(serverOptions);
  try {
    const bigRun = await seed(db, supplierCount, runsPerSupplier);
    const { port } = await server.start();
    const cold: number[] = [];
    let coldBytes = 0;
    for (let i = 0; i < 5; i++) {
      const fresh = createHealthServer({
        ...serverOptions,
        log: createLogger({ level: "warn", secrets: new SecretRegistry() }),
      });
      const addr = await fresh.start();
      const r = await get(addr.port, "/");
      cold.push(r.ms);
      coldBytes = r.bytes;
      await fresh.stop();
    }
    const overviewCold = summarise("/ (cold)", cold, coldBytes);
    const overview = await measure(port, "/", requests);
    let slot = 0;
    const churn = await measure(port, "/", requests, async () => {
      slot += 1;
      await db.query(
        `insert into ingestion_runs (supplier, slot_start, trigger, state, owner, started_at, heartbeat_at, finished_at, pages)
         select 's' || lpad(s::text, 4, '0'), now() + $1::int * interval '1 hour', 'schedule', 'succeeded',
                '{"hostname":"bench","pid":1,"bootId":"b"}', now(), now(), now() + interval '2 seconds', 3
           from generate_series(1, $2::int) s where (s + $1::int) % 20 = 0`,
        [slot, supplierCount],
      );
    });
    const run = await measure(port, `/runs/${bigRun}`, requests);

    // The supplier page, on the supplier whose runs are spread furthest over the table.
    const name = "s0500";
    const ids = await db.query<{ id: string }>(
      "select id from ingestion_runs where supplier = $1 order by id desc limit 1 offset 500",
      [name],
    );
    const deep = ids.rows[0]?.id ?? "1";
    const supplierCases = [
      { label: "newest page", path: `/suppliers/${name}` },
      { label: "deep page", path: `/suppliers/${name}?before=${deep}` },
      { label: "state=failed", path: `/suppliers/${name}?state=failed` },
      { label: "state=partial", path: `/suppliers/${name}?state=partial` },
      { label: "trigger=manual", path: `/suppliers/${name}?trigger=manual` },
      { label: "both filters", path: `/suppliers/${name}?state=failed&trigger=retry&before=${deep}` },
      { label: "run neighbours", path: `/runs/${deep}` },
    ];
    const supplierPages: { label: string; m: ReturnType<typeof summarise> }[] = [];
    for (const c of supplierCases)
      supplierPages.push({ label: c.label, m: await measure(port, c.path, requests) });

    const names = suppliers.map((s) => s.name);
    const plans = [
      { name: "latest", sql: LATEST_SQL, params: [names] },
      { name: "strips", sql: STRIPS_SQL, params: [names, STRIP_RUNS] },
    ];
    const every = { states: [...RUN_STATES], triggers: [...RUN_TRIGGERS] };
    const supplierPlans = [
      {
        name: "page ids",
        sql: OLDER_IDS_SQL,
        params: [name, every.states, every.triggers, deep, PAGE_RUNS + 1],
        max: PAGE_RUNS + 1,
      },
      {
        name: "page ids, state=failed",
        sql: OLDER_IDS_SQL,
        params: [name, ["failed"], every.triggers, deep, PAGE_RUNS + 1],
        max: PAGE_RUNS + 1,
      },
      {
        name: "newer probe",
        sql: NEWER_IDS_SQL,
        params: [name, every.states, every.triggers, deep, 1],
        max: 1,
      },
      {
        name: "page rows",
        sql: RUNS_BY_ID_SQL,
        params: [
          (
            await db.query<{ id: string }>(
              "select id from ingestion_runs where supplier = $1 and id < $2 order by id desc limit $3",
              [name, deep, PAGE_RUNS],
            )
          ).rows.map((r) => r.id),
        ],
        max: PAGE_RUNS,
      },
      { name: "chart", sql: CHART_SQL, params: [name, CHART_RUNS], max: CHART_RUNS },
      {
        name: "success before",
        sql: SUCCESS_BEFORE_SQL,
        params: [name, new Date("2024-06-01T00:00:00Z")],
        max: 1,
      },
      { name: "held", sql: HELD_SQL, params: [name, MAX_HELD_SHOWN + 1], max: MAX_HELD_SHOWN + 1 },
    ];
    const problems: string[] = [];
    const explained: { name: string; executionMs: unknown; indexes: (string | undefined)[]; text: string }[] =
      [];
    for (const p of plans) {
      const { plan, json } = await explainJson(db, `/* ${p.name} */ ${p.sql}`, p.params, { analyze: true });
      const scans = scansOf(plan);
      problems.push(
        ...scans
          .filter((s) => s.relation.startsWith("ingestion_") && s.index === undefined)
          .map((s) => `${p.name}: ${s.node} on ${s.relation} without an index`),
        ...overReads(plan, STRIP_RUNS).map((o) => `${p.name}: ${o}`),
      );
      explained.push({
        name: p.name,
        executionMs: json["Execution Time"],
        indexes: [...new Set(scans.map((s) => s.index))],
        text: await explainText(db, p.sql, p.params, true),
      });
    }
    for (const p of supplierPlans) {
      const { plan, json } = await explainJson(db, `/* ${p.name} */ ${p.sql}`, p.params, { analyze: true });
      const scans = scansOf(plan);
      problems.push(
        ...scans
          .filter((s) => s.relation.startsWith("ingestion_") && s.index === undefined)
          .map((s) => `supplier page ${p.name}: ${s.node} on ${s.relation} without an index`),
        ...overReads(plan, p.max).map((o) => `supplier page ${p.name}: ${o}`),
      );
      explained.push({
        name: `supplier page: ${p.name}`,
        executionMs: json["Execution Time"],
        indexes: [...new Set(scans.map((s) => s.index))],
        text: await explainText(db, p.sql, p.params, true),
      });
    }
    for (const { label, m } of supplierPages) {
      if (!(m.medianMs < TARGET_MS))
        problems.push(`${m.path} (${label}) median ${m.medianMs} ms >= ${TARGET_MS} ms`);
    }
    // What migration 0007 costs on this history: its index built again from scratch.
    await db.query("drop index ingestion_runs_supplier_state_trigger_id");
    const indexStarted = performance.now();
    await db.query(
      'CREATE INDEX "ingestion_runs_supplier_state_trigger_id" ON "ingestion_runs" USING btree ("supplier","state","trigger","id")',
    );
    const indexBuildMs = Math.round(performance.now() - indexStarted);
    if (!(churn.medianMs < TARGET_MS))
      problems.push(`GET / (churn) median ${churn.medianMs} ms >= ${TARGET_MS} ms`);
    const report = {
      case: "console",
      machine: { cpus: cpus().length, cpu: cpus()[0]?.model ?? "unknown", node: process.version },
      postgres: database.server["version"],
      history: { suppliers: supplierCount, runs: supplierCount * runsPerSupplier + 1 },
      load: loadavg().map((n) => Math.round(n * 100) / 100),
      targetMs: TARGET_MS,
      overviewCold,
      overview,
      overviewChurn: churn,
      run: { ...run, steps: 2000, rejects: 500 },
      supplierPages: supplierPages.map(({ label, m }) => ({ label, ...m })),
      migration0007IndexBuildMs: indexBuildMs,
      statements: explained.map(({ text: _text, ...rest }) => rest),
      problems,
    };
    if (problems.length > 0) process.exitCode = 1;
    if (argv.includes("--json")) {
      process.stdout.write(`${JSON.stringify(report)}\n`);
      return;
    }
    process.stdout.write(
      [
        `console benchmark: ${report.history.suppliers} suppliers, ${report.history.runs} runs (${report.postgres})`,
        `load average ${report.load.join(" ")} on ${report.machine.cpus} CPUs`,
        line("GET / cold", overviewCold),
        line("GET / steady", overview),
        line("GET / churn 5%", churn),
        line("GET /runs/<id>", run, "2,000 steps, 500 rejects"),
        ...supplierPages.map(({ label, m }) => line(`/suppliers ${label}`.slice(0, 28), m)),
        `migration 0007: index built in ${indexBuildMs} ms over ${report.history.runs} runs`,
        ...explained.flatMap((e) => [
          "",
          `EXPLAIN (ANALYZE, BUFFERS) of the ${e.name} statement (${e.executionMs} ms, indexes ${e.indexes.join(", ")}):`,
          e.text,
        ]),
        "",
        problems.length === 0 ? "checks: all passed" : `checks FAILED:\n  ${problems.join("\n  ")}`,
        "",
      ].join("\n"),
    );
  } finally {
    await server.stop();
    await db.end().catch(() => {});
    await database.stop();
  }
}

runMain(async () => {
  await main(process.argv.slice(2), process.env);
  if (process.exitCode === 1) throw new Error("console benchmark: a check failed (see above)");
});
