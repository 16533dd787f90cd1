import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { HELD_KINDS, TICK_OUTCOMES } from "../ingestion/ports.js";

/** `ingestion_records_total` results. */
export const RECORD_RESULTS = ["inserted", "updated", "unchanged", "rejected", "delisted"] as const;

/** `ingestion_auth_logins_total` results. */
export const AUTH_LOGIN_RESULTS = ["ok", "failed"] as const;

/**
 * The self-metrics (docs/operations.md, Prometheus metrics) on the app's own registry (never prom-client's
 * global one). No SKU or run id is ever a label.
 */
export interface Metrics {
  readonly registry: Registry;
  readonly tickAttempts: Counter<"supplier" | "outcome">;
  readonly tickDuration: Histogram<"supplier" | "outcome">;
  readonly lastSuccessTimestamp: Gauge<"supplier">;
  readonly lastSuccessAge: Gauge<"supplier">;
  readonly skusProcessed: Counter<"supplier">;
  readonly records: Counter<"supplier" | "result">;
  readonly httpRequests: Counter<"supplier" | "code">;
  readonly httpRequestDuration: Histogram<"supplier">;
  readonly httpRetries: Counter<"supplier" | "reason">;
  readonly rateLimitWait: Counter<"supplier">;
  readonly runsRecovered: Counter<"supplier">;
  /** Session and OAuth logins, `ok` or `failed` (a login retried after a 503 and then answered counts once, `ok`). */
  readonly authLogins: Counter<"supplier" | "result">;
  /** Items the guards held, by kind (`price_jump`, `currency`, `delist`, `field`; docs/connectors.md, Guards). */
  readonly guardHeld: Counter<"supplier" | "kind">;
  /** Undecided held items of the supplier, read from `ingestion_held` at each scrape. */
  readonly heldItems: Gauge<"supplier">;
  /** Webhook deliveries of run events (docs/changes.md): `delivered`, `failed` (retried), `dropped` (given up). */
  readonly webhookDeliveries: Counter<"result">;
  /** Run events not yet delivered to the webhook (read by the delivering replica). */
  readonly webhookBacklog: Gauge;
  /** 1 while an operator has the supplier paused (docs/operations.md, Pausing), from ingestion_controls. */
  readonly supplierPaused: Gauge<"supplier">;
  /** Starts every known label set of `supplier` at 0. */
  initSupplier(supplier: string): void;
}

export interface MetricsOptions {
  /** Collect Node.js process metrics (CPU, memory, event loop). On by default. */
  processMetrics?: boolean;
}

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  // The event-loop-lag monitor samples every 10 ms by default: 100 wake-ups a second of an
  // otherwise idle daemon. 100 ms is plenty for a worker that sleeps for hours.
  if (options.processMetrics !== false) {
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 100 });
  }
  const registers = [registry];
  const tickAttempts = new Counter({
    name: "ingestion_tick_attempt_total",
    help: "Ticks by supplier and outcome.",
    labelNames: ["supplier", "outcome"] as const,
    registers,
  });
  const tickDuration = new Histogram({
    name: "ingestion_tick_duration_seconds",
    help: "Duration of ticks by supplier and outcome.",
    labelNames: ["supplier", "outcome"] as const,
    // 100 ms to 4 h: a skipped tick is milliseconds, a million-SKU walk is hours.
    buckets: [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1_200, 1_800, 3_600, 7_200, 14_400],
    registers,
  });
  const lastSuccessTimestamp = new Gauge({
    name: "ingestion_last_success_timestamp_seconds",
    help: "Unix time of the supplier's last succeeded run (0 if none), from ingestion_runs.",
    labelNames: ["supplier"] as const,
    registers,
  });
  const lastSuccessAge = new Gauge({
    name: "ingestion_last_success_age_seconds",
    help: "Seconds since the supplier's last succeeded run (-1 if none), from ingestion_runs.",
    labelNames: ["supplier"] as const,
    registers,
  });
  const skusProcessed = new Counter({
    name: "ingestion_skus_processed_total",
    help: "Valid offers processed (seen) by supplier.",
    labelNames: ["supplier"] as const,
    registers,
  });
  const records = new Counter({
    name: "ingestion_records_total",
    help: "Records by supplier and result (inserted, updated, unchanged, rejected, delisted).",
    labelNames: ["supplier", "result"] as const,
    registers,
  });
  const httpRequests = new Counter({
    name: "ingestion_http_requests_total",
    help: "HTTP requests to suppliers by status code (or error class for requests without a response).",
    labelNames: ["supplier", "code"] as const,
    registers,
  });
  const httpRequestDuration = new Histogram({
    name: "ingestion_http_request_duration_seconds",
    help: "Duration of HTTP requests to suppliers, to the end of the body.",
    labelNames: ["supplier"] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers,
  });
  const httpRetries = new Counter({
    name: "ingestion_http_retries_total",
    help: "HTTP retries by supplier and reason.",
    labelNames: ["supplier", "reason"] as const,
    registers,
  });
  const rateLimitWait = new Counter({
    name: "ingestion_rate_limit_wait_seconds_total",
    help: "Seconds spent waiting for the supplier's rate limiter (Retry-After pauses included).",
    labelNames: ["supplier"] as const,
    registers,
  });
  const runsRecovered = new Counter({
    name: "ingestion_runs_recovered_total",
    help: "Abandoned runs closed by recovery (INTERRUPTED).",
    labelNames: ["supplier"] as const,
    registers,
  });
  const authLogins = new Counter({
    name: "ingestion_auth_logins_total",
    help: "Session and OAuth logins by supplier and result (ok, failed); retries within one login count once.",
    labelNames: ["supplier", "result"] as const,
    registers,
  });
  const guardHeld = new Counter({
    name: "ingestion_guard_held_total",
    help: "Items held by the guards for an operator, by supplier and kind (price_jump, currency, delist, field).",
    labelNames: ["supplier", "kind"] as const,
    registers,
  });
  const heldItems = new Gauge({
    name: "ingestion_held_items",
    help: "Held items of the supplier waiting for a decision (approve or dismiss), from ingestion_held.",
    labelNames: ["supplier"] as const,
    registers,
  });
  const webhookDeliveries = new Counter({
    name: "ingestion_webhook_deliveries_total",
    help: "Webhook deliveries of run events by result (delivered, failed: retried later, dropped: given up after 24 h).",
    labelNames: ["result"] as const,
    registers,
  });
  const webhookBacklog = new Gauge({
    name: "ingestion_webhook_backlog",
    help: "Run events waiting for webhook delivery (set by the replica holding the @webhooks lease).",
    registers,
  });
  const supplierPaused = new Gauge({
    name: "ingestion_supplier_paused",
    help: "1 while an operator has the supplier paused (supplier-sync pause), from ingestion_controls; else 0.",
    labelNames: ["supplier"] as const,
    registers,
  });
  return {
    registry,
    webhookDeliveries,
    webhookBacklog,
    tickAttempts,
    tickDuration,
    lastSuccessTimestamp,
    lastSuccessAge,
    skusProcessed,
    records,
    httpRequests,
    httpRequestDuration,
    httpRetries,
    rateLimitWait,
    runsRecovered,
    authLogins,
    guardHeld,
    heldItems,
    supplierPaused,
    initSupplier(supplier) {
      supplierPaused.set({ supplier }, 0);
      for (const kind of HELD_KINDS) guardHeld.inc({ supplier, kind }, 0);
      heldItems.set({ supplier }, 0);
      for (const result of AUTH_LOGIN_RESULTS) authLogins.inc({ supplier, result }, 0);
      for (const outcome of TICK_OUTCOMES) {
        tickAttempts.inc({ supplier, outcome }, 0);
        tickDuration.zero({ supplier, outcome });
      }
      for (const result of RECORD_RESULTS) records.inc({ supplier, result }, 0);
      skusProcessed.inc({ supplier }, 0);
      rateLimitWait.inc({ supplier }, 0);
      runsRecovered.inc({ supplier }, 0);
      httpRequestDuration.zero({ supplier });
      lastSuccessTimestamp.set({ supplier }, 0);
      lastSuccessAge.set({ supplier }, -1);
    },
  };
}
