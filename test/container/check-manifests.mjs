#!/usr/bin/env node
/**
 * Static checks of the deployment files, no container engine needed:
 * - every YAML file (docker-compose.yml, deploy/**) and every ```yaml block of
 *   README.md and docs/*.md parses, with the `yaml` package (strict: duplicate
 *   keys are errors) and, when python3 has PyYAML, with PyYAML too;
 * - the manifests say what the deployment guide promises (probes, resources,
 *   concurrencyPolicy, --tick-once, the three alerts, the compose services);
 * - the connector files shipped for compose and Kubernetes pass the product's own
 *   connector schema (from dist/, so run after `npm run build`);
 * - `docker-compose config -q`, when docker-compose is installed.
 * Prints `ok - …` / `not ok - …`; exits 1 on any failure.
 *
 * Usage: node test/container/check-manifests.mjs
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const root = new URL("../../", import.meta.url).pathname;
let failures = 0;
const check = (ok, what, detail = "") => {
  console.log(`${ok ? "ok" : "not ok"} - ${what}${detail ? ` (${detail})` : ""}`);
  if (!ok) failures++;
  return ok;
};

const { parseAllDocuments } = await import("yaml").catch(() => {
  console.log("not ok - the `yaml` package (a dev dependency through tap) is not installed");
  process.exit(1);
});

/** @type {{ name: string, text: string }[]} */
const sources = [];
const addFile = (rel) => sources.push({ name: rel, text: readFileSync(join(root, rel), "utf8") });
addFile("docker-compose.yml");
for (const dir of ["deploy", "deploy/k8s"]) {
  for (const f of readdirSync(join(root, dir))) if (/\.ya?ml$/.test(f)) addFile(`${dir}/${f}`);
}
const guides = [
  "README.md",
  ...readdirSync(join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`),
];
for (const guide of guides) {
  const text = readFileSync(join(root, guide), "utf8");
  [...text.matchAll(/```yaml\n([\s\S]*?)```/g)].forEach((m, i) => {
    sources.push({ name: `${guide} yaml block ${i + 1}`, text: m[1] ?? "" });
  });
}

// The README is a front door: Kubernetes manifests live in deploy/k8s/, never copied into it.
const readmeYaml = sources.filter((s) => s.name.startsWith("README.md yaml block"));
check(
  readmeYaml.every((s) => !/^\s*(apiVersion|kind):/m.test(s.text)),
  "README.md holds no Kubernetes YAML (deploy/k8s/ is the source)",
  readmeYaml.map((s) => s.name).join(", "),
);

/** @type {Map<string, any[]>} */
const parsed = new Map();
for (const { name, text } of sources) {
  const docs = parseAllDocuments(text, { uniqueKeys: true, merge: true, prettyErrors: true });
  const list = Array.isArray(docs) ? docs : [docs];
  const errors = list.flatMap((d) => d.errors.map((e) => e.message));
  if (check(errors.length === 0, `${name} is valid YAML`, errors.join("; "))) {
    parsed.set(name, list.map((d) => d.toJS()).filter(Boolean));
  }
}
const py = spawnSync("python3", ["-c", "import yaml"], { stdio: "ignore" });
if (py.status === 0) {
  const script = "import sys,yaml\n[list(yaml.safe_load_all(sys.stdin.read()))]";
  for (const { name, text } of sources) {
    const r = spawnSync("python3", ["-c", script], { input: text, encoding: "utf8" });
    check(r.status === 0, `${name} parses with PyYAML`, r.stderr.trim().split("\n").pop());
  }
} else {
  console.log("# python3 with PyYAML not found: checked with the yaml package only");
}

const docsOf = (name) => parsed.get(name) ?? [];
const kind = (name, k) => docsOf(name).find((d) => d.kind === k);

const compose = docsOf("docker-compose.yml")[0] ?? {};
const services = Object.keys(compose.services ?? {});
check(
  ["postgres", "migrate", "simulator", "worker-1", "worker-2", "prometheus"].every((s) =>
    services.includes(s),
  ),
  "compose has postgres, migrate, simulator, two workers and prometheus",
  services.join(","),
);
check(
  compose.services?.["worker-1"]?.depends_on?.migrate?.condition === "service_completed_successfully",
  "compose workers start after a successful migrate",
);

const deployment = kind("deploy/k8s/deployment.yaml", "Deployment");
const container = deployment?.spec?.template?.spec?.containers?.[0];
check(container?.readinessProbe?.httpGet?.path === "/readyz", "Deployment readiness probe is /readyz");
check(container?.livenessProbe?.httpGet?.path === "/livez", "Deployment liveness probe is /livez");
check(
  container?.resources?.requests?.cpu === "100m" && container?.resources?.requests?.memory === "192Mi",
  "Deployment requests 100m CPU / 192Mi",
);
const grace = deployment?.spec?.template?.spec?.terminationGracePeriodSeconds;
check(grace > 25, "Deployment grace period exceeds the 25 s shutdown budget", `${grace}`);
const cron = kind("deploy/k8s/cronjob.yaml", "CronJob");
const cronContainer = cron?.spec?.jobTemplate?.spec?.template?.spec?.containers?.[0];
check(cron?.spec?.concurrencyPolicy === "Forbid", "CronJob concurrencyPolicy is Forbid");
check(
  [...(cronContainer?.command ?? []), ...(cronContainer?.args ?? [])].includes("--tick-once"),
  "CronJob runs --tick-once",
);

const rules = docsOf("deploy/alerts.yml")[0]?.groups?.flatMap((g) => g.rules) ?? [];
const exprs = rules.map((r) => String(r.expr));
check(
  rules.length === 4 &&
    exprs.some((e) => e.includes("max by (supplier) (ingestion_held_items) > 0")) &&
    exprs.some((e) => e.includes("ingestion_last_success_age_seconds")) &&
    exprs.some((e) =>
      /increase\(ingestion_tick_attempt_total\{outcome=~"failed\|partial"\}\[1h\]\)/.test(e),
    ) &&
    exprs.some((e) => e.includes('increase(ingestion_tick_attempt_total{outcome="lease_lost"}[1h])')),
  "alerts: stale supplier, ticks failing, leases lost, data held",
);
const scrape = docsOf("deploy/prometheus.yml")[0];
check(scrape?.rule_files?.includes("/etc/prometheus/alerts.yml"), "prometheus.yml loads the alert rules");

const schemaPath = join(root, "dist/internal/connectors/schema/connector-schema.js");
if (existsSync(schemaPath)) {
  const { connectorDefinitionSchema } = await import(schemaPath);
  const connectors = readdirSync(join(root, "deploy/compose-connectors"))
    .filter((f) => f.endsWith(".json"))
    .map((f) => ({
      name: `deploy/compose-connectors/${f}`,
      value: JSON.parse(readFileSync(join(root, "deploy/compose-connectors", f), "utf8")),
    }));
  const configMap = kind("deploy/k8s/connectors-configmap.yaml", "ConfigMap");
  for (const [key, text] of Object.entries(configMap?.data ?? {})) {
    if (!key.endsWith(".json")) continue;
    connectors.push({ name: `connectors-configmap.yaml ${key}`, value: JSON.parse(String(text)) });
  }

  // One etm connector (issue 34): compose and Kubernetes run the shipped config/suppliers/etm.json,
  // compose pointed at the simulator's etm profile (only baseUrl differs), Kubernetes verbatim.
  const shippedEtm = JSON.parse(readFileSync(join(root, "config/suppliers/etm.json"), "utf8"));
  const composeEtm = connectors.find((c) => c.name === "deploy/compose-connectors/etm.json")?.value;
  check(
    composeEtm !== undefined &&
      composeEtm.baseUrl === "http://simulator:9465/etm" &&
      JSON.stringify({ ...composeEtm, baseUrl: shippedEtm.baseUrl }) === JSON.stringify(shippedEtm),
    "compose's etm.json is config/suppliers/etm.json with the simulator's baseUrl",
  );
  const k8sEtm = configMap?.data?.["etm.json"];
  check(
    k8sEtm !== undefined && JSON.stringify(JSON.parse(String(k8sEtm))) === JSON.stringify(shippedEtm),
    "the ConfigMap's etm.json is config/suppliers/etm.json",
  );
  check(
    typeof configMap?.data?.["etm-skus.txt"] === "string" &&
      existsSync(join(root, "deploy/compose-connectors/etm-skus.txt")),
    "etm's SKU list (etm-skus.txt) is beside etm.json in compose and the ConfigMap",
  );
  const simulatorConfig = JSON.parse(readFileSync(join(root, "deploy/compose-simulator.json"), "utf8"));
  check(
    simulatorConfig.suppliers?.etm?.profile === "etm" &&
      simulatorConfig.suppliers.etm.auth?.credentials?.log ===
        compose.services?.["worker-1"]?.environment?.ETM_LOGIN,
    "compose's simulator serves the etm profile with the workers' ETM_LOGIN",
  );
  const composeText = readFileSync(join(root, "docker-compose.yml"), "utf8");
  check(
    composeText.includes("/etc/supplier-sync/simulator.json") &&
      composeText.includes("deploy/compose-simulator.json"),
    "compose's simulator runs with deploy/compose-simulator.json",
  );
  for (const { name, value } of connectors) {
    const r = connectorDefinitionSchema.safeParse(value);
    check(
      r.success,
      `${name} is a valid connector definition`,
      r.success ? "" : JSON.stringify(r.error.issues),
    );
  }
  check(
    connectors.every(
      (c) => !c.name.startsWith("deploy/compose") || String(c.value.baseUrl).startsWith("http://simulator:"),
    ),
    "compose connectors point at the simulator service",
  );

  // The connector shown in README's tour is the demo's own file, and the reference's first
  // example is a valid definition: documentation that drifts from the schema fails here.
  const jsonBlocks = (rel) =>
    [...readFileSync(join(root, rel), "utf8").matchAll(/```json\n([\s\S]*?)```/g)].map((m) => m[1] ?? "");
  const tour = jsonBlocks("README.md").find((b) => b.includes('"baseUrl"'));
  const demo = JSON.parse(readFileSync(join(root, "config/suppliers/etm.json"), "utf8"));
  check(
    tour !== undefined && JSON.stringify(JSON.parse(tour)) === JSON.stringify(demo),
    "README.md's connector example is config/suppliers/etm.json",
  );
  const first = jsonBlocks("docs/connectors.md")[0];
  const parsedFirst =
    first === undefined ? undefined : connectorDefinitionSchema.safeParse(JSON.parse(first));
  check(
    parsedFirst?.success === true,
    "docs/connectors.md's first example is a valid connector definition",
    parsedFirst && !parsedFirst.success ? JSON.stringify(parsedFirst.error.issues) : "",
  );
  // It says the values it shows for these keys are the defaults: the schema must agree.
  const shown = first === undefined ? {} : JSON.parse(first);
  const defaults = connectorDefinitionSchema.safeParse({ baseUrl: shown.baseUrl, fields: shown.fields });
  const keys = ["rateLimit", "timeouts", "retry", "maxResponseBytes", "maxRejectRatio"];
  const differing = keys.filter(
    (k) => !defaults.success || JSON.stringify(defaults.data[k]) !== JSON.stringify(shown[k]),
  );
  check(
    differing.length === 0,
    "docs/connectors.md's first example shows the schema's defaults",
    differing.join(", "),
  );
} else {
  check(false, "connector definitions checked against the schema", "dist/ missing: run npm run build");
}

const compose1 = spawnSync("docker-compose", ["-f", join(root, "docker-compose.yml"), "config", "-q"], {
  encoding: "utf8",
});
if (compose1.error) console.log("# docker-compose not installed: `config -q` skipped");
else check(compose1.status === 0, "docker-compose config -q", compose1.stderr.trim());

console.log(`# manifests: ${failures === 0 ? "all checks passed" : `${failures} failed`}`);
process.exit(failures === 0 ? 0 : 1);
