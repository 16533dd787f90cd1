#!/usr/bin/env node
/**
 * supplier-sync entry point: parse argv, load config, build the app, handle signals.
 * Nothing else lives here.
 */
import { buildApp } from "../../internal/app/app.js";
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
import { formatRunsTable, withDuration } from "../../internal/store/format-runs.js";
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
  const dbOnly = command.kind === "runs" || command.kind === "migrate";
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
  const logToStderr = command.kind === "runs";
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
      process.stdout.write(
        command.json ? `${JSON.stringify(rows.map(withDuration), null, 2)}\n` : `${formatRunsTable(rows)}\n`,
      );
      return EXIT_OK;
    }
    // --tick-once: a signal stops the ticks at the next page boundary, like the daemon.
    onSignal = installSignals(app.log, () => app.stop());
    const results = await app.tickOnce({ suppliers: selected, force: command.force });
    const ok = results.every(
      (r) => r.outcome === "success" || r.outcome === "lease_busy" || r.outcome === "not_due",
    );
    return ok ? EXIT_OK : EXIT_TICK_FAILED;
  } finally {
    onSignal?.();
    await app.stop();
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
  const { report, ok } = await previewConnector({
    supplier: command.name,
    definition: status.definition,
    module: status.module,
    connectorsDir: config.connectorsDir,
    readSecretEnv: config.readSecretEnv,
    secrets,
    steps: command.steps,
    log,
  });
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
