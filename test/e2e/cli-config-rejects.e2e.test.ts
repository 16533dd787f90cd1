// The CLI as an operator runs it: `check-config` refuses each bad setting with exit 2 and names it
// (README.md, Command line; docs/operations.md, Environment). Real processes, one per case: kept in
// a file of its own so that the other CLI checks (cli-config.e2e.test.ts) stay well inside tap's
// per-file timeout on a loaded machine.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { baseEnv, runCli } from "../helpers/cli.js";

const connectorsDir = mkdtempSync(join(tmpdir(), "ss-cli-"));
writeFileSync(
  join(connectorsDir, "etm.json"),
  JSON.stringify({ baseUrl: "http://127.0.0.1:9/etm", fields: { sku: "article", price: "price.value" } }),
);
const env = (extra: Record<string, string>) =>
  baseEnv({
    SUPPLIER_SYNC_CONNECTORS_DIR: connectorsDir,
    DATABASE_URL: "postgres://127.0.0.1:9/none",
    ...extra,
  });

const rejections: [string, Record<string, string>, RegExp[]][] = [
  ["zero interval", { SUPPLIER_SYNC_SUPPLIERS: "etm:0h:true" }, [/etm/, /0h/, /SUPPLIER_SYNC_SUPPLIERS/]],
  ["unset list", {}, [/SUPPLIER_SYNC_SUPPLIERS/]],
  ["empty list", { SUPPLIER_SYNC_SUPPLIERS: "" }, [/SUPPLIER_SYNC_SUPPLIERS/]],
  ["malformed entry", { SUPPLIER_SYNC_SUPPLIERS: "etm" }, [/etm/]],
  ["duplicate name", { SUPPLIER_SYNC_SUPPLIERS: "etm:1h,etm:2h" }, [/etm/, /duplicate/i]],
  ["negative interval", { SUPPLIER_SYNC_SUPPLIERS: "etm:-5m" }, [/-5m/]],
  ["unparseable interval", { SUPPLIER_SYNC_SUPPLIERS: "etm:soon" }, [/soon/]],
  ["bad enabled flag", { SUPPLIER_SYNC_SUPPLIERS: "etm:1h:yes" }, [/yes/]],
  ["all disabled", { SUPPLIER_SYNC_SUPPLIERS: "etm:1h:false,iek:1h:false" }, [/disabled/i]],
  ["bad name", { SUPPLIER_SYNC_SUPPLIERS: "ETM:1h" }, [/ETM/]],
  [
    "malformed cron expression",
    { SUPPLIER_SYNC_SUPPLIERS: "etm:cron(0 3 * *)" },
    [/SUPPLIER_SYNC_SUPPLIERS/, /etm:cron\(0 3 \* \*\)/, /malformed expression/],
  ],
  [
    "unknown cron time zone",
    { SUPPLIER_SYNC_SUPPLIERS: "etm:cron(0 3 * * * @Europe/Atlantis)" },
    [/etm:cron/, /unknown time zone "Europe\/Atlantis"/],
  ],
  [
    "unknown lease",
    { SUPPLIER_SYNC_SUPPLIERS: "etm:1h", SUPPLIER_SYNC_LEASE: "foo" },
    [/SUPPLIER_SYNC_LEASE/, /foo/],
  ],
  [
    "bad lease TTL",
    { SUPPLIER_SYNC_SUPPLIERS: "etm:1h", SUPPLIER_SYNC_LEASE: "table", SUPPLIER_SYNC_LEASE_TTL: "0s" },
    [/SUPPLIER_SYNC_LEASE_TTL/, /0s/],
  ],
  [
    "dead-peer bound out of range",
    { SUPPLIER_SYNC_SUPPLIERS: "etm:1h", SUPPLIER_SYNC_LEASE_DEAD_PEER: "1s" },
    [/SUPPLIER_SYNC_LEASE_DEAD_PEER/, /"1s"/, /3s/],
  ],
  [
    "retired SUPPLIER_SYNC_TICK_INTERVAL",
    { SUPPLIER_SYNC_SUPPLIERS: "etm:1h", SUPPLIER_SYNC_TICK_INTERVAL: "6h" },
    [/SUPPLIER_SYNC_TICK_INTERVAL/],
  ],
  [
    "retired SUPPLIER_SYNC_ENABLED",
    { SUPPLIER_SYNC_SUPPLIERS: "etm:1h", SUPPLIER_SYNC_ENABLED: "" },
    [/SUPPLIER_SYNC_ENABLED/],
  ],
  [
    "production without DATABASE_URL",
    { SUPPLIER_SYNC_SUPPLIERS: "etm:1h", NODE_ENV: "production", DATABASE_URL: "" },
    [/DATABASE_URL/],
  ],
  [
    "bad pool size",
    { SUPPLIER_SYNC_SUPPLIERS: "etm:1h", SUPPLIER_SYNC_DB_POOL_MAX: "lots" },
    [/SUPPLIER_SYNC_DB_POOL_MAX/],
  ],
];

for (const [name, vars, patterns] of rejections) {
  t.test(`check-config rejects: ${name} (exit 2, named)`, async (t) => {
    const e = env(vars);
    if (vars.DATABASE_URL === "") delete e.DATABASE_URL;
    const r = await runCli(t, ["check-config"], e);
    t.equal(r.code, 2, r.stderr);
    for (const p of patterns) t.match(r.stderr, p);
  });
}
