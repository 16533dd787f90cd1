/**
 * The composition root: builds every part from one Config and wires them. Only this
 * module imports across the layers. `start()`/`stop()` tolerate never-started and
 * double-stop.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type pg from "pg";
import { SUPPLIER_NAME } from "../config/suppliers.js";
import type { Config, SupplierConfig } from "../config/types.js";
import { createConnector } from "../connectors/index.js";
import { loadConnectors } from "../connectors/load.js";
import {
  isKnownSupplier,
  type PauseState,
  pauseSupplier,
  requestTrigger,
  resumeSupplier,
} from "../control/controls.js";
import { ControlWatcher } from "../control/watcher.js";
import type { Connector, RunOwner, RunTrigger } from "../ingestion/ports.js";
import { type LoadedConnector, runTick, type TickResult } from "../ingestion/tick.js";
import { leaseDeadlines } from "../lease/deadlines.js";
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
import { type Decision, decideHeld, type HeldItem, heldRun, listHeld } from "../store/held.js";
import { runMigrations } from "../store/migrate.js";
import { inTransaction } from "../store/queryable.js";
import { lastSuccesses, listRuns } from "../store/run-queries.js";
import type { Lease } from "../store/run-session.js";
import { runSessions } from "../store/run-session.js";
import type { RunRow } from "../store/runs.js";
import { WEBHOOK_LEASE, WebhookDelivery } from "../webhooks/deliver.js";
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
  /** Held items (`supplier-sync held`): undecided ones, or all with `all`. */
  listHeld(filter: { supplier?: string | undefined; all: boolean; runId?: number }): Promise<HeldItem[]>;
  /**
   * Approves or dismisses what a run's guards held (docs/connectors.md, Guards), under the supplier's
   * lease (waiting up to `waitMs`, default 60 s, for a tick of it to end).
   */
  decideHeld(input: {
    runId: number;
    skus?: string[];
    decision: "approve" | "dismiss";
    by: string;
    waitMs?: number;
  }): Promise<Decision>;
  /**
   * Pauses a supplier on every replica (docs/operations.md, Pausing): a `ConfigError` for a
   * supplier the database does not know (nor `SUPPLIER_SYNC_SUPPLIERS`, when set).
   */
  pause(input: {
    supplier: string;
    by: string;
    reason?: string | null;
  }): Promise<PauseState & { already: boolean }>;
  /** Resumes a paused supplier; null when it was not paused. */
  resume(input: { supplier: string }): Promise<PauseState | null>;
  /** Records a trigger request: one running daemon serves it with one forced walk (`manual`). */
  trigger(input: {
    supplier: string;
    by: string;
  }): Promise<{ id: number; requestedAt: Date; paused: boolean }>;
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
  secrets.add(config.adminToken);
  const log = overrides.log ?? createLogger({ level: config.logLevel, secrets });
  const metrics = overrides.metrics ?? createMetrics();
  const owner: RunOwner = { hostname: hostname(), pid: process.pid, bootId: randomUUID() };
  const enabled = config.suppliers.filter((s) => s.enabled);
  // docs/failure-modes.md, A holder cut off from the network: every lease timing from SUPPLIER_SYNC_LEASE_DEAD_PEER.
  const deadlines = leaseDeadlines(config.leaseDeadPeerMs);
  for (const s of enabled) metrics.initSupplier(s.name);

  let state: AppState = "NEW";
  let pool: pg.Pool | undefined;
  let embedded: EmbeddedDatabase | undefined;
  let health: HealthServer | undefined;
  let scheduler: Scheduler | undefined;
  let webhooks: WebhookDelivery | undefined;
  let dbClock: DatabaseClock | undefined;
  let watcher: ControlWatcher | undefined;
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
          timeZone: s.cron?.zone,
        });
        connectors.set(s.name, {
          kind: "ok",
          connector,
          maxRejectRatio: status.definition.maxRejectRatio,
          runMs: status.definition.timeouts.runMs,
          guards: status.definition.guards === false ? null : status.definition.guards,
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
        const p = createPool({ url, max: config.dbPoolMax, log, keepAliveMs: deadlines.clientKeepAliveMs });
        try {
          // The advisory lease refuses to run behind a transaction pooler (exit 3).
          if (config.lease === "advisory") await assertSessionPinning(p);
          await runMigrations(p, deadlines);
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

  /**
   * Opens the database and checks that it knows `supplier` (or that `SUPPLIER_SYNC_SUPPLIERS`,
   * when set, names it): a typo is a `ConfigError` (exit 2), not a pause nobody reads.
   */
  async function assertKnown(supplier: string): Promise<pg.Pool> {
    if (!SUPPLIER_NAME.test(supplier)) {
      throw new ConfigError(
        `${JSON.stringify(supplier)} is not a supplier name (must match ${SUPPLIER_NAME.source})`,
      );
    }
    const db = await open();
    if (config.suppliers.some((s) => s.name === supplier) || (await isKnownSupplier(db, supplier))) return db;
    throw new ConfigError(
      `unknown supplier ${JSON.stringify(supplier)}: it has no runs, offers or controls in the database and is not in SUPPLIER_SYNC_SUPPLIERS`,
    );
  }

  /** Takes `supplier`'s lease as a tick would (advisory or table); null when another holder has it. */
  async function tryLease(db: pg.Pool, supplier: string): Promise<Lease | null> {
    if (config.lease === "advisory") return acquireLease(db, supplier, log, deadlines);
    const got = await tryTableLease(db, supplier, { ttlMs: config.leaseTtlMs, owner, clock, log, deadlines });
    return "busyUntilMs" in got ? null : got;
  }

  /** Runs `fn` holding `supplier`'s lease, waiting up to `waitMs` for it; a `ConfigError` if it stays busy. */
  async function underLease<T>(
    supplier: string,
    waitMs: number,
    fn: (lease: Lease) => Promise<T>,
  ): Promise<T> {
    const db = await open();
    const deadline = clock.now() + waitMs;
    for (;;) {
      const lease = await tryLease(db, supplier);
      if (lease) {
        try {
          return await fn(lease);
        } finally {
          await lease.release();
        }
      }
      if (clock.now() >= deadline) {
        throw new ConfigError(
          `${supplier} is being walked by another process (its lease stayed busy for ${Math.round(waitMs / 1000)} s): try again when the walk has ended`,
        );
      }
      await clock.sleep(Math.min(1_000, Math.max(0, deadline - clock.now())));
    }
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
              ? tryTableLease(db, name, { ttlMs: config.leaseTtlMs, owner, clock, log, deadlines })
              : acquireLease(db, name, log, deadlines),
          { clock, heartbeatMs: deadlines.heartbeatMs, statementDeadlineMs: deadlines.statementMs },
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
        ...(watcher ? { pauseSignal: watcher.pauseSignal(supplier.name) } : {}),
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
    async listHeld({ supplier, all, runId }) {
      const db = await open();
      if (runId !== undefined) await heldRun(db, runId);
      return listHeld(db, { supplier, all, ...(runId === undefined ? {} : { runId }) });
    },
    async decideHeld({ waitMs = 60_000, ...input }) {
      const db = await open();
      const { supplier } = await heldRun(db, input.runId);
      return underLease(supplier, waitMs, (lease) =>
        inTransaction(lease.client, (tx) => decideHeld(tx, input)),
      );
    },
    async pause({ supplier, by, reason }) {
      const db = await assertKnown(supplier);
      return pauseSupplier(db, { supplier, by, reason: reason ?? null });
    },
    async resume({ supplier }) {
      const db = await assertKnown(supplier);
      return resumeSupplier(db, supplier);
    },
    async trigger({ supplier, by }) {
      const db = await assertKnown(supplier);
      const request = await requestTrigger(db, { supplier, by });
      const { rows } = await db.query<{ paused: boolean }>(
        "select exists (select 1 from ingestion_controls where supplier = $1 and paused_at is not null) as paused",
        [supplier],
      );
      return { ...request, paused: rows[0]?.paused === true };
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
        ...(config.adminToken
          ? {
              admin: {
                token: config.adminToken,
                actions: {
                  pause: (supplier: string, by: string) => pauseSupplier(db, { supplier, by }),
                  resume: (supplier: string) => resumeSupplier(db, supplier),
                  trigger: (supplier: string, by: string) => requestTrigger(db, { supplier, by }),
                  decide: async (runId: number, decision: "approve" | "dismiss", by: string) => {
                    const { supplier } = await heldRun(db, runId);
                    return underLease(supplier, 30_000, (lease) =>
                      inTransaction(lease.client, (tx) => decideHeld(tx, { runId, decision, by })),
                    );
                  },
                },
              },
            }
          : {}),
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
      const ticking = scheduler;
      watcher = new ControlWatcher({
        db,
        clock,
        log,
        suppliers: enabled.map((s) => s.name),
        onTrigger: (name) => ticking.runNow(name, "manual"),
        onResume: (name) => ticking.runNow(name, "schedule"),
      });
      // Read before the first ticks: a walk that starts now already has its pause signal.
      await watcher.start();
      await scheduler.start();
      webhooks = startWebhooks(db);
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

  /** Run events to the webhook (docs/changes.md), beside the scheduler, never on a tick's path. */
  function startWebhooks(db: pg.Pool): WebhookDelivery | undefined {
    const webhook = config.events?.webhook;
    if (!webhook) return undefined;
    secrets.add(webhook.secret);
    const delivery = new WebhookDelivery({
      pool: db,
      webhook,
      retentionMs: config.events?.eventRetentionMs ?? 7 * 86_400_000,
      acquireLease: () => tryLease(db, WEBHOOK_LEASE),
      log: log.child({ component: "webhooks" }),
      metrics,
    });
    delivery.start();
    return delivery;
  }

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
      await watcher?.stop();
      await scheduler?.stop();
      await webhooks?.stop();
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
