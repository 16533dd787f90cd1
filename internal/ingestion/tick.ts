/**
 * One tick of one supplier: lease → recovery → due gate → run → close → release.
 *
 * Invariants:
 * - Nothing is written for a supplier without its lease, and every read and write of
 *   the tick goes through its run session (`RunSession`, the lease connection).
 * - A run's outcome comes from `closeRun`, which derives it in SQL from the committed
 *   steps; nothing here can declare success on its own.
 * - A tick that lost its lease writes nothing more for its run except the one
 *   compare-and-set close from a fresh connection (LEASE_LOST); if that fails too,
 *   the next holder's recovery closes it as INTERRUPTED.
 * - Shutdown is soft: the walk stops at the next page boundary and the run is closed
 *   `SHUTDOWN`. So is a pause (docs/operations.md, Pausing): closed `PAUSED`, nothing delisted;
 *   and a paused supplier's tick ends `paused` under the lease, with no run row.
 * - A `manual` tick serves a trigger request: it runs only while one is pending, and
 *   claims it for its run under the lease (exactly once); it bypasses the due gate and
 *   does not count for it. Lease loss and deadlines are hard: in-flight requests are aborted.
 */
import type { SupplierConfig } from "../config/types.js";
import type { Metrics } from "../observability/metrics.js";
import type { Clock } from "../platform/clock.js";
import { errorMessage, IngestionError, isIngestionError } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";
import type {
  ConditionalWalk,
  Connector,
  GuardSettings,
  HeldKind,
  Page,
  PageCounts,
  ResponseValidators,
  RunOwner,
  RunSession,
  RunSessions,
  RunState,
  RunTrigger,
  TickOutcome,
} from "./ports.js";
import { rejectRatioExceeded } from "./reject-ratio.js";
import { supplierSlotAt } from "./slots.js";

/** A supplier's connector as the app loaded it, or why it has none. */
export type LoadedConnector =
  | {
      kind: "ok";
      connector: Connector;
      maxRejectRatio: number;
      runMs: number;
      /** The connector's guards (docs/connectors.md, Guards); null when `"guards": false`. */
      guards: GuardSettings | null;
    }
  | { kind: "missing" | "invalid"; reason: string };

export interface TickDeps {
  /** Run sessions under the supplier's lease: the tick's only way to the database. */
  sessions: RunSessions;
  log: Logger;
  metrics: Metrics;
  clock: Clock;
  owner: RunOwner;
}

export interface TickRequest {
  supplier: SupplierConfig;
  trigger: RunTrigger;
  /** Bypasses the due gate, never the lease. */
  force: boolean;
  connector: LoadedConnector;
  /** Soft stop (shutdown): finish the current page, then close the run `SHUTDOWN`. */
  stopSignal?: AbortSignal;
  /** Soft stop (an operator paused the supplier): finish the current page, then close the run `PAUSED`. */
  pauseSignal?: AbortSignal;
  /** Hard stop: abort in-flight requests at once (shutdown budget exhausted). */
  abortSignal?: AbortSignal;
}

export interface TickResult {
  supplier: string;
  outcome: TickOutcome;
  /** The slot, from the database's clock under the lease; absent when no lease was taken. */
  slotStart?: Date;
  /** `lease_busy` with a table lease: when the holder's lease expires unless renewed (epoch ms). */
  leaseBusyUntilMs?: number;
  /** `lease_busy` with an advisory lease whose holder is still walking an earlier slot. */
  leaseHolderBehind?: boolean;
  runId?: number;
  state?: RunState;
  errorCode?: string | null;
  counts?: TickCounts;
  durationMs: number;
}

/** Runs one tick. Never throws for a supplier-level failure: the outcome says what happened. */
export async function runTick(deps: TickDeps, req: TickRequest): Promise<TickResult> {
  const started = deps.clock.now();
  const supplier = req.supplier.name;
  const log = deps.log.child({ supplier });
  let result: Omit<TickResult, "durationMs" | "supplier">;
  try {
    result = await tickUnderLease(deps, req, log);
  } catch (err) {
    // A failure outside a run: the database unreachable at lease time (`DATABASE`), the
    // lease lost before the run started (`LEASE_LOST`).
    log.error({ err: errorMessage(err) }, "tick failed before a run started");
    const { code } = reasonOf(err);
    result = { outcome: code === "LEASE_LOST" ? "lease_lost" : "failed", errorCode: code };
  }
  const durationMs = deps.clock.now() - started;
  deps.metrics.tickAttempts.inc({ supplier, outcome: result.outcome });
  deps.metrics.tickDuration.observe({ supplier, outcome: result.outcome }, durationMs / 1000);
  const line = {
    outcome: result.outcome,
    slot: result.slotStart?.toISOString(),
    run_id: result.runId,
    state: result.state,
    error_code: result.errorCode ?? undefined,
    duration_ms: durationMs,
    ...result.counts,
  };
  if (result.outcome === "success" || result.outcome === "not_due" || result.outcome === "lease_busy") {
    log.info(line, `tick ${result.outcome}`);
  } else {
    log.warn(line, `tick ${result.outcome}`);
  }
  return { supplier, ...result, durationMs };
}

async function tickUnderLease(
  deps: TickDeps,
  req: TickRequest,
  tickLog: Logger,
): Promise<Omit<TickResult, "durationMs" | "supplier">> {
  const supplier = req.supplier.name;
  const got = await deps.sessions.open(supplier, tickLog);
  if (!got) return { outcome: "lease_busy" };
  if ("busyUntilMs" in got) return { outcome: "lease_busy", leaseBusyUntilMs: got.busyUntilMs };
  if ("holderSlotStartMs" in got) {
    const current = supplierSlotAt(got.databaseNowMs, req.supplier).startMs;
    return got.holderSlotStartMs < current
      ? { outcome: "lease_busy", leaseHolderBehind: true }
      : { outcome: "lease_busy" };
  }
  const session = got;
  try {
    // docs/architecture.md, Scheduler: the slot is cut from the database's clock, read under the lease, so
    // hosts whose clocks disagree still agree on it (and on the due gate below).
    const dbNow = await session.databaseNow();
    const slotStart = new Date(supplierSlotAt(dbNow, req.supplier).startMs);
    const log = tickLog.child({ slot: slotStart.toISOString() });
    const recovered = await session.recoverAbandoned();
    for (const run of recovered) {
      deps.metrics.runsRecovered.inc({ supplier });
      log.warn(
        { run_id: run.id, state: run.state, pages: run.pages },
        "recovered abandoned run (INTERRUPTED)",
      );
    }
    if (await session.isPaused()) return { outcome: "paused", slotStart };
    const manual = req.trigger === "manual";
    if (manual) {
      // Another replica served the request while this one waited for the lease.
      if (!(await session.hasPendingTrigger())) return { outcome: "not_due", slotStart };
    } else if (!req.force && !(await session.isDue(slotStart))) {
      return { outcome: "not_due", slotStart };
    }
    const trigger: RunTrigger = manual ? "manual" : req.force ? "forced" : req.trigger;
    const guards = req.connector.kind === "ok" ? req.connector.guards : null;
    const startedAt = new Date(Math.floor(dbNow));
    const runId = await session.start({ slotStart, startedAt, trigger, owner: deps.owner, guards });
    const runLog = log.child({ run_id: runId });
    if (manual) runLog.info({ trigger_id: await session.claimTrigger() }, "serving a trigger request");
    if (req.connector.kind !== "ok") {
      const code = "CONNECTOR_MISSING";
      runLog.warn({ reason: req.connector.reason }, `connector ${req.connector.kind}`);
      const closed = await session.close({
        walkComplete: false,
        errorCode: code,
        errorMessage: req.connector.reason,
      });
      return {
        outcome: "connector_missing",
        slotStart,
        runId,
        state: closed?.state ?? "failed",
        errorCode: code,
      };
    }
    const tally = new RunTally(deps.metrics, supplier);
    // docs/conditional-requests.md: the last succeeded run's validators, for a one-request walk to send back.
    const conditional: ConditionalWalk = { previous: await session.previousValidators() };
    const walked = await walk(deps, req, req.connector, session, runId, tally, conditional, runLog);
    return { slotStart, ...(await closeWalk(deps, session, runId, walked, tally, conditional, runLog)) };
  } finally {
    await session.release();
  }
}

/** What a walk failed with: the code recorded on the run, and a message for humans. */
interface Failure {
  code: string;
  message: string;
}

/**
 * How a walk ended, for {@link closeWalk} to close the run with:
 * - `complete`: the connector reached the catalog's end and every page was committed;
 * - `stopped`: shutdown or a pause stopped it at a page boundary (`SHUTDOWN`, `PAUSED`);
 * - `failed`: a page or the connector failed, or the walk was aborted (lease lost,
 *   deadline, shutdown budget); the failing page, if any, is already a failed step.
 */
type WalkOutcome = ({ end: "complete"; failure: null } | { end: "stopped" | "failed"; failure: Failure }) & {
  /** The last step committed (0 when none was). */
  lastSeq: number;
};

/**
 * Counts of the run so far: pages committed, records by result, offers delisted, and
 * items the guards held (docs/connectors.md, Guards; a held delisting is one).
 */
export type TickCounts = Omit<PageCounts, "held"> & { pages: number; delisted: number; held: number };

/** The run's counts and the record metrics, added in one place. */
class RunTally {
  readonly counts: TickCounts = {
    pages: 0,
    seen: 0,
    inserted: 0,
    updated: 0,
    unchanged: 0,
    rejected: 0,
    delisted: 0,
    held: 0,
  };

  constructor(
    private readonly metrics: Metrics,
    private readonly supplier: string,
  ) {}

  /** A committed page's counts. */
  addCommitted(c: PageCounts): void {
    const { metrics, supplier } = this;
    this.counts.pages++;
    this.counts.seen += c.seen;
    this.counts.inserted += c.inserted;
    this.counts.updated += c.updated;
    this.counts.unchanged += c.unchanged;
    metrics.skusProcessed.inc({ supplier }, c.seen);
    metrics.records.inc({ supplier, result: "inserted" }, c.inserted);
    metrics.records.inc({ supplier, result: "updated" }, c.updated);
    metrics.records.inc({ supplier, result: "unchanged" }, c.unchanged);
    this.addRejected(c.rejected);
    for (const [kind, n] of Object.entries(c.held) as [HeldKind, number][]) {
      // A vanished field is one item per run however many steps hold it; counted once, at the close.
      if (kind === "field") continue;
      this.addHeld(kind, n);
    }
  }

  addHeld(kind: HeldKind, n: number): void {
    if (n <= 0) return;
    this.counts.held += n;
    this.metrics.guardHeld.inc({ supplier: this.supplier, kind }, n);
  }

  /** Rejects kept: of a committed page, or of a page failed for too many of them. */
  addRejected(n: number): void {
    this.counts.rejected += n;
    this.metrics.records.inc({ supplier: this.supplier, result: "rejected" }, n);
  }

  addDelisted(n: number): void {
    this.counts.delisted = n;
    if (n > 0) this.metrics.records.inc({ supplier: this.supplier, result: "delisted" }, n);
  }
}

/**
 * Walks the connector's pages, committing each through the session, until the end of
 * the catalog, a failure, an abort (lease lost, `timeouts.runMs`, shutdown budget) or
 * a soft stop at a page boundary. Never throws: how it ended is the outcome.
 */
async function walk(
  deps: TickDeps,
  req: TickRequest,
  loaded: Extract<LoadedConnector, { kind: "ok" }>,
  session: RunSession,
  runId: number,
  tally: RunTally,
  conditional: ConditionalWalk,
  log: Logger,
): Promise<WalkOutcome> {
  const deadline = new AbortController();
  const deadlineTimer = deps.clock.sleep(loaded.runMs, deadline.signal).then(
    () => deadline.abort(new IngestionError("DEADLINE", `run exceeded timeouts.runMs (${loaded.runMs} ms)`)),
    () => {},
  );
  const hardSignals = [session.signal, deadline.signal, ...(req.abortSignal ? [req.abortSignal] : [])];
  const walkSignal = AbortSignal.any(hardSignals);

  /** The last committed step. */
  let lastSeq = 0;
  /** The page being written, if a failure happens while writing it. */
  let writing: Page | undefined;
  /**
   * When the walk asked for the next step: that step's start for a connector that does not
   * say when its first request went out (`Page.startedAt`), and for a step failed while fetched.
   */
  let asked = new Date();
  try {
    let stopped: WalkOutcome | undefined;
    const pages = loaded.connector.walk({ signal: walkSignal, log, runId: String(runId), conditional });
    for await (const received of pages) {
      const page: Page = received.startedAt ? received : { ...received, startedAt: asked };
      asked = new Date();
      writing = page;
      const message = rejectRatioExceeded(page, loaded.maxRejectRatio);
      if (message !== null) {
        await session.failStep({
          seq: page.seq,
          errorCode: "CONTRACT",
          httpAttempts: page.httpAttempts,
          rejects: page.rejects,
          ...(page.startedAt ? { startedAt: page.startedAt } : {}),
        });
        tally.addRejected(page.rejects.length);
        stopped = { end: "failed", failure: { code: "CONTRACT", message }, lastSeq };
        break;
      }
      const c = await session.commitPage(page);
      lastSeq = page.seq;
      writing = undefined;
      tally.addCommitted(c);
      log.debug({ seq: page.seq, ...c }, "page committed");
      if (walkSignal.aborted) break;
      if (req.stopSignal?.aborted) {
        stopped = {
          end: "stopped",
          failure: { code: "SHUTDOWN", message: "stopped at a page boundary by shutdown" },
          lastSeq,
        };
        break;
      }
      if (req.pauseSignal?.aborted) {
        stopped = {
          end: "stopped",
          failure: { code: "PAUSED", message: "stopped at a page boundary: the supplier was paused" },
          lastSeq,
        };
        break;
      }
    }
    // An abort wins over whatever else ended the walk: it says why it could not go on.
    if (walkSignal.aborted) return { end: "failed", failure: reasonOf(walkSignal.reason), lastSeq };
    return stopped ?? { end: "complete", failure: null, lastSeq };
  } catch (err) {
    const failure = walkSignal.aborted ? reasonOf(walkSignal.reason) : reasonOf(err);
    if (!session.lost && failure.code !== "LEASE_LOST") {
      // The page that failed is recorded as a failed step (its data, if any, was rolled back).
      await session
        .failStep({
          // A failure while writing belongs to that page; one while fetching, to the next.
          seq: writing?.seq ?? lastSeq + 1,
          errorCode: failure.code,
          httpAttempts: isIngestionError(err) ? (err.attempts ?? 0) : 0,
          startedAt: writing?.startedAt ?? asked,
        })
        .catch((e) => log.warn({ err: errorMessage(e) }, "could not record the failed step"));
    }
    return { end: "failed", failure, lastSeq };
  } finally {
    deadline.abort();
    await deadlineTimer;
  }
}

/**
 * Closes the run as its walk ended. After a lost lease, with the one compare-and-set
 * close from a fresh connection; otherwise through the session, which derives the
 * state in SQL from the committed steps.
 */
async function closeWalk(
  deps: TickDeps,
  session: RunSession,
  runId: number,
  walked: WalkOutcome,
  tally: RunTally,
  conditional: ConditionalWalk,
  log: Logger,
): Promise<Omit<TickResult, "durationMs" | "supplier">> {
  const { failure } = walked;
  const counts = tally.counts;
  if (session.lost || failure?.code === "LEASE_LOST") {
    // Nothing more is written through the dead session.
    let state: RunState | undefined;
    try {
      state =
        (await deps.sessions.closeAfterLostLease(runId, failure?.message ?? "lease connection lost")) ??
        undefined;
    } catch (err) {
      log.warn({ err: errorMessage(err) }, "could not close the run after losing the lease; recovery will");
    }
    return { outcome: "lease_lost", runId, state, errorCode: "LEASE_LOST", counts };
  }

  try {
    const complete = walked.end === "complete";
    if (complete && conditional.notModified === true && counts.pages === 0) {
      return await closeNotModified(session, runId, conditional, counts, log);
    }
    const closed = await session.close({
      walkComplete: complete,
      validators: complete ? (conditional.received ?? null) : null,
      sourceDate: conditional.sourceDate ?? null,
      errorCode: failure?.code ?? null,
      errorMessage: failure?.message ?? null,
    });
    if (!closed) {
      return { outcome: "failed", runId, errorCode: "INTERRUPTED", counts };
    }
    tally.addDelisted(closed.delisted);
    if (closed.delistHeld > 0) tally.addHeld("delist", 1);
    tally.addHeld("field", closed.heldFields);
    const outcome: TickOutcome =
      closed.state === "succeeded" ? "success" : closed.state === "partial" ? "partial" : "failed";
    if (closed.errorCode === "GUARD") {
      log.warn({ held: counts.held, delist_held: closed.delistHeld }, "guards held data for an operator");
    }
    return { outcome, runId, state: closed.state, errorCode: closed.errorCode, counts };
  } catch (err) {
    log.error({ err: errorMessage(err) }, "could not close the run; the next tick's recovery will");
    return { outcome: "failed", runId, errorCode: reasonOf(err).code, counts };
  }
}

/**
 * docs/conditional-requests.md: the supplier answered 304, so the catalog is as the last succeeded run
 * left it. Nothing was fetched or written; the run succeeds with its listed offers
 * unchanged and nothing delisted.
 */
async function closeNotModified(
  session: RunSession,
  runId: number,
  conditional: ConditionalWalk,
  counts: TickCounts,
  log: Logger,
): Promise<Omit<TickResult, "durationMs" | "supplier">> {
  const received = conditional.received ?? { etag: null, lastModified: null };
  const validators: ResponseValidators = {
    etag: received.etag ?? conditional.previous?.etag ?? null,
    lastModified: received.lastModified ?? conditional.previous?.lastModified ?? null,
  };
  const closed = await session.closeNotModified(validators, conditional.sourceDate ?? null);
  if (!closed) return { outcome: "failed", runId, errorCode: "INTERRUPTED", counts };
  counts.unchanged = closed.unchanged;
  log.info({ etag: validators.etag, last_modified: validators.lastModified }, "catalog not modified (304)");
  return { outcome: "success", runId, state: closed.state, errorCode: null, counts };
}

/**
 * The failure `err` stands for. Errors are classified where they are born: the run
 * session throws `IngestionError`s (`DATABASE` for PostgreSQL's failures), and so
 * do connectors; anything else is a bug of this process, `INTERNAL`.
 */
function reasonOf(err: unknown): Failure {
  if (isIngestionError(err)) return { code: err.code, message: err.message };
  return { code: "INTERNAL", message: errorMessage(err) };
}
