import { hostname, userInfo } from "node:os";
import { createInterface } from "node:readline/promises";
import { printChanges } from "../changes/print.js";
import { redactDatabaseUrl } from "../config/env.js";
import type { Config, SupplierConfig } from "../config/types.js";
import { loadConnector, loadConnectors } from "../connectors/load.js";
import { probeSessionPinning, transactionPoolerMessage } from "../lease/probe.js";
import { ConfigError, errorMessage, InfraError } from "../platform/errors.js";
import { createLogger } from "../platform/logger.js";
import type { SecretRegistry } from "../platform/redact.js";
import { formatPreview, previewConnector } from "../preview/preview.js";
import { createPool } from "../store/db.js";
import { formatDecision, formatHeldTable } from "../store/format-held.js";
import { formatRunsTable, withDuration } from "../store/format-runs.js";
import { previewHolds } from "../store/guard-preview.js";
import { listRunSteps } from "../store/run-steps.js";
import type { App } from "./app.js";
import { formatCheckConfig } from "./check-config.js";

/**
 * The commands of the CLI (README.md, Command line), each given what it needs and
 * printing on stdout; `cmd/supplier-sync/main.ts` parses the command line, builds the
 * app, calls one of these, and exits with the code it returns.
 */

/** A parsed command line (README.md, Command line). */
export type Command =
  | { kind: "daemon" }
  | { kind: "tick-once"; suppliers: string[]; force: boolean }
  | { kind: "migrate" }
  | { kind: "check-config" }
  | { kind: "runs"; supplier: string | undefined; limit: number; json: boolean }
  | { kind: "preview"; name: string; steps: number; json: boolean }
  | { kind: "held"; supplier: string | undefined; all: boolean; json: boolean }
  | { kind: "approve"; runId: number; skus: string[]; yes: boolean }
  | { kind: "dismiss"; runId: number; skus: string[]; yes: boolean }
  | { kind: "changes"; since: string; supplier: string | undefined; limit: number; json: boolean }
  | { kind: "pause"; supplier: string; reason: string | undefined }
  | { kind: "resume"; supplier: string }
  | { kind: "trigger"; supplier: string }
  | { kind: "help" }
  | { kind: "version" };

export const EXIT_OK = 0;
export const EXIT_TICK_FAILED = 1;
export const EXIT_CONFIG = 2;
export const EXIT_INFRA = 3;

/** Who decided, as recorded on held items and controls: the OS user and host. */
function cliActor(): string {
  return `cli:${userInfo().username}@${hostname()}`;
}

/** `--tick-once [--supplier NAME]...`: the enabled suppliers, or those named (each must be enabled). */
export function selectSuppliers(config: Config, names: string[]): SupplierConfig[] {
  if (names.length === 0) return config.suppliers.filter((s) => s.enabled);
  return names.map((name) => {
    const s = config.suppliers.find((c) => c.name === name);
    if (!s) throw new ConfigError(`--supplier "${name}" is not in SUPPLIER_SYNC_SUPPLIERS`);
    if (!s.enabled) throw new ConfigError(`--supplier "${name}" is disabled in SUPPLIER_SYNC_SUPPLIERS`);
    return s;
  });
}

/** `check-config`: every supplier's connector, and with the advisory lease the database's session pinning. */
export async function checkConfigCommand(config: Config, secrets: SecretRegistry): Promise<number> {
  const statuses = await loadConnectors(
    config,
    config.suppliers.map((s) => s.name),
    secrets,
  );
  const { text, ok } = formatCheckConfig(config, statuses, secrets);
  process.stdout.write(`${text}\n`);
  if (config.databaseUrl && config.lease === "advisory")
    await checkSessionPinning(config.databaseUrl, secrets);
  return ok ? EXIT_OK : EXIT_CONFIG;
}

/**
 * check-config's database check, for the advisory lease: behind a transaction pooler
 * it throws (exit 3, like every other command); an unreachable database is reported
 * and does not change the verdict on the configuration.
 */
async function checkSessionPinning(url: string, secrets: SecretRegistry): Promise<void> {
  const pool = createPool({ url, max: 2 });
  try {
    const probe = await probeSessionPinning(pool);
    if (!probe.pinned) throw new InfraError(transactionPoolerMessage(probe.evidence));
    process.stdout.write("database: reachable, one session per connection (the advisory lease is safe)\n");
  } catch (err) {
    if (err instanceof InfraError) throw err;
    process.stdout.write(
      `database: not checked, unreachable (${secrets.safeText(redactDatabaseUrl(errorMessage(err)))})\n`,
    );
  } finally {
    await pool.end().catch(() => {});
  }
}

/** `preview`: no database needed, no lease; logs go to stderr so stdout is the report alone. */
export async function previewCommand(
  config: Config,
  command: Extract<Command, { kind: "preview" }>,
  secrets: SecretRegistry,
): Promise<number> {
  const status = await loadConnector(config, command.name, secrets);
  if (status.status === "missing") {
    throw new ConfigError(`no connector definition for "${command.name}" at ${status.path}`);
  }
  if (status.status === "invalid") throw new ConfigError(`${status.path}: ${status.reason}`);
  const log = createLogger({ level: config.logLevel, secrets, stderr: true });
  const guards = status.definition.guards;
  // With a database, preview also says what the guards would hold (read only).
  const pool =
    config.databaseUrl && guards !== false ? createPool({ url: config.databaseUrl, max: 2 }) : undefined;
  const { report, ok } = await previewConnector({
    supplier: command.name,
    definition: status.definition,
    module: status.module,
    connectorsDir: config.connectorsDir,
    readSecretEnv: config.readSecretEnv,
    secrets,
    steps: command.steps,
    log,
    timeZone: config.suppliers.find((s) => s.name === command.name)?.cron?.zone,
    checkGuards:
      pool && guards !== false
        ? (steps, complete) => previewHolds(pool, { supplier: command.name, guards, steps, complete })
        : undefined,
  }).finally(() => pool?.end().catch(() => {}));
  process.stdout.write(`${formatPreview(report, command.json, secrets)}\n`);
  return ok ? EXIT_OK : EXIT_TICK_FAILED;
}

/** `runs`: the table, or with `--json` each run with its steps. */
export async function runsCommand(app: App, command: Extract<Command, { kind: "runs" }>): Promise<number> {
  const rows = await app.listRuns({ supplier: command.supplier, limit: command.limit });
  if (command.json) {
    // Each run with its steps: when each began (its first request), committed, and how long it took.
    const steps = await listRunSteps(
      await app.open(),
      rows.map((r) => r.id),
    );
    const runs = rows.map((r) => ({ ...withDuration(r), steps: steps.get(r.id) ?? [] }));
    process.stdout.write(`${JSON.stringify(runs, null, 2)}\n`);
  } else process.stdout.write(`${formatRunsTable(rows)}\n`);
  return EXIT_OK;
}

/** `changes` (docs/changes.md). */
export async function changesCommand(
  app: App,
  command: Extract<Command, { kind: "changes" }>,
): Promise<number> {
  return printChanges(await app.open(), command);
}

/** `held`: the held items, pending ones unless `--all`. */
export async function heldCommand(app: App, command: Extract<Command, { kind: "held" }>): Promise<number> {
  const items = await app.listHeld({ supplier: command.supplier, all: command.all });
  process.stdout.write(
    command.json ? `${JSON.stringify(items, null, 2)}\n` : formatHeldTable(items, command.all),
  );
  return EXIT_OK;
}

/** `approve` / `dismiss RUN_ID [--sku …]`. */
export async function decideCommand(
  app: App,
  command: Extract<Command, { kind: "approve" | "dismiss" }>,
): Promise<number> {
  if (command.kind === "approve" && !command.yes && !(await confirmApproval(app, command))) {
    process.stdout.write("nothing applied\n");
    return EXIT_TICK_FAILED;
  }
  const decision = await app.decideHeld({
    runId: command.runId,
    skus: command.skus,
    decision: command.kind,
    by: cliActor(),
  });
  process.stdout.write(formatDecision(decision, command.kind));
  return EXIT_OK;
}

/**
 * `approve` without `--yes`: on a terminal, shows what would be applied and asks; elsewhere
 * refuses (exit 2), so a script never changes the catalog without saying so.
 */
async function confirmApproval(app: App, command: Extract<Command, { kind: "approve" }>): Promise<boolean> {
  if (!process.stdin.isTTY) {
    throw new ConfigError("approve changes the catalog: confirm with --yes (stdin is not a terminal)");
  }
  const wanted = new Set(command.skus);
  const items = (await app.listHeld({ supplier: undefined, all: false, runId: command.runId })).filter(
    (i) => wanted.size === 0 || (i.sku !== null && wanted.has(i.sku)),
  );
  if (items.length === 0) return true;
  process.stdout.write(formatHeldTable(items, false));
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    const answer = await rl.question(
      `Apply ${items.length} held item${items.length === 1 ? "" : "s"}? [y/N] `,
    );
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}

/** `pause`, `resume`, `trigger` (docs/operations.md, Pausing and triggering): what was done, one line. */
export async function controlCommand(
  app: App,
  command: Extract<Command, { kind: "pause" | "resume" | "trigger" }>,
): Promise<number> {
  process.stdout.write(await control(app, command));
  return EXIT_OK;
}

async function control(
  app: App,
  command: Extract<Command, { kind: "pause" | "resume" | "trigger" }>,
): Promise<string> {
  const by = cliActor();
  const { supplier } = command;
  if (command.kind === "pause") {
    const p = await app.pause({ supplier, by, reason: command.reason ?? null });
    const since = p.pausedAt.toISOString();
    return p.already
      ? `${supplier} was already paused (since ${since}); reason now: ${p.reason ?? "none"}\n`
      : `paused ${supplier} at ${since}${p.reason ? ` (${p.reason})` : ""}: every replica stops its walks at the next step boundary\n`;
  }
  if (command.kind === "resume") {
    const p = await app.resume({ supplier });
    return p
      ? `resumed ${supplier} (paused since ${p.pausedAt.toISOString()} by ${p.pausedBy})\n`
      : `${supplier} was not paused: nothing to resume\n`;
  }
  const r = await app.trigger({ supplier, by });
  return r.paused
    ? `trigger request ${r.id} for ${supplier} recorded; ${supplier} is paused: it waits for resume\n`
    : `trigger request ${r.id} for ${supplier} recorded at ${r.requestedAt.toISOString()}: a running daemon walks it within seconds\n`;
}
