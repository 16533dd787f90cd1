// Issue 9, scenario 7: the bad-configuration matrix (docs/operations.md, Environment) run as real processes
// (exit 2, the message names the problem), and broken connector files (unknown keys,
// missing env secrets, bad dot paths): check-config exits 2 naming the file and field,
// while the daemon keeps running the healthy supplier.
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, runCli, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector, until } from "../helpers/fixtures.js";
import { assertInvariants } from "./helpers/invariants.js";
import { scenario } from "./helpers/scenario.js";

const okDir = connectorsDir({ etm: simConnector("http://127.0.0.1:9/etm") });
/** Nothing listens on port 9: a config error must be reported before any connection. */
const env = (extra: Record<string, string>) =>
  baseEnv({ SUPPLIER_SYNC_CONNECTORS_DIR: okDir, DATABASE_URL: "postgres://127.0.0.1:9/none", ...extra });

const matrix: [string, Record<string, string | undefined>, RegExp[]][] = [
  ["unset list", {}, [/SUPPLIER_SYNC_SUPPLIERS/]],
  ["empty list", { SUPPLIER_SYNC_SUPPLIERS: "" }, [/SUPPLIER_SYNC_SUPPLIERS/]],
  ["malformed entry", { SUPPLIER_SYNC_SUPPLIERS: "etm:1h,iek" }, [/iek/]],
  ["duplicate name", { SUPPLIER_SYNC_SUPPLIERS: "etm:1h,etm:2h" }, [/etm/, /duplicate/i]],
  ["zero interval", { SUPPLIER_SYNC_SUPPLIERS: "etm:0s" }, [/0s/]],
  ["negative interval", { SUPPLIER_SYNC_SUPPLIERS: "etm:-5m" }, [/-5m/]],
  ["unparseable interval", { SUPPLIER_SYNC_SUPPLIERS: "etm:6 hours" }, [/6 hours/]],
  ["bad enabled flag", { SUPPLIER_SYNC_SUPPLIERS: "etm:1h:yes" }, [/yes/]],
  ["every supplier disabled", { SUPPLIER_SYNC_SUPPLIERS: "etm:1h:false" }, [/disabled/i]],
  [
    "retired SUPPLIER_SYNC_TICK_INTERVAL",
    { SUPPLIER_SYNC_SUPPLIERS: "etm:1h", SUPPLIER_SYNC_TICK_INTERVAL: "6h" },
    [/SUPPLIER_SYNC_TICK_INTERVAL/],
  ],
  [
    "retired SUPPLIER_SYNC_ENABLED (even empty)",
    { SUPPLIER_SYNC_SUPPLIERS: "etm:1h", SUPPLIER_SYNC_ENABLED: "" },
    [/SUPPLIER_SYNC_ENABLED/],
  ],
  [
    "production without DATABASE_URL",
    { SUPPLIER_SYNC_SUPPLIERS: "etm:1h", NODE_ENV: "production", DATABASE_URL: undefined },
    [/DATABASE_URL/],
  ],
];

scenario(
  "7a. bad-config matrix (docs/operations.md, Environment) as processes",
  { timeoutMs: 120_000 },
  async (t) => {
    for (const [name, vars, patterns] of matrix) {
      const e: Record<string, string> = env({});
      for (const [k, v] of Object.entries(vars)) {
        if (v === undefined) delete e[k];
        else e[k] = v;
      }
      // Every command validates the configuration first: check-config, the daemon, --tick-once.
      for (const args of [["check-config"], [], ["--tick-once"]]) {
        const r = await runCli(t, args, e, 15_000);
        t.equal(r.code, 2, `${name}: '${args.join(" ") || "daemon"}' exits 2`);
        for (const p of patterns) t.match(r.stderr, p, `${name}: the message names ${p}`);
        t.notMatch(r.stderr, /\n\s+at /, `${name}: no stack trace`);
      }
    }
    return ["exit 2 + named problem for every command"];
  },
);

scenario(
  "7b. broken connector files: check-config exit 2, daemon runs the others",
  { timeoutMs: 90_000 },
  async (t) => {
    const url = await createTestDatabase(t);
    const sim = await startSimulator({ suppliers: { good: { size: 250 } } });
    t.teardown(() => sim.close());
    const base = simConnector(sim.baseUrl("good"));
    const dir = connectorsDir({
      good: base,
      unknownkey: { ...base, pagnation: { type: "none" } },
      nosecret: { ...base, auth: { type: "bearer", tokenEnv: "NOSECRET_API_TOKEN" } },
      baddot: { ...base, fields: { sku: "article", price: "price..value" } },
    });
    const e = baseEnv({
      DATABASE_URL: url,
      SUPPLIER_SYNC_SUPPLIERS: "good:1h,unknownkey:1h,nosecret:1h,baddot:1h",
      SUPPLIER_SYNC_CONNECTORS_DIR: dir,
    });
    const check = await runCli(t, ["check-config"], e, 15_000);
    t.equal(check.code, 2, "check-config exits 2");
    const lineOf = (name: string) => check.stdout.split("\n").find((l) => l.includes(name)) ?? "";
    // The file is `<connectors dir>/<supplier>.json`: the line names the supplier, Settings the folder.
    t.match(check.stdout, dir, "prints the connectors folder");
    t.match(lineOf("unknownkey"), /^\s*unknownkey\s.*invalid/, "names the broken file's supplier");
    t.match(lineOf("unknownkey"), /pagnation/, "names the unknown key");
    t.match(lineOf("nosecret"), /NOSECRET_API_TOKEN/, "names the missing env secret");
    t.match(lineOf("baddot"), /fields\.price/, "names the field with the bad dot path");
    t.notMatch(lineOf("good"), /invalid|missing/, "the healthy supplier is reported fine");

    const daemon = startCli(t, [], e);
    await daemon.waitForLog((l) => l.supplier === "good" && l.outcome === "success", 30_000);
    await until(
      async () =>
        (await query(url, "select 1 from ingestion_runs where error_code = 'CONNECTOR_MISSING'")).length ===
        3,
      15_000,
      "a CONNECTOR_MISSING run for each broken supplier",
    );
    t.equal(daemon.child.exitCode, null, "the daemon keeps running");
    daemon.child.kill("SIGTERM");
    t.equal(await daemon.exited(20_000), 0);
    const runs = await query<{ supplier: string; state: string; error_code: string | null }>(
      url,
      "select distinct supplier, state, error_code from ingestion_runs order by supplier",
    );
    t.same(runs, [
      { supplier: "baddot", state: "failed", error_code: "CONNECTOR_MISSING" },
      { supplier: "good", state: "succeeded", error_code: null },
      { supplier: "nosecret", state: "failed", error_code: "CONNECTOR_MISSING" },
      { supplier: "unknownkey", state: "failed", error_code: "CONNECTOR_MISSING" },
    ]);
    const once = await runCli(t, ["--tick-once", "--force"], e, 30_000);
    t.equal(once.code, 1, "--tick-once exits 1 when a supplier's connector is broken");
    return assertInvariants(t, {
      url,
      sim,
      suppliers: [{ name: "good", intervalMs: 3_600_000 }],
      complete: ["good"],
    });
  },
);
