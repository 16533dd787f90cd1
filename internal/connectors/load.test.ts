import { join } from "node:path";
import t from "tap";
import { loadConfig } from "../config/env.js";
import { SecretRegistry } from "../platform/redact.js";
import type { ConnectorStatus } from "./load.js";
import { loadConnector, loadConnectors } from "./load.js";

const base = {
  baseUrl: "https://api.supplier.example",
  fields: { sku: "article", price: "price.value" },
};

function file(extra: Record<string, unknown>): string {
  return JSON.stringify({ ...base, ...extra });
}

const fixtures = {
  "plain.json": file({}),
  "bearer-env.json": file({ auth: { type: "bearer", tokenEnv: "BEARER_TOKEN" } }),
  "bearer-unset.json": file({ auth: { type: "bearer", tokenEnv: "NOT_SET_TOKEN" } }),
  "bearer-file.json": file({ auth: { type: "bearer", tokenFile: "secrets/token" } }),
  "header-env.json": file({ auth: { type: "header", name: "X-Api-Key", valueEnv: "HEADER_VALUE" } }),
  "basic-file.json": file({
    auth: { type: "basic", usernameFile: "secrets/user", passwordEnv: "BASIC_PASSWORD" },
  }),
  "both-forms.json": file({ auth: { type: "bearer", tokenEnv: "BEARER_TOKEN", tokenFile: "secrets/token" } }),
  "unknown-key.json": file({ bogus: 1 }),
  "nested-unknown.json": file({ rateLimit: { requestsPerSecond: 5, burts: 5 } }),
  "bad-values.json": file({ baseUrl: "ftp://x", auth: { type: "bearer", tokenEnv: "not a name" } }),
  "broken.json": '{ "baseUrl": "https://x", ',
  "folder.json": {},
  secrets: { token: "file-token-77\n", user: "file-user\n" },
};

function setup(t: Tap) {
  const dir = t.testdir(fixtures);
  const config = loadConfig(
    {
      SUPPLIER_SYNC_SUPPLIERS: "plain:1h",
      SUPPLIER_SYNC_CONNECTORS_DIR: dir,
      BEARER_TOKEN: "env-token-42",
      HEADER_VALUE: "header-value-43",
      BASIC_PASSWORD: "basic-password-44",
    },
    "/",
  );
  return { dir, config };
}
type Tap = { testdir(fixture: unknown): string };

function reasonOf(status: ConnectorStatus | undefined): string {
  return status?.status === "invalid" ? status.reason : `<${status?.status}>`;
}

t.test("valid definitions with every auth type load with defaults applied", async (t) => {
  const { dir, config } = setup(t);
  for (const name of ["plain", "bearer-env", "bearer-file", "header-env", "basic-file"]) {
    const status = await loadConnector(config, name, new SecretRegistry());
    t.equal(status.status, "ok", `${name}: ${reasonOf(status)}`);
    t.equal(status.path, join(dir, `${name}.json`));
  }
  const plain = await loadConnector(config, "plain", new SecretRegistry());
  if (plain.status !== "ok") throw new Error("plain did not load");
  t.same(plain.definition.rateLimit, { requestsPerSecond: 5, burst: 5, maxConcurrency: 2 });
  t.same(plain.definition.auth, { type: "none" });
  t.equal(plain.definition.maxRejectRatio, 0.5);
});

t.test("each broken file is its own supplier's problem", async (t) => {
  const { dir, config } = setup(t);
  const names = [
    "plain",
    "absent",
    "broken",
    "unknown-key",
    "nested-unknown",
    "bad-values",
    "bearer-unset",
    "both-forms",
    "folder",
    "bearer-env",
  ];
  const statuses = await loadConnectors(config, names, new SecretRegistry());
  t.same([...statuses.keys()], names, "one status per supplier, in order");
  t.equal(statuses.get("plain")?.status, "ok");
  t.equal(statuses.get("bearer-env")?.status, "ok", "a good file after bad ones still loads");
  t.same(statuses.get("absent"), { status: "missing", path: join(dir, "absent.json") });
  t.match(reasonOf(statuses.get("broken")), /^invalid JSON at line 1, column 27 \(PropertyNameExpected\): `/);
  t.equal(reasonOf(statuses.get("unknown-key")), 'Unrecognized key: "bogus"');
  t.equal(reasonOf(statuses.get("nested-unknown")), 'rateLimit: Unrecognized key: "burts"');
  const bad = reasonOf(statuses.get("bad-values"));
  t.match(bad, /baseUrl: must be an http\(s\) URL/);
  t.match(bad, /auth\.tokenEnv: must be an environment variable name/);
  t.match(bad, /; /, "issues are listed one after the other");
  t.match(reasonOf(statuses.get("bearer-unset")), /auth\.tokenEnv.*NOT_SET_TOKEN.*unset/);
  t.match(
    reasonOf(statuses.get("both-forms")),
    /auth\.tokenFile: set either tokenEnv or tokenFile, not both/,
  );
  t.match(reasonOf(statuses.get("folder")), /cannot be read/);
  for (const [name, status] of statuses) {
    const text = JSON.stringify(status);
    for (const secret of ["env-token-42", "file-token-77", "header-value-43", "basic-password-44"]) {
      t.notOk(text.includes(secret), `${name}: no ${secret}`);
    }
  }
});

t.test("a name that is not a supplier name never reaches the file system", async (t) => {
  const { config } = setup(t);
  const status = await loadConnector(config, "../plain", new SecretRegistry());
  t.equal(status.status, "invalid");
  t.match(reasonOf(status), /not valid/);
});
