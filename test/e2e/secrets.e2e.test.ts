// Secrets given by env var and by file never leave the process: not in logs, error
// columns, check-config output or HTTP responses (issue 10), the console's pages
// included (issue 20).
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import t from "tap";
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, runCli, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector } from "../helpers/fixtures.js";

const ENV_TOKEN = "env-token-7f3a9c2e51";
const FILE_PASSWORD = "file-password-4b8d0e6a";

t.test("env and file secrets appear nowhere an operator can see", async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({
    suppliers: {
      bearer: {
        size: 120,
        pageSize: 50,
        auth: { type: "bearer", token: ENV_TOKEN },
        faults: { status: { code: 503, onPage: 2, times: 1 } },
      },
      basic: { size: 60, auth: { type: "basic", username: "svc", password: FILE_PASSWORD } },
      wrong: { size: 10, auth: { type: "bearer", token: "something-else-entirely" } },
    },
  });
  t.teardown(() => sim.close());
  const dir = connectorsDir({
    bearer: simConnector(sim.baseUrl("bearer"), { auth: { type: "bearer", tokenEnv: "BEARER_TOKEN" } }),
    basic: simConnector(sim.baseUrl("basic"), {
      auth: { type: "basic", usernameEnv: "BASIC_USER", passwordFile: "basic.pw" },
    }),
    wrong: simConnector(sim.baseUrl("wrong"), { auth: { type: "bearer", tokenEnv: "BEARER_TOKEN" } }),
  });
  writeFileSync(join(dir, "basic.pw"), `${FILE_PASSWORD}\n`);
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "bearer:1h,basic:1h,wrong:1h",
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
    SUPPLIER_SYNC_LOG_LEVEL: "trace",
    BEARER_TOKEN: ENV_TOKEN,
    BASIC_USER: "svc",
  });
  const basicB64 = Buffer.from(`svc:${FILE_PASSWORD}`).toString("base64");
  const secrets = [ENV_TOKEN, FILE_PASSWORD, basicB64];
  const clean = (what: string, text: string) => {
    for (const s of secrets) t.notOk(text.includes(s), `${what} does not contain a secret`);
  };

  const check = await runCli(t, ["check-config"], env);
  t.equal(check.code, 0, check.stderr);
  clean("check-config output", check.stdout + check.stderr);

  const daemon = startCli(t, [], env);
  const listening = await daemon.waitForLog((l) => l.msg === "health and metrics server listening");
  await daemon.waitForLog((l) => l.outcome === "success" && l.supplier === "basic", 30_000);
  await daemon.waitForLog((l) => l.outcome === "success" && l.supplier === "bearer", 30_000);
  await daemon.waitForLog((l) => l.supplier === "wrong" && l.outcome === "failed", 30_000);
  t.ok(
    daemon.logs().some((l) => l.msg === "retrying" || typeof l.delay_ms === "number"),
    "a retry was logged",
  );
  // The console too (issue 20): the overview and every run's page, the failed AUTH run included.
  const runIds = (await query<{ id: string }>(url, "select id from ingestion_runs")).map(
    (r) => `/runs/${r.id}`,
  );
  t.ok(runIds.length >= 3, "a page per run");
  for (const path of ["/readyz", "/readyz/basic", "/metrics", "/livez", "/nope", "/", ...runIds]) {
    const res = await fetch(`http://${listening.addr as string}${path}`);
    const body = await res.text();
    if (path === "/" || path.startsWith("/runs/")) t.equal(res.status, 200, `GET ${path}`);
    clean(`GET ${path}`, JSON.stringify([...res.headers]) + body);
  }
  daemon.child.kill("SIGTERM");
  t.equal(await daemon.exited(30_000), 0);
  clean("daemon stdout", daemon.stdout.join("\n"));
  clean("daemon stderr", daemon.stderr.join(""));
  const rows = await query(url, "select error_code, error_message, owner::text from ingestion_runs");
  clean("run rows", JSON.stringify(rows));
  t.ok(
    rows.some((r) => r.error_code === "AUTH"),
    "the wrong token failed as AUTH",
  );
  const runs = await runCli(t, ["runs", "--json"], env);
  clean("runs --json", runs.stdout);
});

t.test("DATABASE_URL credentials are never printed", async (t) => {
  const r = await runCli(
    t,
    ["check-config"],
    baseEnv({
      SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
      DATABASE_URL: "postgres://admin:hunter2secret@127.0.0.1:9/db",
    }),
  );
  t.notOk((r.stdout + r.stderr).includes("hunter2secret"));
  const m = await runCli(
    t,
    ["migrate"],
    baseEnv({
      SUPPLIER_SYNC_SUPPLIERS: "etm:1h",
      DATABASE_URL: "postgres://admin:hunter2secret@127.0.0.1:9/db",
    }),
  );
  t.equal(m.code, 3);
  t.notOk((m.stdout + m.stderr).includes("hunter2secret"));
});
