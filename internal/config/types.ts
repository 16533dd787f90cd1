import type { CronSpec } from "../ingestion/cron-slots.js";
import type { EventsConfig } from "./webhook-env.js";

/** One entry of `SUPPLIER_SYNC_SUPPLIERS`. */
export interface SupplierConfig {
  /** Matches `^[a-z][a-z0-9_-]{0,62}$`. */
  name: string;
  /**
   * Slot length; also the ticker interval. At least 1 s. For a `cron(…)` schedule, the
   * shortest of its next slots (display and cache sizing only: slot arithmetic goes
   * through internal/ingestion/slots.ts, which reads `cron`).
   */
  intervalMs: number;
  enabled: boolean;
  /** A `cron(<expr> @<zone>)` schedule instead of an interval: slots run from one fire time to the next. */
  cron?: CronSpec;
}

/** The whole validated configuration of one process. Built only by `loadConfig`. */
export interface Config {
  suppliers: SupplierConfig[];
  /** `DATABASE_URL`; undefined means embedded PostgreSQL (never in production). */
  databaseUrl: string | undefined;
  /** Absolute path of `SUPPLIER_SYNC_CONNECTORS_DIR`. */
  connectorsDir: string;
  httpAddr: { host: string; port: number };
  maxConcurrentTicks: number;
  dbPoolMax: number;
  shutdownTimeoutMs: number;
  retryBackoffMs: number;
  logLevel: string;
  /**
   * `SUPPLIER_SYNC_LEASE`: `advisory` (session advisory locks; needs a direct or
   * session-pooled connection) or `table` (rows of `ingestion_leases` with fencing
   * tokens; works through any pooler).
   */
  lease: "advisory" | "table";
  /** `SUPPLIER_SYNC_LEASE_TTL`: time until an unrenewed table lease can be taken over. */
  leaseTtlMs: number;
  /**
   * `SUPPLIER_SYNC_LEASE_DEAD_PEER`: how soon the database drops the session of a lease
   * holder it cannot reach (the lease session's TCP keepalive and user timeout), and
   * the base of every lease-connection deadline (internal/lease/deadlines.ts).
   */
  leaseDeadPeerMs: number;
  production: boolean;
  /**
   * `SUPPLIER_SYNC_TEST_CLOCK_SKEW`: added to this process's host clock, for tests that
   * run replicas whose clocks disagree (0 unless set; refused in production).
   */
  testClockSkewMs: number;
  /**
   * `SUPPLIER_SYNC_ADMIN_TOKEN` / `_FILE`: enables the console's actions (pause, resume,
   * trigger, approve, dismiss). Undefined: the console is read-only.
   */
  adminToken?: string;
  /**
   * Reads a secret env var named by a connector file (`tokenEnv` etc.). A snapshot
   * taken by the config module, which stays the only reader of `process.env`.
   */
  readSecretEnv: (name: string) => string | undefined;
  /** Run events' webhook and retention (docs/changes.md); absent in configs built by hand (tests). */
  events?: EventsConfig;
}
