/**
 * An ETM-shaped walk at ETM's 1 request/s (issue 17): the shipped
 * `config/suppliers/etm.json` itself, only its baseUrl aimed at the simulator's
 * etm profile (session login, price batches of ≤ 50 codes, `remains` per code,
 * the server's own 1/s bucket), run by a worker child (`buildApp` + a forced
 * tick) for `ETM_SKUS` codes. Reported:
 * - data requests, which must be exactly ceil(n/50) + n (one price request per
 *   batch, one `remains` per code), plus the one login;
 * - budget used = requests answered / (burst + rate × seconds from the first
 *   request to the last), as the rate-limit case measures it; the login counts,
 *   since it goes through the same limiter;
 * - the 429s the simulator's bucket answered (must be 0).
 * One repetition: at 1 request/s the walk is its own minute.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSimulator } from "../../internal/simulator/index.js";
import {
  pointConnectorsAt,
  realApiEnv,
  realApiSupplier,
  writeSkuFile,
} from "../../internal/simulator/real-apis.js";
import { PROJECT_ROOT, runWorker } from "../child.js";
import { type Measurement, measurement } from "../measure.js";
import type { CaseContext } from "./context.js";

/** 55 codes: two price batches (50 + 5) and 55 remains, 58 requests with the login, about a minute. */
export const ETM_SKUS = 55;

const CREDENTIALS = {
  etm: { login: "bench", password: "bench-etm-password" },
  iek: { username: "bench", password: "unused" },
  systeme: { accessCode: "unused" },
};

export async function measureEtmWalk(ctx: CaseContext): Promise<Measurement[]> {
  const n = ETM_SKUS;
  const sim = await startSimulator({ suppliers: { etm: realApiSupplier("etm", n, CREDENTIALS.etm) } });
  const dir = mkdtempSync(join(tmpdir(), "bench-etm-"));
  try {
    pointConnectorsAt(sim, join(PROJECT_ROOT, "config/suppliers"), dir, ["etm"]);
    writeSkuFile(sim, "etm", join(dir, "etm-skus.txt"));
    const report = await runWorker(
      {
        SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
        DATABASE_URL: ctx.url,
        SUPPLIER_SYNC_CONNECTORS_DIR: dir,
        SUPPLIER_SYNC_LOG_LEVEL: "warn",
        SUPPLIER_SYNC_HTTP_ADDR: "127.0.0.1:0",
        ...realApiEnv(CREDENTIALS),
      },
      180_000,
    );
    const result = report.results[0];
    if (result?.outcome !== "success") throw new Error(`etm walk: tick outcome ${result?.outcome}`);
    const stats = sim.stats("etm");
    const data = stats.requests - stats.logins;
    const expected = Math.ceil(n / 50) + n;
    if (data !== expected)
      throw new Error(`etm walk: ${data} data requests, expected ceil(n/50) + n = ${expected}`);
    const times = stats.requestTimes;
    const seconds = ((times.at(-1) ?? 0) - (times[0] ?? 0)) / 1000;
    const answered = stats.requests - stats.overBudget;
    const used = answered / (1 + 1 * seconds);
    ctx.progress(
      `etm walk: ${n} codes, ${data} data requests + ${stats.logins} login in ${seconds.toFixed(2)} s, ` +
        `budget used ${(used * 100).toFixed(1)} %, ${stats.overBudget} over budget`,
    );
    return [
      measurement(
        "etm_walk.budget_used",
        `ETM walk at 1 request/s, ${n} codes: share of budget used`,
        "",
        [used],
        {
          data_requests: data,
          expected_data_requests: expected,
          logins: stats.logins,
          over_budget: stats.overBudget,
          walk_seconds: seconds,
          offers: result.counts?.seen ?? 0,
        },
      ),
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await sim.close();
  }
}
