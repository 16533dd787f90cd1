/**
 * Webhook delivery of run events (docs/changes.md, Webhooks).
 *
 * Invariants:
 * - Never on a tick's path: ticks only insert into the outbox (events/outbox.ts) in
 *   their own transactions; this loop runs beside the scheduler, on its own
 *   connection, and a receiver that hangs or fails delays only its own deliveries.
 * - One replica delivers at a time: the loop holds the lease named `@webhooks` (the
 *   suppliers' lease module; no supplier name starts with `@`) while it works, and
 *   marks deliveries through the lease connection, so a replica that lost the lease
 *   cannot mark anything.
 * - At least once, in order per supplier: only the oldest undelivered event of each
 *   supplier is attempted; `delivered_at` is set only after a 2xx answer. A crash
 *   between the answer and the mark sends the event again (the receiver dedupes on
 *   `X-Supplier-Sync-Event-Id`).
 * - Retries survive restarts: `attempts`, `last_error` and `next_attempt_at` are in
 *   the row. Backoff 10 s, doubling, at most 1 h; an event still failing 24 h after it
 *   was written is given up (`next_attempt_at = 'infinity'`, counted `dropped`), so
 *   its supplier's later events go on.
 * - The request is bounded: the configured origin only (redirects are not followed:
 *   a 3xx is a failure), connect/header/body timeouts, at most 64 KiB of answer read.
 * - The secret never leaves the HMAC: it is registered for redaction, and errors are
 *   described by status code or the client's error code and message.
 */
import { createHmac } from "node:crypto";
import type pg from "pg";
import { Pool } from "undici";
import type { WebhookConfig } from "../config/webhook-env.js";
import { EVENTS_CHANNEL } from "../events/outbox.js";
import type { Metrics } from "../observability/metrics.js";
import { errorMessage } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";
import { inTransaction } from "../store/queryable.js";
import type { Lease } from "../store/run-session.js";

/** The lease held by the replica that delivers. */
export const WEBHOOK_LEASE = "@webhooks";

export const WEBHOOK_RESULTS = ["delivered", "failed", "dropped"] as const;

export interface WebhookDeliveryOptions {
  pool: pg.Pool;
  webhook: WebhookConfig;
  /** Takes the lease named {@link WEBHOOK_LEASE}; null when another replica holds it. */
  acquireLease: () => Promise<Lease | null>;
  log: Logger;
  metrics: Metrics;
  /** Events older than this are deleted, in batches of {@link RETENTION_BATCH}. */
  retentionMs: number;
  /** First retry delay (default 10 s); doubles up to {@link maxBackoffMs}. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** How long an event is retried (default 24 h). */
  giveUpAfterMs?: number;
  /** Per request: connect, headers and body (default 10 s). */
  requestTimeoutMs?: number;
  /** Idle wait between passes when nothing is announced (default 1 s). */
  pollMs?: number;
}

export const RETENTION_BATCH = 1000;
const MAX_ANSWER_BYTES = 64 * 1024;
const PARALLEL_SUPPLIERS = 4;

/** `sha256=<hex HMAC-SHA256 of body>`: the `X-Supplier-Sync-Signature` header. */
export function signature(secret: string, body: string): string {
  return `sha256=${createHmac("sha256", secret).update(body, "utf8").digest("hex")}`;
}

interface DueEvent {
  id: string;
  supplier: string;
  body: string;
  attempts: number;
  expired: boolean;
}

/** The delivery loop; `start()`/`stop()` tolerate never-started and double-stop. */
export class WebhookDelivery {
  private readonly o: Required<Omit<WebhookDeliveryOptions, "webhook">> & { webhook: WebhookConfig };
  private readonly http: Pool;
  private running: Promise<void> | undefined;
  private readonly stopping = new AbortController();
  private wake: (() => void) | undefined;
  private lastRetention = 0;

  constructor(options: WebhookDeliveryOptions) {
    this.o = {
      backoffMs: 10_000,
      maxBackoffMs: 3_600_000,
      giveUpAfterMs: 86_400_000,
      requestTimeoutMs: 10_000,
      pollMs: 1_000,
      ...options,
    };
    this.http = new Pool(options.webhook.url.origin, {
      connections: PARALLEL_SUPPLIERS,
      connectTimeout: this.o.requestTimeoutMs,
      headersTimeout: this.o.requestTimeoutMs,
      bodyTimeout: this.o.requestTimeoutMs,
    });
    for (const result of WEBHOOK_RESULTS) options.metrics.webhookDeliveries.inc({ result }, 0);
    options.metrics.webhookBacklog.set(0);
  }

  start(): void {
    if (this.running || this.stopping.signal.aborted) return;
    this.running = this.loop().catch((err) =>
      this.o.log.error({ err: errorMessage(err) }, "webhook loop ended"),
    );
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    this.wake?.();
    await this.running;
    await this.http.close().catch(() => {});
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }

  private async loop(): Promise<void> {
    while (!this.stopping.signal.aborted) {
      let lease: Lease | null = null;
      try {
        lease = await this.o.acquireLease();
      } catch (err) {
        this.o.log.warn({ err: errorMessage(err) }, "webhook lease unavailable");
      }
      if (!lease) {
        await this.sleep(5 * this.o.pollMs);
        continue;
      }
      try {
        await this.holdAndDeliver(lease);
      } catch (err) {
        this.o.log.warn({ err: errorMessage(err) }, "webhook delivery pass failed");
        await this.sleep(this.o.pollMs);
      } finally {
        await lease.release();
      }
    }
  }

  private async holdAndDeliver(lease: Lease): Promise<void> {
    const onNotify = (n: pg.Notification) => {
      if (n.channel === EVENTS_CHANNEL) this.wake?.();
    };
    lease.client.on("notification", onNotify);
    await lease.client.query(`listen ${EVENTS_CHANNEL}`);
    try {
      while (!this.stopping.signal.aborted && !lease.lost) {
        await lease.renew?.();
        const worked = await this.pass(lease);
        await this.retain();
        if (!worked) await this.sleep(this.o.pollMs);
      }
    } finally {
      lease.client.off("notification", onNotify);
      if (!lease.lost) await lease.client.query(`unlisten ${EVENTS_CHANNEL}`).catch(() => {});
    }
  }

  /** One round: the oldest due event of each supplier, delivered in parallel. True if any was attempted. */
  async pass(lease: Lease): Promise<boolean> {
    const { rows } = await lease.client.query<DueEvent & { backlog: string }>(
      `with heads as (
         select distinct on (supplier) id, supplier, payload::text as body, attempts, created_at, next_attempt_at
           from ingestion_events
          where delivered_at is null and (next_attempt_at is null or next_attempt_at <> 'infinity')
          order by supplier, id
       )
       select h.id::text, h.supplier, h.body, h.attempts,
              h.created_at < now() - make_interval(secs => $1::double precision / 1000) as expired,
              (select count(*) from ingestion_events where delivered_at is null) as backlog
         from heads h
        where h.next_attempt_at is null or h.next_attempt_at <= now()
        order by h.id`,
      [this.o.giveUpAfterMs],
    );
    if (rows.length === 0) {
      await this.updateBacklog(lease);
      return false;
    }
    this.o.metrics.webhookBacklog.set(Number(rows[0]?.backlog ?? 0));
    for (let i = 0; i < rows.length; i += PARALLEL_SUPPLIERS) {
      const batch = rows.slice(i, i + PARALLEL_SUPPLIERS);
      const outcomes = await Promise.all(batch.map((e) => this.post(e)));
      await inTransaction(lease.client, async (tx) => {
        for (const [j, outcome] of outcomes.entries()) await this.mark(tx, batch[j] as DueEvent, outcome);
      });
      if (this.stopping.signal.aborted) break;
    }
    await this.updateBacklog(lease);
    return true;
  }

  private async updateBacklog(lease: Lease): Promise<void> {
    const { rows } = await lease.client.query<{ n: string }>(
      "select count(*) as n from ingestion_events where delivered_at is null and (next_attempt_at is null or next_attempt_at <> 'infinity')",
    );
    this.o.metrics.webhookBacklog.set(Number(rows[0]?.n ?? 0));
  }

  /** POSTs one event; null on a 2xx, else the error to record (never containing the secret). */
  private async post(event: DueEvent): Promise<string | null> {
    const url = this.o.webhook.url;
    try {
      const res = await this.http.request({
        method: "POST",
        path: `${url.pathname}${url.search}`,
        headers: {
          "content-type": "application/json",
          "user-agent": "supplier-sync",
          "x-supplier-sync-event-id": event.id,
          "x-supplier-sync-signature": signature(this.o.webhook.secret, event.body),
        },
        body: event.body,
        signal: AbortSignal.any([this.stopping.signal, AbortSignal.timeout(this.o.requestTimeoutMs)]),
      });
      let read = 0;
      for await (const chunk of res.body) {
        read += (chunk as Buffer).length;
        if (read > MAX_ANSWER_BYTES) break;
      }
      if (read > MAX_ANSWER_BYTES) res.body.destroy();
      if (res.statusCode >= 200 && res.statusCode < 300) return null;
      return res.statusCode >= 300 && res.statusCode < 400
        ? `HTTP ${res.statusCode}: redirects are not followed`
        : `HTTP ${res.statusCode}`;
    } catch (err) {
      const code = (err as { code?: string }).code;
      return `${code ? `${code}: ` : ""}${errorMessage(err)}`.slice(0, 500);
    }
  }

  private async mark(tx: pg.ClientBase, event: DueEvent, error: string | null): Promise<void> {
    if (error === null) {
      await tx.query(
        "update ingestion_events set delivered_at = now(), attempts = attempts + 1, last_error = null where id = $1",
        [event.id],
      );
      this.o.metrics.webhookDeliveries.inc({ result: "delivered" });
      return;
    }
    const delay = Math.min(this.o.backoffMs * 2 ** Math.min(event.attempts, 30), this.o.maxBackoffMs);
    await tx.query(
      `update ingestion_events
          set attempts = attempts + 1, last_error = $2,
              next_attempt_at = case when $4::boolean then 'infinity'::timestamptz
                                     else now() + make_interval(secs => $3::double precision / 1000) end
        where id = $1`,
      [event.id, error, delay, event.expired],
    );
    this.o.metrics.webhookDeliveries.inc({ result: event.expired ? "dropped" : "failed" });
    this.o.log.warn(
      { supplier: event.supplier, event_id: event.id, attempts: event.attempts + 1, err: error },
      event.expired ? "webhook event given up after retrying" : "webhook delivery failed; will retry",
    );
  }

  /** Deletes events older than the retention, in bounded batches, at most once a minute. */
  async retain(): Promise<number> {
    const now = Date.now();
    if (now - this.lastRetention < 60_000) return 0;
    this.lastRetention = now;
    return deleteExpiredEvents(this.o.pool, this.o.retentionMs);
  }
}

/** Deletes events older than `retentionMs` in batches of {@link RETENTION_BATCH} (at most 100 batches a call). */
export async function deleteExpiredEvents(db: pg.Pool, retentionMs: number): Promise<number> {
  let total = 0;
  for (let i = 0; i < 100; i++) {
    const { rowCount } = await db.query(
      `delete from ingestion_events
        where id in (select id from ingestion_events
                      where created_at < now() - make_interval(secs => $1::double precision / 1000)
                      order by id limit ${RETENTION_BATCH})`,
      [retentionMs],
    );
    total += rowCount ?? 0;
    if ((rowCount ?? 0) < RETENTION_BATCH) break;
  }
  return total;
}
