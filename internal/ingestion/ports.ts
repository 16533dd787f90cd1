/**
 * The ports of the ingestion domain. Glossary:
 *
 * - **supplier**: one configured catalog source, named in `SUPPLIER_SYNC_SUPPLIERS`.
 * - **slot**: the supplier's interval aligned to the Unix epoch; every instance computes the same one.
 * - **tick**: one attempt to sync a supplier: lease → recovery → due gate → run → release.
 * - **run**: a durable record (`ingestion_runs`) of one catalog walk.
 * - **step**: one page of a run: fetch → validate → upsert, committed with its data.
 * - **walk**: the sequence of pages a connector yields; complete when the connector reached the catalog's end.
 */
import type { PoolClient } from "pg";
import type { Logger } from "../platform/logger.js";

/** A validated offer, ready to store. `price` is an exact decimal string, never a float. */
export interface Offer {
  sku: string;
  name: string | null;
  /** Null only when the connector's `nullIf` made it so: a price on request. */
  price: string | null;
  /** ISO 4217 code, upper case, or null when the connector maps no currency. */
  currency: string | null;
  /** Non-negative integer or null. */
  stock: number | null;
  /** Further supplier data (`attributes` of the connector), null or absent when none. */
  attributes?: Record<string, unknown> | null;
}

/** A record that failed validation: kept with its raw payload, never dropped. */
export interface Reject {
  reason: string;
  raw: unknown;
}

/** One page of a walk. */
export interface Page {
  /** 1-based position in the walk. */
  seq: number;
  offers: Offer[];
  rejects: Reject[];
  /** HTTP requests it took, retries included. */
  httpAttempts: number;
  /** Whether another step follows, when the connector knows it before fetching it (`preview`). */
  hasNext?: boolean;
}

export interface WalkContext {
  /** Aborts on lease loss, run deadline or shutdown; the connector stops at once. */
  signal: AbortSignal;
  log: Logger;
  runId: string;
  /**
   * Request step N+1 while step N is stored (default true). `preview` turns it
   * off so that walking N steps sends no request of step N+1.
   */
  prefetch?: boolean;
  /**
   * Conditional request state of this walk (DESIGN §3.11), given by the tick. Only a
   * walk that is one request uses it; any other leaves it untouched.
   */
  conditional?: ConditionalWalk;
}

/** The validators of one HTTP response, verbatim; null when it carried none. */
export interface ResponseValidators {
  etag: string | null;
  lastModified: string | null;
}

/**
 * How a one-request walk and the tick talk about conditional requests (DESIGN §3.11).
 * The tick sets `previous` (the last `succeeded` run's validators); the connector
 * sends them back as `If-None-Match` / `If-Modified-Since` and writes what the
 * supplier answered. Invariant: when `notModified` is true the walk yielded no page
 * and returned normally.
 */
export interface ConditionalWalk {
  readonly previous: ResponseValidators | null;
  /** Written by the connector: the validators of the response, 304 included. */
  received?: ResponseValidators;
  /** Written by the connector: the supplier answered `304 Not Modified`. */
  notModified?: boolean;
}

/**
 * A supplier's catalog source. `walk` yields pages in order and returns normally
 * only when it reached the end of the catalog; any failure is thrown as an
 * `IngestionError` with its code.
 */
export interface Connector {
  walk(ctx: WalkContext): AsyncIterable<Page>;
  /** Releases sockets. Safe to call more than once. */
  close(): Promise<void>;
}

/** Where a run came from (`ingestion_runs.trigger`). */
export type RunTrigger = "schedule" | "retry" | "tick_once" | "forced";

/** Final state of a run (`ingestion_runs.state`). */
export type RunState = "running" | "succeeded" | "partial" | "failed";

/** Outcome label of a tick (metrics `outcome`). */
export type TickOutcome =
  | "success"
  | "partial"
  | "failed"
  | "lease_busy"
  | "lease_lost"
  | "not_due"
  | "connector_missing"
  | "skipped_overlap";

export const TICK_OUTCOMES: readonly TickOutcome[] = [
  "success",
  "partial",
  "failed",
  "lease_busy",
  "lease_lost",
  "not_due",
  "connector_missing",
  "skipped_overlap",
];

/**
 * A held lease (advisory or table, DESIGN §4). All of the tick's writes go through
 * `client`; every transaction on it is fenced by the lease (it first checks the lease
 * is still held, else fails `LEASE_LOST`).
 */
export interface Lease {
  readonly supplier: string;
  /** The dedicated connection of the tick (for the advisory lease, the one holding the lock). */
  readonly client: PoolClient;
  /** Aborts (reason: `IngestionError('LEASE_LOST')`) when the lease is lost. */
  readonly signal: AbortSignal;
  readonly lost: boolean;
  /** How often the run heartbeat must call {@link renew}; absent when the lease needs no renewal. */
  readonly renewEveryMs?: number;
  /** Extends the lease; when it is gone, marks it lost and aborts `signal`. Never throws. */
  renew?(): Promise<void>;
  /** Gives the lease up and returns the connection to the pool (destroys it when lost). Idempotent. */
  release(): Promise<void>;
}

/**
 * A table lease found busy: when it expires unless its holder renews it (epoch ms,
 * the database's clock). A killed holder is replaced by the first tick after that.
 */
export interface LeaseBusy {
  readonly busyUntilMs: number;
}

/** Counts of one committed page. */
export interface PageCounts {
  seen: number;
  inserted: number;
  updated: number;
  unchanged: number;
  rejected: number;
}

/** Who is running a run: written to `ingestion_runs.owner`. */
export interface RunOwner {
  hostname: string;
  pid: number;
  bootId: string;
}
