// Issue 9, scenario 5: supplier storms. Each storm is one `--tick-once` process against
// a simulator supplier misbehaving in one way; the run's outcome and error code are
// asserted, then the invariants. Transient faults must end in a success within the
// retry budget, permanent ones in a closed, non-succeeded run without retries.
import type { Test } from "tap";
import { type SimulatorSupplierOptions, startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, runCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector } from "../helpers/fixtures.js";
import { assertInvariants } from "./helpers/invariants.js";
import { scenario } from "./helpers/scenario.js";

interface Storm {
  name: string;
  sim: SimulatorSupplierOptions;
  connector?: Record<string, unknown>;
  /** Expected run state and error code (a RegExp when the code may vary by path). */
  state: "succeeded" | "partial" | "failed";
  errorCode: string | RegExp | null;
  /** Bound on the whole tick-once process. */
  withinMs: number;
  /** For permanent faults: the failed step was tried exactly once. */
  noRetry?: boolean;
  extra?: (t: Test, ctx: { url: string; status: Record<number, number> }) => Promise<void>;
}

const FAST_RETRY = { maxAttempts: 6, baseDelayMs: 20, maxDelayMs: 200, maxRetryAfterMs: 5_000 };

const storms: Storm[] = [
  {
    name: "30 % 503",
    sim: { size: 3_000, faults: { status: { code: 503, rate: 0.3 } } },
    connector: { retry: FAST_RETRY },
    state: "succeeded",
    errorCode: null,
    withinMs: 20_000,
    extra: async (t, { url, status }) => {
      t.ok((status[503] ?? 0) >= 3, `503s were served (${status[503]})`);
      const a = await query<{ attempts: number; steps: number }>(
        url,
        "select sum(http_attempts)::int as attempts, count(*)::int as steps from ingestion_run_steps",
      );
      t.ok(
        (a[0]?.attempts ?? 0) > (a[0]?.steps ?? 0),
        `and retried (${a[0]?.attempts} attempts, ${a[0]?.steps} pages)`,
      );
    },
  },
  {
    name: "429 with Retry-After: 1 (seconds)",
    sim: { size: 300, faults: { retryAfter: { seconds: 1, times: 2 } } },
    connector: { retry: FAST_RETRY },
    state: "succeeded",
    errorCode: null,
    withinMs: 20_000,
    extra: async (t, { status }) => {
      t.equal(status[429], 2, "two 429s, then served");
    },
  },
  {
    name: "429 with Retry-After as an HTTP date",
    sim: { size: 300, faults: { retryAfter: { seconds: 2, httpDate: true, times: 1 } } },
    connector: { retry: FAST_RETRY },
    state: "succeeded",
    errorCode: null,
    withinMs: 20_000,
    extra: async (t, { status }) => {
      t.equal(status[429], 1, "one 429, then served");
    },
  },
  {
    name: "429 with Retry-After beyond maxRetryAfterMs",
    sim: { size: 300, faults: { retryAfter: { seconds: 600, onPage: 2 } } },
    connector: { retry: FAST_RETRY },
    state: "partial",
    errorCode: /^HTTP_429$|RATE/,
    withinMs: 10_000,
  },
  {
    name: "latency spikes (400 ms a request)",
    sim: { size: 500, faults: { latencyMs: 400 } },
    connector: { retry: FAST_RETRY, timeouts: { requestMs: 3_000 } },
    state: "succeeded",
    errorCode: null,
    withinMs: 20_000,
  },
  {
    name: "timeouts (supplier slower than requestMs)",
    sim: { size: 300, faults: { latencyMs: 5_000 } },
    connector: { retry: { ...FAST_RETRY, maxAttempts: 2 }, timeouts: { requestMs: 300, pageMs: 5_000 } },
    state: "failed",
    errorCode: /TIMEOUT|NETWORK|DEADLINE/,
    withinMs: 15_000,
  },
  {
    name: "401 (AUTH, never retried)",
    sim: { size: 300, auth: { type: "bearer", token: "right" } },
    connector: { retry: FAST_RETRY },
    state: "failed",
    errorCode: "AUTH",
    withinMs: 10_000,
    noRetry: true,
    extra: async (t, { status }) => {
      t.equal(status[401], 1, "one 401, no retry");
    },
  },
  {
    name: "truncated body on page 2",
    sim: { size: 300, faults: { truncateOnPage: 2 } },
    connector: { retry: { ...FAST_RETRY, maxAttempts: 2 } },
    state: "partial",
    errorCode: /NETWORK|CONTRACT/,
    withinMs: 15_000,
  },
  {
    name: "invalid JSON on page 2 (CONTRACT)",
    sim: { size: 300, faults: { invalidJsonOnPage: 2 } },
    connector: { retry: FAST_RETRY },
    state: "partial",
    errorCode: "CONTRACT",
    withinMs: 10_000,
    noRetry: true,
  },
  {
    name: "missing records path on page 2 (CONTRACT)",
    sim: { size: 300, faults: { missingRecordsPathOnPage: 2 } },
    connector: { retry: FAST_RETRY },
    state: "partial",
    errorCode: "CONTRACT",
    withinMs: 10_000,
    noRetry: true,
  },
  {
    name: "schema drift: price.value renamed",
    sim: { size: 300, renameField: { from: "price.value", to: "price.amount" } },
    connector: { retry: FAST_RETRY },
    state: "failed",
    errorCode: "CONTRACT",
    withinMs: 10_000,
    noRetry: true,
    extra: async (t, { url }) => {
      const rejects = await query<{ n: number; reason: string }>(
        url,
        "select count(*)::int as n, min(reason) as reason from ingestion_rejects",
      );
      t.ok((rejects[0]?.n ?? 0) > 0, `the drifted records are kept as rejects (${rejects[0]?.n})`);
      t.match(rejects[0]?.reason ?? "", /price/, "the reason names the field");
      const offers = await query<{ n: number }>(url, "select count(*)::int as n from supplier_offers");
      t.equal(offers[0]?.n, 0, "no offer written from a drifted page");
    },
  },
  {
    name: "10 % invalid records",
    sim: { size: 1_000, invalidRate: 0.1 },
    connector: { retry: FAST_RETRY },
    state: "succeeded",
    errorCode: null,
    withinMs: 15_000,
    extra: async (t, { url }) => {
      const r = await query<{ rejected: number; rows: number; raw: number }>(
        url,
        "select (select records_rejected from ingestion_runs) as rejected, count(*)::int as rows, count(raw)::int as raw from ingestion_rejects",
      );
      t.same(r[0], { rejected: 100, rows: 100, raw: 100 }, "100 rejects kept with their raw payload");
    },
  },
  {
    name: "200 MB body with maxResponseBytes 1 MB",
    sim: { size: 300, faults: { oversizedBodyBytes: 200 * 1024 * 1024 } },
    connector: { retry: FAST_RETRY, maxResponseBytes: 1_048_576 },
    state: "failed",
    errorCode: /CONTRACT|TOO_LARGE|RESPONSE/,
    withinMs: 10_000,
    noRetry: true,
  },
];

for (const storm of storms) {
  scenario(`5. storm: ${storm.name}`, { timeoutMs: 60_000 }, async (t) => {
    const url = await createTestDatabase(t);
    const sim = await startSimulator({ suppliers: { acme: storm.sim } });
    t.teardown(() => sim.close());
    const env = baseEnv({
      DATABASE_URL: url,
      SUPPLIER_SYNC_SUPPLIERS: "acme:1h",
      SUPPLIER_SYNC_CONNECTORS_DIR: connectorsDir({
        acme: simConnector(sim.baseUrl("acme"), {
          ...(storm.sim.auth ? { auth: { type: "bearer", tokenEnv: "ACME_TOKEN" } } : {}),
          ...storm.connector,
        }),
      }),
      ACME_TOKEN: "wrong",
    });
    const started = Date.now();
    const r = await runCli(t, ["--tick-once"], env, storm.withinMs + 10_000);
    const tookMs = Date.now() - started;
    t.ok(tookMs < storm.withinMs, `bounded: ${tookMs} ms < ${storm.withinMs} ms`);
    t.equal(r.code, storm.state === "succeeded" ? 0 : 1, `exit code ${r.code} ${r.stderr}`);
    const runs = await query<{ state: string; error_code: string | null; error_message: string | null }>(
      url,
      "select state, error_code, error_message from ingestion_runs",
    );
    t.equal(runs.length, 1, "one run row");
    t.equal(runs[0]?.state, storm.state, `state (${runs[0]?.error_code}: ${runs[0]?.error_message})`);
    if (storm.errorCode instanceof RegExp) t.match(runs[0]?.error_code ?? "", storm.errorCode, "error code");
    else t.equal(runs[0]?.error_code ?? null, storm.errorCode, "error code");
    if (storm.noRetry) {
      const failed = await query<{ http_attempts: number }>(
        url,
        "select http_attempts from ingestion_run_steps where state = 'failed'",
      );
      t.same(
        failed,
        [{ http_attempts: 1 }],
        "the failed step was tried once: permanent errors are not retried",
      );
    }
    await storm.extra?.(t, { url, status: sim.stats("acme").byStatus });
    return assertInvariants(t, {
      url,
      sim,
      suppliers: [{ name: "acme", intervalMs: 3_600_000 }],
      complete: storm.state === "succeeded" ? ["acme"] : [],
    });
  });
}
