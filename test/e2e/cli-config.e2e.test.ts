// The CLI as an operator runs it: real processes, exit codes and messages (README.md, Command line; docs/operations.md, Environment).
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { baseEnv, runCli } from "../helpers/cli.js";
import { createTestDatabase, testPool } from "../helpers/db.js";

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

t.test("check-config prints the schedule and connector status", async (t) => {
  const r = await runCli(
    t,
    ["check-config"],
    env({ SUPPLIER_SYNC_SUPPLIERS: "etm:6h,iek:12h:true,off:1h:false" }),
  );
  t.equal(r.code, 2, "iek's connector is missing");
  t.match(r.stdout, /etm.*6h/);
  t.match(r.stdout, /iek.*missing/);
  t.notMatch(r.stdout, /postgres:\/\/[^*\s]*:[^*\s]*@/, "no credentials printed");
  const ok = await runCli(t, ["check-config"], env({ SUPPLIER_SYNC_SUPPLIERS: "etm:6h" }));
  t.equal(ok.code, 0, ok.stderr);
});

t.test("check-config names the key of a bad field spec (a JMESPath syntax error) and exits 2", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "ss-cli-jmes-"));
  writeFileSync(
    join(dir, "iek.json"),
    JSON.stringify({
      baseUrl: "http://127.0.0.1:9/iek",
      fields: { sku: "art", price: "price", stock: { jmespath: "sum(values(residues)" } },
      attributes: { "bad-name": "x" },
    }),
  );
  const r = await runCli(
    t,
    ["check-config"],
    env({ SUPPLIER_SYNC_SUPPLIERS: "iek:1h", SUPPLIER_SYNC_CONNECTORS_DIR: dir }),
  );
  t.equal(r.code, 2, r.stderr);
  const out = r.stdout + r.stderr;
  t.match(out, /iek\.json/);
  t.match(out, /fields\.stock\.jmespath: is not a valid JMESPath expression/);
  t.match(out, /attributes\.bad-name: must match/);
});

t.test("usage errors exit 2 and name the token; --help and --version exit 0", async (t) => {
  const bad = await runCli(t, ["--tick-twice"], env({ SUPPLIER_SYNC_SUPPLIERS: "etm:1h" }));
  t.equal(bad.code, 2);
  t.match(bad.stderr, /--tick-twice/);
  const unknown = await runCli(
    t,
    ["--tick-once", "--supplier", "nope"],
    env({ SUPPLIER_SYNC_SUPPLIERS: "etm:1h" }),
  );
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /nope/);
  const help = await runCli(t, ["--help"], env({}));
  t.equal(help.code, 0);
  t.match(help.stdout, /--tick-once/);
  const version = await runCli(t, ["--version"], env({}));
  t.equal(version.code, 0);
  t.match(version.stdout, /^supplier-sync \d+\.\d+\.\d+/);
});

t.test("an unreachable database exits 3", async (t) => {
  const r = await runCli(
    t,
    ["migrate"],
    env({ SUPPLIER_SYNC_SUPPLIERS: "etm:1h", DATABASE_URL: "postgres://u:secretpw@127.0.0.1:9/x" }),
  );
  t.equal(r.code, 3, r.stderr);
  t.notMatch(r.stderr, /secretpw/, "password never printed");
});

t.test("three migrate processes at once on an empty database all exit 0; schema exists once", async (t) => {
  const url = await createTestDatabase(t, { migrated: false });
  const e = env({ SUPPLIER_SYNC_SUPPLIERS: "etm:1h", DATABASE_URL: url });
  const results = await Promise.all([1, 2, 3].map(() => runCli(t, ["migrate"], e)));
  t.same(
    results.map((r) => r.code),
    [0, 0, 0],
    results.map((r) => r.stderr).join("\n"),
  );
  const pool = testPool(t, url);
  const { rows } = await pool.query("select count(*)::int as n from drizzle.__drizzle_migrations");
  const migrations = readdirSync(new URL("../../drizzle/", import.meta.url)).filter((f) =>
    f.endsWith(".sql"),
  );
  t.equal(rows[0].n, migrations.length, "each migration applied once");
  const tables = await pool.query(
    "select count(*)::int as n from pg_tables where schemaname = 'public' and tablename like any (array['supplier_%', 'ingestion_%'])",
  );
  t.equal(tables.rows[0].n, 13, "the 13 tables of migrations 0000-0008");
});
