#!/usr/bin/env node
/**
 * supplier-sync entry point: parse argv, load config, build the app, handle signals.
 * Nothing else lives here.
 */
import { type App, buildApp } from "../../internal/app/app.js";
import {
  changesCommand,
  checkConfigCommand,
  controlCommand,
  decideCommand,
  EXIT_CONFIG,
  EXIT_INFRA,
  EXIT_OK,
  EXIT_TICK_FAILED,
  heldCommand,
  previewCommand,
  runsCommand,
  selectSuppliers,
} from "../../internal/app/commands.js";
import { loadConfig } from "../../internal/config/env.js";
import { ConfigError, DatabaseError, errorMessage, InfraError } from "../../internal/platform/errors.js";
import { createLogger } from "../../internal/platform/logger.js";
import { SecretRegistry } from "../../internal/platform/redact.js";
import { readVersion } from "../../internal/platform/version.js";
import { type Command, parseArgs, USAGE } from "./cli.js";

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
  if (command.kind === "preview") {
    return previewCommand(
      loadConfig(process.env, process.cwd(), { suppliers: "optional" }),
      command,
      secrets,
    );
  }
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
  if (command.kind === "check-config") return checkConfigCommand(config, secrets);
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
    if (command.kind === "runs") return await runsCommand(app, command);
    if (command.kind === "changes") return await changesCommand(app, command);
    if (command.kind === "held") return await heldCommand(app, command);
    if (command.kind === "approve" || command.kind === "dismiss") return await decideCommand(app, command);
    if (command.kind === "pause" || command.kind === "resume" || command.kind === "trigger") {
      return await controlCommand(app, command);
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

async function runDaemon(app: App): Promise<number> {
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
function installSignals(log: App["log"], stop: () => Promise<void> | void): () => void {
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
