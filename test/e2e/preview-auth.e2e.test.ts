// `supplier-sync preview` and the session / query-key connectors as an operator runs them: real
// processes, a real PostgreSQL, the simulator on loopback; secrets at debug level (issue 16).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import t from "tap";
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, runCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, SIM_FIELDS } from "../helpers/fixtures.js";

const LOGIN = "etm-login-31ab";
const PASSWORD = "etm-password-8e2f6c";
const KEY = "systeme-access-4c7d9e";

const etmConnector = (baseUrl: string, extra: Record<string, unknown> = {}) => ({
  baseUrl,
  auth: {
    type: "session",
    login: {
      method: "POST",
      path: "/api/v1/user/login",
      query: { log: { env: "ETM_LOGIN" }, pwd: { file: "etm.pw" } },
    },
    token: { path: "data.session" },
    send: { query: "session-id" },
    expiredWhen: [{ status: [401] }, { path: "status.code", in: [403] }],
  },
  errors: [
    { path: "status.code", notIn: [200], then: "fail", code: "SUPPLIER", messagePath: "status.message" },
  ],
  rateLimit: { requestsPerSecond: 1000, burst: 1000, maxConcurrency: 1 },
  retry: { maxAttempts: 2, baseDelayMs: 20, maxDelayMs: 50, maxRetryAfterMs: 1000 },
  request: { path: "/v1/offers", query: { limit: "20" } },
  pagination: { type: "page", param: "page", start: 1 },
  records: { path: "data.items" },
  fields: SIM_FIELDS,
  ...extra,
});

async function setup(t: { teardown(fn: () => unknown): void }) {
  const sim = await startSimulator({
    suppliers: {
      etm: {
        size: 100,
        pageSize: 20,
        envelope: true,
        auth: {
          type: "session",
          loginPath: "/api/v1/user/login",
          credentials: { log: LOGIN, pwd: PASSWORD },
          expiredAs: "body403",
          expireAfterRequests: 3,
        },
      },
      systeme: {
        size: 45,
        pageSize: 20,
        auth: { type: "query", param: "accessCode", value: KEY },
        invalidRate: 0.1,
      },
      broken: { size: 20, pageSize: 20, invalidRate: 0.9 },
    },
  });
  t.teardown(() => sim.close());
  const dir = connectorsDir({
    etm: etmConnector(sim.baseUrl("etm")),
    wrongpw: etmConnector(sim.baseUrl("etm"), {}),
    systeme: {
      baseUrl: sim.baseUrl("systeme"),
      auth: { type: "query", param: "accessCode", valueEnv: "SYSTEME_KEY" },
      request: { path: "/v1/offers", query: { limit: "20" } },
      pagination: { type: "page", param: "page", start: 1 },
      records: { path: "data.items" },
      fields: SIM_FIELDS,
    },
    broken: {
      baseUrl: sim.baseUrl("broken"),
      request: { path: "/v1/offers" },
      records: { path: "data.items" },
      fields: SIM_FIELDS,
    },
    badkey: { ...etmConnector(sim.baseUrl("etm")), pagination: { type: "cursor", param: "c" } },
  });
  writeFileSync(join(dir, "etm.pw"), `${PASSWORD}\n`);
  return { sim, dir };
}

t.test(
  "preview: requests, offers and rejects of the first steps, secrets redacted, database untouched",
  async (t) => {
    const { sim, dir } = await setup(t);
    const url = await createTestDatabase(t);
    const env = baseEnv({
      SUPPLIER_SYNC_CONNECTORS_DIR: dir,
      SUPPLIER_SYNC_LOG_LEVEL: "debug",
      DATABASE_URL: url,
      ETM_LOGIN: LOGIN,
      SYSTEME_KEY: KEY,
    });
    const tables = [
      "ingestion_runs",
      "ingestion_run_steps",
      "ingestion_rejects",
      "supplier_offers",
      "supplier_offer_observations",
    ];
    const snapshot = async () =>
      JSON.stringify(
        await Promise.all(tables.map((tb) => query(url, `select count(*)::int as n from ${tb}`))),
      );
    const before = await snapshot();

    const r = await runCli(t, ["preview", "etm", "--steps", "4", "--json"], env);
    t.equal(r.code, 0, r.stderr);
    const report = JSON.parse(r.stdout) as {
      supplier: string;
      complete: boolean;
      steps: {
        seq: number;
        requests: { method: string; url: string; status: number; bytes: number; ms: number }[];
        offers: Record<string, unknown>[];
        rejects: unknown[];
      }[];
    };
    t.equal(report.supplier, "etm");
    t.equal(report.steps.length, 4);
    t.equal(report.complete, false, "the walk would go on");
    const first = report.steps[0]?.requests ?? [];
    t.equal(first[0]?.method, "POST", "the login is the first request of step 1");
    t.match(first[0]?.url, /\/api\/v1\/user\/login\?.*pwd=\[REDACTED\]/);
    t.match(first[1]?.url, /session-id=\[REDACTED\]/);
    t.equal(first[1]?.status, 200);
    t.ok((first[1]?.bytes ?? 0) > 0);
    t.same(Object.keys(report.steps[0]?.offers[0] ?? {}).sort(), [
      "currency",
      "name",
      "price",
      "sku",
      "stock",
    ]);
    t.equal(report.steps[0]?.offers.length, 20);
    // The session expires after 3 requests: step 4 shows the expired answer, the new login and the repeat.
    t.same(
      report.steps[3]?.requests.map((q) => q.method),
      ["GET", "POST", "GET"],
      "expiry, one login, the repeat",
    );
    t.equal(sim.stats("etm").requests, 7, "two logins and five page requests: none of step 5");
    const secrets = [PASSWORD, LOGIN, ...sim.stats("etm").issuedTokens];
    for (const s of secrets) t.notOk((r.stdout + r.stderr).includes(s), `${s.slice(0, 8)}… is not printed`);
    t.match(r.stderr, /"level":20/, "debug lines were written");
    t.equal(await snapshot(), before, "no row written");

    // The text form: a table of offers, the rejects with their reasons, the verdict.
    const text = await runCli(t, ["preview", "systeme", "--steps", "5"], env);
    t.equal(text.code, 0, text.stderr);
    t.match(
      text.stdout,
      /step 1\n {2}GET http:\/\/127\.0\.0\.1:\d+\/systeme\/v1\/offers\?.*accessCode=\[REDACTED\]/,
    );
    t.match(text.stdout, /sku\s+price\s+currency\s+stock\s+name/);
    t.match(text.stdout, /reject: /);
    t.match(text.stdout, /the walk is complete/);
    t.notOk((text.stdout + text.stderr).includes(KEY), "the query key is not printed");

    // Without a reachable database at all, preview still works: it never connects.
    const offline = await runCli(t, ["preview", "systeme"], {
      ...env,
      DATABASE_URL: "postgres://127.0.0.1:9/none",
    });
    t.equal(offline.code, 0, offline.stderr);
    t.match(offline.stdout, /the walk would go on/);
    t.equal(await snapshot(), before, "still no row written");
  },
);

t.test(
  "preview: exit 1 when a step fails or goes over maxRejectRatio, 2 on configuration errors",
  async (t) => {
    const { dir } = await setup(t);
    const env = baseEnv({ SUPPLIER_SYNC_CONNECTORS_DIR: dir, ETM_LOGIN: LOGIN, SYSTEME_KEY: KEY });
    writeFileSync(join(dir, "etm.pw"), "not-the-password\n");
    const failed = await runCli(t, ["preview", "wrongpw", "--json"], env);
    t.equal(failed.code, 1, failed.stderr);
    const report = JSON.parse(failed.stdout);
    t.equal(report.steps[0].error.code, "AUTH");
    t.equal(report.steps[0].requests.length, 1, "one login request");
    t.notOk(failed.stdout.includes("not-the-password"));

    const rejects = await runCli(t, ["preview", "broken"], env);
    t.equal(rejects.code, 1);
    t.match(rejects.stdout, /more rejects than maxRejectRatio/);

    const invalid = await runCli(t, ["preview", "badkey"], env);
    t.equal(invalid.code, 2);
    t.match(
      invalid.stderr,
      /badkey\.json: pagination: set exactly one of cursorPath, cursorHeader, lastRecordPath/,
    );
    const missing = await runCli(t, ["preview", "nosuch"], env);
    t.equal(missing.code, 2);
    t.match(missing.stderr, /no connector definition for "nosuch"/);
    const usage = await runCli(t, ["preview", "etm", "--steps", "0"], env);
    t.equal(usage.code, 2);
    t.match(usage.stderr, /--steps/);
    t.equal((await runCli(t, ["preview"], env)).code, 2);
  },
);

t.test(
  "tick-once at debug level: sessions and query keys never reach the database or the output",
  async (t) => {
    const { sim, dir } = await setup(t);
    const url = await createTestDatabase(t);
    const env = baseEnv({
      SUPPLIER_SYNC_CONNECTORS_DIR: dir,
      SUPPLIER_SYNC_SUPPLIERS: "etm:1h,systeme:1h,wrongpw:1h",
      SUPPLIER_SYNC_LOG_LEVEL: "debug",
      DATABASE_URL: url,
      ETM_LOGIN: LOGIN,
      SYSTEME_KEY: KEY,
    });
    // wrongpw reads the same password file: point it at a wrong one.
    writeFileSync(
      join(dir, "wrongpw.json"),
      JSON.stringify(
        etmConnector(sim.baseUrl("etm"), {
          auth: {
            ...(etmConnector(sim.baseUrl("etm")).auth as object),
            login: {
              method: "POST",
              path: "/api/v1/user/login",
              query: { log: { env: "ETM_LOGIN" }, pwd: { env: "WRONG_PASSWORD" } },
            },
          },
        }),
      ),
    );
    const r = await runCli(t, ["--tick-once"], { ...env, WRONG_PASSWORD: "wrong-password-5f1d" });
    t.equal(r.code, 1, "wrongpw failed");
    const runs = await query<{ supplier: string; state: string; error_code: string | null }>(
      url,
      "select supplier, state, error_code from ingestion_runs order by supplier",
    );
    t.same(
      runs.map((x) => [x.supplier, x.state, x.error_code]),
      [
        ["etm", "succeeded", null],
        ["systeme", "succeeded", null],
        ["wrongpw", "failed", "AUTH"],
      ],
    );
    const dump = JSON.stringify(
      await Promise.all(
        [
          "select * from ingestion_runs",
          "select * from ingestion_run_steps",
          "select * from ingestion_rejects",
          "select * from supplier_offers",
          "select * from supplier_offer_observations",
        ].map((q) => query(url, q)),
      ),
    );
    const output = r.stdout + r.stderr;
    t.match(output, /"level":20/, "debug lines were written");
    t.match(output, /logged in/);
    const secrets = [PASSWORD, LOGIN, KEY, "wrong-password-5f1d", ...sim.stats("etm").issuedTokens];
    t.ok(sim.stats("etm").issuedTokens.length >= 2, "the session expired and was renewed");
    for (const s of secrets) {
      t.notOk(dump.includes(s), `${s.slice(0, 8)}… not in the database`);
      t.notOk(output.includes(s), `${s.slice(0, 8)}… not in the output`);
    }
  },
);
