/**
 * The composition root: builds every part from one Config and wires them. Only this
 * module imports across the layers. `start()`/`stop()` tolerate never-started and
 * double-stop.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type pg from "pg";
import { loadConnectors } from "../config/connectors.js";
import type { Config, SupplierConfig } from "../config/types.js";
import { createConnector } from "../connectors/index.js";
import type { Connector, RunOwner, RunTrigger } from "../ingestion/ports.js";
import { type LoadedConnector, runTick, type TickResult } from "../ingestion/tick.js";
import { acquireLease } from "../lease/lease.js";
import { assertSessionPinning } from "../lease/probe.js";
import { tryTableLease } from "../lease/table-lease.js";
import { createMetrics, type Metrics } from "../observability/metrics.js";
import { type Clock, OffsetClock, systemClock } from "../platform/clock.js";
import { ConfigError, errorMessage, InfraError, IngestionError } from "../platform/errors.js";
import { createLogger, type Logger } from "../platform/logger.js";
import { SecretRegistry } from "../platform/redact.js";
import { readVersion } from "../platform/version.js";
import { DatabaseClock } from "../scheduler/database-clock.js";
import { Scheduler } from "../scheduler/scheduler.js";
import { cronerTimer, type OneShotTimer } from "../scheduler/timer.js";
import { createHealthServer, type HealthServer } from "../server/server.js";
import { createPool } from "../store/db.js";
import { databaseClockTimestamp } from "../store/db-clock.js";
import { runMigrations } from "../store/migrate.js";
import { lastSuccesses, listRuns } from "../store/run-queries.js";
import { runSessions } from "../store/run-session.js";
import type { RunRow } from "../store/runs.js";
import { type EmbeddedDatabase, startEmbeddedDatabase } from "./embedded-db.js";

/** Lifecycle of the app, in order. */
export type AppState = "NEW" | "STARTING" | "RUNNING" | "STOPPING" | "STOPPED";

export interface AppOverrides {
  /** The host clock (durations, deadlines); the scheduler runs on it plus its offset to the database. */
  clock?: Clock;
  timer?: OneShotTimer;
  /**
   * The process's redaction registry: connectors register the secrets they resolve,
   * the logger and the console scrub them. Pass the one `log` was created with.
   */
  secrets?: SecretRegistry;
  /** A logger created with `secrets` (it scrubs what they register). */
  log?: Logger;
  metrics?: Metrics;
  /** Where the embedded dev database keeps its data (`.data`). */
  dataRoot?: string;
}

export interface App {
  readonly state: AppState;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly secrets: SecretRegistry;
  readonly health: HealthServer | undefined;
  /** Opens the database and migrates; the one-shot commands stop here. */
  open(): Promise<pg.Pool>;
  /** The latest runs, newest first (`supplier-sync runs`); opens the database like `open()`. */
  listRuns(filter: { supplier?: string | undefined; limit: number }): Promise<RunRow[]>;
  /** Runs the daemon: health server first, then the tickers. */
  start(): Promise<void>;
  /** One tick per selected supplier, concurrently (`--tick-once`). */
  tickOnce(options: { suppliers: SupplierConfig[]; force: boolean }): Promise<TickResult[]>;
  /** Graceful shutdown within `config.shutdownTimeoutMs`. */
  stop(): Promise<void>;
}

export function buildApp(config: Config, overrides: AppOverrides = {}): App {
  const hostClock = overrides.clock ?? systemClock;
  const clock = config.testClockSkewMs ? new OffsetClock(hostClock, config.testClockSkewMs) : hostClock;
  if (overrides.log && !overrides.secrets) {
    throw new Error(
      "buildApp: a log override needs the SecretRegistry it was created with (overrides.secrets)",
    );
  }
  const secrets = overrides.secrets ?? new SecretRegistry();
  const log = overrides.log ?? createLogger({ level: config.logLevel, secrets });
  const metrics = overrides.metrics ?? createMetrics();
  const owner: RunOwner = { hostname: hostname(), pid: process.pid, bootId: randomUUID() };
  const enabled = config.suppliers.filter((s) => s.enabled);
  for (const s of enabled) metrics.initSupplier(s.name);

  let state: AppState = "NEW";
  let pool: pg.Pool | undefined;
  let embedded: EmbeddedDatabase | undefined;
  let health: HealthServer | undefined;
  let scheduler: Scheduler | undefined;
  let dbClock: DatabaseClock | undefined;
  let opening: Promise<pg.Pool> | undefined;
  let stopping: Promise<void> | undefined;
  const connectors = new Map<string, LoadedConnector>();
  const inFlight = new Set<Promise<TickResult>>();
  const stopSoft = new AbortController();
  const stopHard = new AbortController();

  async function buildConnectors(): Promise<void> {
    const statuses = await loadConnectors(
      config,
      enabled.map((s) => s.name),
      secrets,
    );
    for (const s of enabled) {
      const status = statuses.get(s.name);
      if (!status || status.status === "missing") {
        connectors.set(s.name, { kind: "missing", reason: `no connector definition at ${status?.path}` });
        log.warn({ supplier: s.name, path: status?.path }, "connector definition missing");
        continue;
      }
      if (status.status === "invalid") {
        connectors.set(s.name, { kind: "invalid", reason: `${status.path}: ${status.reason}` });
        log.warn({ supplier: s.name, reason: status.reason }, "connector definition invalid");
        continue;
      }
      try {
        const connector: Connector = createConnector({
          supplier: s.name,
          definition: status.definition,
          connectorsDir: config.connectorsDir,
          readSecretEnv: config.readSecretEnv,
          secrets,
          log: log.child({ supplier: s.name }),
          metrics,
          clock,
          ...(pool ? { database: pool } : {}),
          module: status.module,
        });
        connectors.set(s.name, {
          kind: "ok",
          connector,
          maxRejectRatio: status.definition.maxRejectRatio,
          runMs: status.definition.timeouts.runMs,
        });
      } catch (err) {
        connectors.set(s.name, { kind: "invalid", reason: errorMessage(err) });
        log.warn({ supplier: s.name, err: errorMessage(err) }, "connector could not be built");
      }
    }
  }

  async function open(): Promise<pg.Pool> {
    if (pool) return pool;
    if (!opening) {
      opening = (async () => {
        let url = config.databaseUrl;
        if (!url) {
          if (config.production) throw new ConfigError("DATABASE_URL is required when NODE_ENV=production");
          embedded = await startEmbeddedDatabase(overrides.dataRoot ?? ".data", log);
          url = embedded.url;
        }
        const p = createPool({ url, max: config.dbPoolMax, log });
        try {
          // The advisory lease refuses to run behind a transaction pooler (exit 3).
          if (config.lease === "advisory") await assertSessionPinning(p);
          await runMigrations(p);
        } catch (err) {
          await p.end().catch(() => {});
          throw err instanceof InfraError ? err : new InfraError(errorMessage(err), { cause: err });
        }
        pool = p;
        return p;
      })();
    }
    return opening;
  }

  function tick(supplier: SupplierConfig, trigger: RunTrigger, force: boolean): Promise<TickResult> {
    if (!pool) throw new Error("tick before open()");
    const db = pool;
    const running = runTick(
      {
        sessions: runSessions(
          db,
          (name) =>
            config.lease === "table"
              ? tryTableLease(db, name, { ttlMs: config.leaseTtlMs, owner, clock, log })
              : acquireLease(db, name, log),
          { clock },
        ),
        log,
        metrics,
        clock,
        owner,
      },
      {
        supplier,
        trigger,
        force,
        connector: connectors.get(supplier.name) ?? { kind: "missing", reason: "not loaded" },
        stopSignal: stopSoft.signal,
        abortSignal: stopHard.signal,
      },
    );
    inFlight.add(running);
    running.finally(() => inFlight.delete(running)).catch(() => {});
    return running;
  }

  return {
    get state() {
      return state;
    },
    log,
    metrics,
    secrets,
    get health() {
      return health;
    },
    open,
    async listRuns({ supplier, limit }) {
      const db = await open();
      return listRuns(db, supplier === undefined ? { limit } : { supplier, limit });
    },
    async start() {
      if (state !== "NEW") return;
      state = "STARTING";
      const db = await open();
      await buildConnectors();
      // Fire times and freshness ages follow the database's clock (docs/architecture.md, Scheduler).
      const schedulerClock = new DatabaseClock({
        host: clock,
        readDatabaseMs: () => databaseClockTimestamp(db),
        log,
      });
      dbClock = schedulerClock;
      await schedulerClock.start();
      health = createHealthServer({
        host: config.httpAddr.host,
        port: config.httpAddr.port,
        db,
        suppliers: enabled,
        metrics,
        log,
        secrets,
        clock: schedulerClock,
        instance: { owner, version: readVersion() },
        // The cache must stay well inside the shortest staleness threshold (2 x interval).
        freshnessCacheMs: Math.min(5_000, Math.floor(Math.min(...enabled.map((s) => s.intervalMs)) / 2)),
      });
      const addr = await health.start();
      log.info({ addr: `${addr.host}:${addr.port}` }, "health and metrics server listening");
      scheduler = new Scheduler({
        suppliers: enabled,
        maxConcurrentTicks: config.maxConcurrentTicks,
        retryBackoffMs: config.retryBackoffMs,
        clock: schedulerClock,
        timer: overrides.timer ?? cronerTimer(schedulerClock, hostClock),
        log,
        metrics,
        tick: (s, trigger) => tick(s, trigger, false),
        lastSuccesses: () =>
          lastSuccesses(
            db,
            enabled.map((s) => s.name),
          ),
        resyncClock: () => schedulerClock.resync(),
      });
      await scheduler.start();
      state = "RUNNING";
    },
    async tickOnce({ suppliers, force }) {
      await open();
      await buildConnectors();
      const results: TickResult[] = [];
      const queue = [...suppliers];
      const workers = Array.from({ length: Math.min(config.maxConcurrentTicks, queue.length) }, async () => {
        for (let s = queue.shift(); s; s = queue.shift()) results.push(await tick(s, "tick_once", force));
      });
      await Promise.all(workers);
      return results;
    },
    stop() {
      stopping ??= shutdown();
      return stopping;
    },
  };

  async function shutdown(): Promise<void> {
    state = "STOPPING";
    const started = clock.now();
    // Soft first: in-flight ticks finish their page and close their runs SHUTDOWN.
    stopSoft.abort();
    const budget = Math.max(1_000, config.shutdownTimeoutMs - 2_000);
    const budgetOver = new AbortController();
    clock.sleep(budget, budgetOver.signal).then(
      () => {
        log.warn({ budget_ms: budget }, "shutdown budget exhausted: aborting in-flight requests");
        stopHard.abort(
          new IngestionError("SHUTDOWN", "shutdown budget exhausted: in-flight requests aborted"),
        );
      },
      () => {},
    );
    try {
      await scheduler?.stop();
      await dbClock?.stop();
      while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
    } finally {
      budgetOver.abort();
    }
    for (const loaded of connectors.values()) if (loaded.kind === "ok") await loaded.connector.close();
    await health?.stop();
    await pool?.end().catch(() => {});
    await embedded?.stop();
    state = "STOPPED";
    log.info({ duration_ms: clock.now() - started }, "stopped");
  }
}
