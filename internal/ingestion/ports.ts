/**
 * The ports of the ingestion domain. Glossary:
 *
 * - **supplier**: one configured catalog source, named in `SUPPLIER_SYNC_SUPPLIERS`.
 * - **slot**: the supplier's interval aligned to the Unix epoch; every instance computes the same one.
 * - **tick**: one attempt to sync a supplier: lease → recovery → due gate → run → release.
 * - **run**: a durable record (`ingestion_runs`) of one catalog walk.
 * - **step**: one page of a run: fetch → validate → upsert, committed with its data.
 * - **walk**: the sequence of pages a connector yields; complete when the connector reached the catalog's end.
 * - **run session**: what a held lease lets the tick do, and nothing else: every write of
 *   the run goes through it (internal/store/run-session.ts implements it).
 */
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

/**
 * The guards of a connector (docs/connectors.md, Guards): what a complete, well-formed
 * walk may not apply without an operator. Null: guards off.
 */
export interface GuardSettings {
  /** A complete walk that would delist more than this share of the listed offers ... */
  maxDelistRatio: number;
  /** ... and more than this many of them delists nothing: the delisting is held. */
  minDelistCount: number;
  /** A new price ≥ stored × factor, or ≤ stored / factor, is held (exact decimals). */
  priceJumpFactor: number;
  /** An offer whose currency differs from its stored one is held. */
  currencyChange: boolean;
}

/** What a guard can hold (`ingestion_held.kind`). */
export type HeldKind = "price_jump" | "currency" | "delist" | "field";

export const HELD_KINDS: readonly HeldKind[] = ["price_jump", "currency", "delist", "field"];

/** A record that failed validation: kept with its raw payload, never dropped. */
export interface Reject {
  reason: string;
  raw: unknown;
}

/**
 * How many of a step's records carried a value for one mapped field (docs/connectors.md,
 * Guards): what `field_coverage` sums per run and the vanished-field guard reads.
 */
export interface FieldCoverage {
  /** The field: `name`, `price`, `currency`, `stock`, or `attributes.<name>`. */
  field: string;
  /** Its dot path or expression as the connector names it (its `source`). */
  source: string;
  /** Records of the step the field was read from (offers and rejects alike). */
  records: number;
  /** Of those, how many gave a value: the path or expression found something (before `nullIf`). */
  withValue: number;
}

/** One page of a walk. */
export interface Page {
  /** 1-based position in the walk. */
  seq: number;
  offers: Offer[];
  rejects: Reject[];
  /** HTTP requests it took, retries included. */
  httpAttempts: number;
  /**
   * When the step began: its first request was made (for a file read in steps, when its
   * reading began). Stored as the step's `started_at`; absent: when the walk asked for it.
   */
  startedAt?: Date;
  /** Whether another step follows, when the connector knows it before fetching it (`preview`). */
  hasNext?: boolean;
  /** Per mapped field (sku excluded), how many of the step's records carried a value; absent: not counted. */
  coverage?: FieldCoverage[];
  /** A workbook's first step: the sheet read and the header row found (docs/feeds.md, Workbooks), for `preview`. */
  workbook?: { sheet: string; headerRow: number | undefined; header: string[] };
}

export interface WalkContext {
  /** Aborts on lease loss, run deadline or shutdown; the connector stops at once. */
  signal: AbortSignal;
  /**
   * Bound to `supplier` and (in a run) `run_id`, a number: a connector's lines add neither,
   * so each key appears once with one type.
   */
  log: Logger;
  runId: string;
  /**
   * Request step N+1 while step N is stored (default true). `preview` turns it
   * off so that walking N steps sends no request of step N+1.
   */
  prefetch?: boolean;
  /**
   * Conditional request state of this walk (docs/conditional-requests.md), given by the tick. Only a
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
 * How a one-request walk and the tick talk about conditional requests (docs/conditional-requests.md).
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
  /** Written by the connector: the date (`YYYY-MM-DD`) a dated file was read for (docs/feeds.md, Dated files). */
  sourceDate?: string;
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
export type RunTrigger = "schedule" | "retry" | "tick_once" | "forced" | "manual";

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
  | "skipped_overlap"
  | "paused";

export const TICK_OUTCOMES: readonly TickOutcome[] = [
  "success",
  "partial",
  "failed",
  "lease_busy",
  "lease_lost",
  "not_due",
  "connector_missing",
  "skipped_overlap",
  "paused",
];

/**
 * A run of one supplier under its held lease (advisory or table, docs/operations.md, Choosing the lease): the only
 * way the tick reads or writes the database. Every transaction it opens is fenced by
 * the lease (it first checks the lease is still held, else fails `LEASE_LOST`); every
 * failure it throws is an `IngestionError` with its code (`DATABASE` for PostgreSQL's).
 *
 * Order: `databaseNow` / `recoverAbandoned` / `isDue`, then `start` once, then
 * `commitPage` / `failStep` for that run, then `close` once, and `release` always.
 * While the run is open the session beats its heartbeat (and renews a lease that
 * needs it) on its own, until `close`, `release` or the loss of the lease.
 */
export interface RunSession {
  readonly supplier: string;
  /** Aborts (reason: `IngestionError('LEASE_LOST')`) when the lease is lost. */
  readonly signal: AbortSignal;
  readonly lost: boolean;
  /** PostgreSQL's `now()` in ms since the epoch: the clock every slot is cut from. */
  databaseNow(): Promise<number>;
  /** Closes the supplier's `running` runs, abandoned by holders that lost the lease, as INTERRUPTED. */
  recoverAbandoned(): Promise<RecoveredRun[]>;
  /** False when a run of the supplier already succeeded in the slot (any trigger but `manual`). */
  isDue(slotStart: Date): Promise<boolean>;
  /** Whether an operator paused the supplier (`ingestion_controls`, docs/operations.md, Pausing). */
  isPaused(): Promise<boolean>;
  /** Whether a trigger request of the supplier waits (`ingestion_triggers`). */
  hasPendingTrigger(): Promise<boolean>;
  /** Claims the oldest pending trigger request for the started run; null when none was left. */
  claimTrigger(): Promise<number | null>;
  /**
   * Inserts the run `running`, before the first request, and starts its heartbeat. Returns its id.
   * `guards` (null: off) apply to every page and to the close of this run.
   */
  start(input: {
    slotStart: Date;
    /** The database time the slot was read at: the run's `started_at`, inside its slot (now() when absent). */
    startedAt?: Date;
    trigger: RunTrigger;
    owner: RunOwner;
    guards: GuardSettings | null;
  }): Promise<number>;
  /** Commits one page of the run with its data; what the guards held on it is in its counts. */
  commitPage(page: Page): Promise<PageCounts>;
  /** Records the step `seq` of the run as failed, keeping `rejects` if given. */
  failStep(input: {
    seq: number;
    errorCode: string;
    httpAttempts: number;
    rejects?: Reject[];
    /** When the step began (see `Page.startedAt`); absent: now. */
    startedAt?: Date;
  }): Promise<void>;
  /** The validators of the supplier's last `succeeded` run (conditional requests, docs/conditional-requests.md), or null. */
  previousValidators(): Promise<ResponseValidators | null>;
  /**
   * Stops the heartbeat and closes the run by compare-and-set, its state derived in SQL
   * from its committed steps. Null when the run was already closed (by recovery).
   */
  close(input: CloseInput): Promise<ClosedRun | null>;
  /**
   * Closes a run the supplier answered `304 Not Modified` (docs/conditional-requests.md), which committed
   * no step: `succeeded`, `records_unchanged` = the supplier's listed offers, nothing
   * delisted, `validators` kept for the next run. Null when the run was already closed.
   */
  closeNotModified(
    validators: ResponseValidators,
    sourceDate?: string | null,
  ): Promise<{ state: RunState; unchanged: number } | null>;
  /** One beat: renews the lease if it needs it, then refreshes the run's `heartbeat_at`. Never throws. */
  heartbeat(): Promise<void>;
  /** Stops the heartbeat and gives the lease up. Idempotent. */
  release(): Promise<void>;
}

/** What the tick gets run sessions from (internal/store/run-session.ts). */
export interface RunSessions {
  /**
   * `null` or a `HolderRun` (advisory) or a `LeaseBusy` (table) when another holder has
   * the supplier's lease.
   */
  open(supplier: string, log: Logger): Promise<RunSession | LeaseBusy | HolderRun | null>;
  /**
   * The one write after a lost lease: the compare-and-set close `LEASE_LOST`, from a
   * fresh connection, never through the dead session. Its state, or null when the
   * run was already closed.
   */
  closeAfterLostLease(runId: number, errorMessage: string): Promise<RunState | null>;
}

export interface CloseInput {
  walkComplete: boolean;
  errorCode: string | null;
  errorMessage: string | null;
  /** The walk's one response's validators (docs/conditional-requests.md), kept on the run; reused only if it succeeds. */
  validators?: ResponseValidators | null;
  /** The date a dated file was read for (docs/feeds.md, Dated files), kept as `ingestion_runs.source_date`. */
  sourceDate?: string | null;
}

export interface ClosedRun {
  state: RunState;
  /** The code the run was closed with: the walk's, or `GUARD` for a complete walk that held something. */
  errorCode: string | null;
  /** Offers the close delisted (only a complete walk with its whole seen set delists, and only if the guard lets it). */
  delisted: number;
  /** Offers the delisting guard held instead of delisting them (0 when it passed). */
  delistHeld: number;
  /** `field` items the run holds (vanished fields: one per field, however many steps held it). */
  heldFields: number;
}

/** A run closed by recovery: its state, capped at `partial`, and its succeeded steps. */
export interface RecoveredRun {
  id: number;
  state: "partial" | "failed";
  pages: number;
}

/**
 * A table lease found busy: when it expires unless its holder renews it (epoch ms,
 * the database's clock). A killed holder is replaced by the first tick after that.
 */
export interface LeaseBusy {
  readonly busyUntilMs: number;
}

/**
 * An advisory lease found busy while its holder has a `running` run: the slot that run
 * walks and the database's clock when asked (epoch ms). A holder still walking an
 * earlier slot (a walk that ran over its slot) has not walked this one: the scheduler
 * checks again within the slot instead of leaving the slot to it.
 */
export interface HolderRun {
  readonly holderSlotStartMs: number;
  readonly databaseNowMs: number;
}

/** Counts of one committed page. */
export interface PageCounts {
  seen: number;
  inserted: number;
  updated: number;
  unchanged: number;
  rejected: number;
  /**
   * Items the guards held on the page (docs/connectors.md, Guards): offers whose price jumped or
   * currency switched (not written: neither inserted, updated nor unchanged) and vanished fields.
   */
  held: Partial<Record<HeldKind, number>>;
}

/** Who is running a run: written to `ingestion_runs.owner`. */
export interface RunOwner {
  hostname: string;
  pid: number;
  bootId: string;
}
