#!/usr/bin/env node
/**
 * supplier-sync entry point: parse argv, load config, build the app, handle signals.
 * Nothing else lives here.
 */
import { hostname, userInfo } from "node:os";
import { createInterface } from "node:readline/promises";
import { type App, buildApp } from "../../internal/app/app.js";
import { printChanges } from "../../internal/changes/print.js";
import { formatCheckConfig } from "../../internal/config/check-config.js";
import { loadConnector, loadConnectors } from "../../internal/config/connectors.js";
import { loadConfig, redactDatabaseUrl } from "../../internal/config/env.js";
import type { Config, SupplierConfig } from "../../internal/config/types.js";
import { probeSessionPinning, transactionPoolerMessage } from "../../internal/lease/probe.js";
import { ConfigError, DatabaseError, errorMessage, InfraError } from "../../internal/platform/errors.js";
import { createLogger } from "../../internal/platform/logger.js";
import { SecretRegistry } from "../../internal/platform/redact.js";
import { readVersion } from "../../internal/platform/version.js";
import { formatPreview, previewConnector } from "../../internal/preview/preview.js";
import { createPool } from "../../internal/store/db.js";
import { formatDecision, formatHeldTable } from "../../internal/store/format-held.js";
import { formatRunsTable, withDuration } from "../../internal/store/format-runs.js";
import { previewHolds } from "../../internal/store/guard-preview.js";
import { listRunSteps } from "../../internal/store/run-steps.js";
import { type Command, parseArgs, USAGE } from "./cli.js";

const EXIT_OK = 0;
const EXIT_TICK_FAILED = 1;
const EXIT_CONFIG = 2;
const EXIT_INFRA = 3;

function selectSuppliers(config: Config, names: string[]): SupplierConfig[] {
  if (names.length === 0) return config.suppliers.filter((s) => s.enabled);
  return names.map((name) => {
    const s = config.suppliers.find((c) => c.name === name);
    if (!s) throw new ConfigError(`--supplier "${name}" is not in SUPPLIER_SYNC_SUPPLIERS`);
    if (!s.enabled) throw new ConfigError(`--supplier "${name}" is disabled in SUPPLIER_SYNC_SUPPLIERS`);
    return s;
  });
}

/**
 * The process's redaction registry: created here, handed to every logger, app and
 * report of this command, and used for the last-resort error line in {@link main}.
 */
const secrets = new SecretRegistry();

async function run(command: Command): Promise<number> {
  if (command.kind === "help") {
    process.stdout.write(`${USAGE}\n`);
    return EXIT_OK;
  }
  if (command.kind === "version") {
    process.stdout.write(`supplier-sync ${readVersion()}\n`);
    return EXIT_OK;
  }
  if (command.kind === "preview") return runPreview(command);
  const dbOnly = [
    "runs",
    "migrate",
    "held",
    "approve",
    "dismiss",
    "changes",
    "pause",
    "resume",
    "trigger",
  ].includes(command.kind);
  const config = loadConfig(process.env, process.cwd(), { suppliers: dbOnly ? "ignored" : "required" });
  if (command.kind === "check-config") {
    const statuses = await loadConnectors(
      config,
      config.suppliers.map((s) => s.name),
      secrets,
    );
    const { text, ok } = formatCheckConfig(config, statuses, secrets);
    process.stdout.write(`${text}\n`);
    if (config.databaseUrl && config.lease === "advisory") await checkSessionPinning(config.databaseUrl);
    return ok ? EXIT_OK : EXIT_CONFIG;
  }
  const selected = command.kind === "tick-once" ? selectSuppliers(config, command.suppliers) : [];
  // Human-readable logs on a terminal, JSON everywhere else and always in production (docs/operations.md, Health server).
  // `runs` prints its table or JSON on stdout, so its own log lines go to stderr.
  const logToStderr = [
    "runs",
    "held",
    "approve",
    "dismiss",
    "changes",
    "pause",
    "resume",
    "trigger",
  ].includes(command.kind);
  const pretty = !config.production && (logToStderr ? process.stderr : process.stdout).isTTY === true;
  const app = buildApp(config, {
    secrets,
    log: createLogger({ level: config.logLevel, secrets, pretty, stderr: logToStderr }),
  });
  if (command.kind === "daemon") return runDaemon(app);

  let onSignal: (() => void) | undefined;
  try {
    if (command.kind === "migrate") {
      await app.open();
      app.log.info("migrations applied");
      return EXIT_OK;
    }
    if (command.kind === "runs") {
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
    if (command.kind === "changes") return await printChanges(await app.open(), command);
    if (command.kind === "held") {
      const items = await app.listHeld({ supplier: command.supplier, all: command.all });
      process.stdout.write(
        command.json ? `${JSON.stringify(items, null, 2)}\n` : formatHeldTable(items, command.all),
      );
      return EXIT_OK;
    }
    if (command.kind === "approve" || command.kind === "dismiss") {
      if (command.kind === "approve" && !command.yes && !(await confirmApproval(app, command))) {
        process.stdout.write("nothing applied\n");
        return EXIT_TICK_FAILED;
      }
      const decision = await app.decideHeld({
        runId: command.runId,
        skus: command.skus,
        decision: command.kind,
        by: `cli:${userInfo().username}@${hostname()}`,
      });
      process.stdout.write(formatDecision(decision, command.kind));
      return EXIT_OK;
    }
    if (command.kind === "pause" || command.kind === "resume" || command.kind === "trigger") {
      process.stdout.write(await runControl(app, command));
      return EXIT_OK;
    }
    // --tick-once: a signal stops the ticks at the next page boundary, like the daemon.
    onSignal = installSignals(app.log, () => app.stop());
    const results = await app.tickOnce({ suppliers: selected, force: command.force });
    const ok = results.every(
      (r) =>
        r.outcome === "success" ||
        r.outcome === "lease_busy" ||
        r.outcome === "not_due" ||
        r.outcome === "paused",
    );
    return ok ? EXIT_OK : EXIT_TICK_FAILED;
  } finally {
    onSignal?.();
    await app.stop();
  }
}

/**
 * `approve` without `--yes`: on a terminal, shows what would be applied and asks; elsewhere
 * refuses (exit 2), so a script never changes the catalog without saying so.
 */
async function confirmApproval(
  app: ReturnType<typeof buildApp>,
  command: Extract<Command, { kind: "approve" }>,
): Promise<boolean> {
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

/** `preview`: no database, no lease; logs go to stderr so stdout is the report alone. */
async function runPreview(command: Extract<Command, { kind: "preview" }>): Promise<number> {
  const config = loadConfig(process.env, process.cwd(), { suppliers: "optional" });
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

/**
 * check-config's database check, for the advisory lease: behind a transaction pooler
 * it throws (exit 3, like every other command); an unreachable database is reported
 * and does not change the verdict on the configuration.
 */
async function checkSessionPinning(url: string): Promise<void> {
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

async function runDaemon(app: ReturnType<typeof buildApp>): Promise<number> {
  let resolveStopped: () => void = () => {};
  const stopped = new Promise<void>((r) => {
    resolveStopped = r;
  });
  installSignals(app.log, async () => {
    await app.stop();
    resolveStopped();
  });
  try {
    await app.start();
  } catch (err) {
    await app.stop().catch(() => {});
    throw err;
  }
  await stopped;
  return EXIT_OK;
}

/** First SIGTERM/SIGINT: graceful stop. A second one: exit at once (128 + signal). */
function installSignals(
  log: ReturnType<typeof buildApp>["log"],
  stop: () => Promise<void> | void,
): () => void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, "second signal: exiting at once");
      process.exit(signal === "SIGINT" ? 130 : 143);
    }
    stopping = true;
    log.info({ signal }, "shutting down");
    Promise.resolve(stop()).catch((err) => log.error({ err: errorMessage(err) }, "shutdown failed"));
  };
  process.on("SIGTERM", handler);
  process.on("SIGINT", handler);
  return () => {
    process.off("SIGTERM", handler);
    process.off("SIGINT", handler);
  };
}

function exitCodeOf(err: unknown): number {
  if (err instanceof ConfigError) return EXIT_CONFIG;
  if (err instanceof InfraError) return EXIT_INFRA;
  // Classified where it was born (internal/store/database-error.ts).
  if (err instanceof DatabaseError && err.kind === "unavailable") return EXIT_INFRA;
  return EXIT_TICK_FAILED;
}

async function main(): Promise<void> {
  let code: number;
  try {
    code = await run(parseArgs(process.argv.slice(2)));
  } catch (err) {
    code = exitCodeOf(err);
    const kind =
      code === EXIT_CONFIG
        ? "configuration error"
        : code === EXIT_INFRA
          ? "infrastructure unavailable"
          : "error";
    process.stderr.write(`supplier-sync: ${kind}: ${secrets.safeText(errorMessage(err))}\n`);
  }
  process.exit(code);
}

await main();

/** `pause`, `resume`, `trigger` (docs/operations.md, Pausing and triggering): what was done, one line. */
async function runControl(
  app: App,
  command: Extract<Command, { kind: "pause" | "resume" | "trigger" }>,
): Promise<string> {
  const by = `cli:${userInfo().username}@${hostname()}`;
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
