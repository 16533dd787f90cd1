// Connector modules of the connectors folder (docs/connector-modules.md): `"module": "./<file>.mjs"`
// loaded by loadConnector (only from inside the folder, symlinks resolved), walked by a
// real tick through the simulator over the supplier's shared transport, in a real PostgreSQL.
import { copyFileSync, mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";
import { baseEnv, runCli } from "../../test/helpers/cli.js";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { forcedTick, tickDeps } from "../../test/helpers/tick.js";
import { loadConfig } from "../config/env.js";
import { ConfigError } from "../platform/errors.js";
import { SecretRegistry } from "../platform/redact.js";
import { startSimulator } from "../simulator/server.js";
import type { Simulator } from "../simulator/types.js";
import type { ConnectorStatus } from "./load.js";
import { loadConnector } from "./load.js";
import { buildConnector, SIM_FIELDS } from "./test-support.js";

const EXAMPLE = fileURLToPath(new URL("../../config/suppliers/example-module.mjs", import.meta.url));
const FAST = {
  rateLimit: { requestsPerSecond: 1000, burst: 1000, maxConcurrency: 1 },
  retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 5, maxRetryAfterMs: 1000 },
};

let sim: Simulator;
t.before(async () => {
  sim = await startSimulator();
});
t.teardown(() => sim.close());

/** A connectors folder holding the example module, `files`, and one `<name>.json` per definition. */
function folder(definitions: Record<string, unknown>, files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "ss-modules-"));
  copyFileSync(EXAMPLE, join(dir, "example-module.mjs"));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, ".."), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  for (const [name, def] of Object.entries(definitions)) {
    writeFileSync(join(dir, `${name}.json`), JSON.stringify(def));
  }
  return dir;
}

function configFor(dir: string, env: Record<string, string> = {}) {
  return loadConfig({ SUPPLIER_SYNC_SUPPLIERS: "acme:1h", SUPPLIER_SYNC_CONNECTORS_DIR: dir, ...env }, "/");
}

function reasonOf(status: ConnectorStatus): string {
  return status.status === "invalid" ? status.reason : `<${status.status}>`;
}

const exampleDefinition = (baseUrl: string, extra: Record<string, unknown> = {}) => ({
  module: "./example-module.mjs",
  baseUrl,
  ...FAST,
  auth: { type: "bearer", tokenEnv: "ACME_TOKEN" },
  request: { query: { limit: "25" } },
  settings: { path: "/v1/offers", pageParam: "page", recordsPath: "data.items", fields: SIM_FIELDS },
  ...extra,
});

t.test("a module of the connectors folder is walked by a real tick over the shared transport", async (t) => {
  const pool = testPool(t, await createTestDatabase(t));
  sim.configure("acme", {
    size: 60,
    pageSize: 25,
    auth: { type: "bearer", token: "acme-secret" },
    faults: { status: { code: 503, onPage: 2, times: 1 } },
  });
  const dir = folder({ acme: exampleDefinition(sim.baseUrl("acme")) });
  const config = configFor(dir, { ACME_TOKEN: "acme-secret" });
  const status = await loadConnector(config, "acme", new SecretRegistry());
  t.equal(status.status, "ok", reasonOf(status));
  if (status.status !== "ok") return;
  t.type(status.module, "function", "the default export is imported");

  const { connector, metrics } = buildConnector(t, status.definition, {
    supplier: "acme",
    connectorsDir: dir,
    readSecretEnv: config.readSecretEnv,
    module: status.module,
  });
  const result = await forcedTick(tickDeps(pool), "acme", connector);
  t.equal(result.outcome, "success");
  t.match(
    result.counts,
    { pages: 3, seen: 60, inserted: 60 },
    "pages of 25, 25 and 10; the empty 4th ends the walk",
  );
  const { rows } = await pool.query<{ n: number; priced: number }>(
    `select count(*)::int as n, count(price)::int as priced
       from supplier_offers where supplier = 'acme' and currency is not null and stock is not null`,
  );
  t.same(rows[0], { n: 60, priced: 60 });
  // The transport's retries and metrics applied: page 2 answered 503 once, then 200.
  const stats = sim.stats("acme");
  t.equal(stats.byStatus[503], 1);
  t.equal(stats.byStatus[200], 4, "the empty page was fetched too");
  const retries = await metrics.httpRetries.get();
  t.equal(retries.values.find((v) => v.labels.reason === "http_503")?.value, 1);
  const requests = await metrics.httpRequests.get();
  t.equal(
    requests.values.filter((v) => v.labels.supplier === "acme").reduce((n, v) => n + v.value, 0),
    5,
  );
  // Credentials came from the transport (a 401 would have failed the run).
  t.equal(stats.byStatus[401], undefined);
});

t.test("settings are passed to the module, which may refuse them", async (t) => {
  const dir = folder({ acme: exampleDefinition(sim.baseUrl("acme"), { settings: { path: "v1" } }) });
  const status = await loadConnector(configFor(dir, { ACME_TOKEN: "x" }), "acme", new SecretRegistry());
  if (status.status !== "ok") throw new Error(reasonOf(status));
  t.throws(
    () => buildConnector(t, status.definition, { connectorsDir: dir, module: status.module }),
    new ConfigError("settings.path: must start with / (module ./example-module.mjs)"),
  );
});

t.test("a module outside the connectors folder is a configuration error naming the key", async (t) => {
  const outside = mkdtempSync(join(tmpdir(), "ss-outside-"));
  writeFileSync(join(outside, "evil.mjs"), "globalThis.evilRan = true; export default () => ({});\n");
  const dir = folder({
    parent: exampleDefinition("http://127.0.0.1:9", { module: "../evil.mjs" }),
    absolute: exampleDefinition("http://127.0.0.1:9", { module: join(outside, "evil.mjs") }),
    dotdot: exampleDefinition("http://127.0.0.1:9", { module: "./sub/../../evil.mjs" }),
    linked: exampleDefinition("http://127.0.0.1:9", { module: "./linked.mjs" }),
    linkeddir: exampleDefinition("http://127.0.0.1:9", { module: "./escape/evil.mjs" }),
    missing: exampleDefinition("http://127.0.0.1:9", { module: "./missing.mjs" }),
    notmjs: exampleDefinition("http://127.0.0.1:9", { module: "./example-module.js" }),
    inside: exampleDefinition("http://127.0.0.1:9", { module: "./inner/../example-module.mjs" }),
    insidelink: exampleDefinition("http://127.0.0.1:9", { module: "./alias.mjs" }),
  });
  mkdirSync(join(dir, "inner"));
  symlinkSync(join(outside, "evil.mjs"), join(dir, "linked.mjs"));
  symlinkSync(outside, join(dir, "escape"));
  symlinkSync(join(dir, "example-module.mjs"), join(dir, "alias.mjs"));
  const config = configFor(dir, { ACME_TOKEN: "x" });
  const expected: Record<string, RegExp> = {
    parent: /^module: must be a registered module name or "\.\/<file>\.mjs"/,
    absolute: /^module: must be a registered module name or "\.\/<file>\.mjs"/,
    dotdot: /^module: "\.\/sub\/\.\.\/\.\.\/evil\.mjs" resolves outside the connectors folder/,
    linked: /^module: "\.\/linked\.mjs" resolves outside the connectors folder/,
    linkeddir: /^module: "\.\/escape\/evil\.mjs" resolves outside the connectors folder/,
    missing: /^module: "\.\/missing\.mjs" does not exist in the connectors folder/,
    notmjs: /^module: must be a registered module name or "\.\/<file>\.mjs"/,
  };
  for (const [name, reason] of Object.entries(expected)) {
    const status = await loadConnector(config, name, new SecretRegistry());
    t.equal(status.status, "invalid", name);
    t.match(reasonOf(status), reason, name);
  }
  t.equal(
    (await loadConnector(config, "inside", new SecretRegistry())).status,
    "ok",
    "a path that stays inside is fine",
  );
  t.equal(
    (await loadConnector(config, "insidelink", new SecretRegistry())).status,
    "ok",
    "so is a symlink that stays inside",
  );
  t.equal((globalThis as { evilRan?: boolean }).evilRan, undefined, "no outside code ever ran");
});

t.test("a module without a default export, or throwing at import, is a clear error", async (t) => {
  const dir = folder(
    {
      nodefault: exampleDefinition("http://127.0.0.1:9", { module: "./nodefault.mjs" }),
      notfunction: exampleDefinition("http://127.0.0.1:9", { module: "./notfunction.mjs" }),
      throws: exampleDefinition("http://127.0.0.1:9", { module: "./throws.mjs" }),
      syntax: exampleDefinition("http://127.0.0.1:9", { module: "./lib/syntax.mjs" }),
      noconnector: exampleDefinition("http://127.0.0.1:9", { module: "./noconnector.mjs" }),
    },
    {
      "nodefault.mjs": "export function create() { return {}; }\n",
      "notfunction.mjs": "export default { walk() {} };\n",
      "throws.mjs": 'throw new Error("supplier API key table missing");\n',
      "lib/syntax.mjs": "export default function ( {\n",
      "noconnector.mjs": "export default () => ({ walk: 1 });\n",
    },
  );
  const config = configFor(dir, { ACME_TOKEN: "x" });
  const expected: Record<string, RegExp> = {
    nodefault: /^module: "\.\/nodefault\.mjs" has no default export function/,
    notfunction: /^module: "\.\/notfunction\.mjs" has no default export function/,
    throws: /^module: "\.\/throws\.mjs" failed to load: supplier API key table missing/,
    syntax: /^module: "\.\/lib\/syntax\.mjs" failed to load: .*(Unexpected|SyntaxError)/,
  };
  for (const [name, reason] of Object.entries(expected)) {
    const status = await loadConnector(config, name, new SecretRegistry());
    t.equal(status.status, "invalid", name);
    t.match(reasonOf(status), reason, name);
  }
  const status = await loadConnector(config, "noconnector", new SecretRegistry());
  if (status.status !== "ok") throw new Error(reasonOf(status));
  t.throws(() => buildConnector(t, status.definition, { module: status.module }), {
    name: "ConfigError",
    message: /^module: "\.\/noconnector\.mjs" returned no connector/,
  });
});

t.test("check-config exits 2 for a module outside the folder and names the key", async (t) => {
  const outside = mkdtempSync(join(tmpdir(), "ss-outside-"));
  writeFileSync(join(outside, "evil.mjs"), "export default () => ({});\n");
  const dir = folder({ acme: exampleDefinition("http://127.0.0.1:9", { module: "./linked.mjs" }) });
  symlinkSync(join(outside, "evil.mjs"), join(dir, "linked.mjs"));
  const env = baseEnv({
    SUPPLIER_SYNC_SUPPLIERS: "acme:1h",
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
    ACME_TOKEN: "x",
  });
  const bad = await runCli(t, ["check-config"], env);
  t.equal(bad.code, 2);
  t.match(bad.stdout, /acme\.json\): module: "\.\/linked\.mjs" resolves outside the connectors folder/);

  writeFileSync(join(dir, "acme.json"), JSON.stringify(exampleDefinition("http://127.0.0.1:9")));
  const good = await runCli(t, ["check-config"], env);
  t.equal(good.code, 0, good.stdout);
  t.match(good.stdout, /acme +every 1h +enabled +connector found/);
});
