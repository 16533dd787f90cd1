// Every log line of a run carries each key once with one type (issue 34): `supplier` and
// `run_id` (a number) come from the run's logger bindings, never again from a connector's
// line (`logged in`, the export job's lines, retries). A real tick of the shipped
// config/suppliers/etm-catalog.json (session login, export job) against the simulator.
import { readFileSync } from "node:fs";
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { forcedTick, tickDeps } from "../../test/helpers/tick.js";
import { startSimulator } from "../simulator/server.js";
import { connectorDefinitionSchema } from "./schema/connector-schema.js";
import { buildConnector, captureLogger } from "./test-support.js";

const LOGIN = "etm-user";
const PASSWORD = "etm-pass-0123456789";

/** How often `key` is written in a raw JSON line (JSON.parse would keep only the last). */
function occurrences(line: string, key: string): number {
  return line.split(`"${key}":`).length - 1;
}

t.test("a run's lines: supplier and run_id once each, run_id a number", async (t) => {
  const sim = await startSimulator();
  t.teardown(() => sim.close());
  const pool = testPool(t, await createTestDatabase(t), 4);
  sim.configure("etm", {
    size: 60,
    profile: "etm",
    auth: {
      type: "session",
      loginPath: "/api/v1/user/login",
      credentials: { log: LOGIN, pwd: PASSWORD },
      expiredAs: "body403",
    },
    // One 503 on the second request: a retry line too.
    faults: { status: { code: 503, onPage: 2, times: 1 } },
  });
  const shipped = JSON.parse(
    readFileSync(new URL("../../config/suppliers/etm-catalog.json", import.meta.url), "utf8"),
  );
  const definition = connectorDefinitionSchema.parse({
    ...shipped,
    baseUrl: sim.baseUrl("etm"),
    rateLimit: { requestsPerSecond: 1000, burst: 1000, maxConcurrency: 1 },
    retry: { maxAttempts: 3, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 1000 },
    auth: { ...shipped.auth, minLoginIntervalMs: 0 },
    export: { ...shipped.export, poll: { ...shipped.export.poll, intervalMs: 20 } },
  });
  const env: Record<string, string> = { ETM_LOGIN: LOGIN, ETM_PASSWORD: PASSWORD };
  const { connector } = buildConnector(t, definition, { supplier: "etm", readSecretEnv: (k) => env[k] });
  const { log, lines } = captureLogger();
  const result = await forcedTick(tickDeps(pool, log), "etm", connector);
  t.equal(result.outcome, "success", JSON.stringify(result));

  const messages = lines.map((l) => JSON.parse(l).msg as string);
  for (const msg of ["logged in", "export job created", "export job ready"]) {
    t.ok(messages.includes(msg), `"${msg}" logged`);
  }
  const runLines = lines.filter((l) => JSON.parse(l).run_id !== undefined);
  t.ok(runLines.length >= 4, `${runLines.length} lines of the run`);
  for (const line of lines) {
    for (const key of ["supplier", "run_id", "seq"]) {
      t.ok(occurrences(line, key) <= 1, `${key} at most once: ${line}`);
    }
    const parsed = JSON.parse(line) as { supplier?: unknown; run_id?: unknown };
    if (parsed.run_id !== undefined) {
      t.equal(parsed.run_id, result.runId, `run_id a number: ${JSON.parse(line).msg}`);
      t.equal(parsed.supplier, "etm");
    }
  }
});
