/**
 * Supplier freshness as the health server sees it: the newest succeeded run of each
 * supplier, read from `ingestion_runs` (docs/operations.md, Health server).
 *
 * Invariants:
 * - Freshness comes from the database, never from this process's memory, so every
 *   instance reports the same thing even when another instance did the work.
 * - At most one freshness query is outstanding per process. A hung database costs
 *   one pool connection, not one per probe: later reads wait on the same query.
 * - Every read settles within `queryTimeoutMs` (default 2 s): a hung database
 *   makes probes answer `unreachable`, never hang.
 * - A result (success or failure) is reused for `cacheMs`, so probes and scrapes
 *   do not hammer the database.
 */
import type pg from "pg";
import type { Clock } from "../platform/clock.js";
import { errorMessage } from "../platform/errors.js";
import { type FreshnessRows, readFreshness, type SupplierHold } from "../store/run-queries.js";

/**
 * Reads each supplier's newest complete walk (succeeded, or held by a guard) and what its
 * guards hold (one query on ingestion_runs and ingestion_held).
 */
export async function readLastSuccesses(db: pg.Pool, suppliers: string[]): Promise<FreshnessRows> {
  return readFreshness(db, suppliers);
}

/** What one freshness read found. */
export interface FreshnessSnapshot {
  /** Whether the last read reached the database. */
  database: "ok" | "unreachable";
  /**
   * Finished time of each supplier's newest success. When the database is
   * unreachable these are the values of the last successful read (null if none).
   */
  lastSuccess: ReadonlyMap<string, Date | null>;
  /** What the guards hold per supplier (docs/connectors.md, Guards); the last read's when unreachable. */
  held: ReadonlyMap<string, SupplierHold>;
  /** When each supplier was paused, or null (docs/operations.md, Pausing); the last read's when unreachable. */
  paused?: ReadonlyMap<string, Date | null>;
  /** Why the database was unreachable, for logs. */
  error?: string;
}

export interface FreshnessCacheOptions {
  db: pg.Pool;
  /** Names of the suppliers to report. */
  suppliers: string[];
  clock: Clock;
  /** How long a read is reused, in ms. */
  cacheMs: number;
  /** Bound of one read; past it the database counts as unreachable. */
  queryTimeoutMs: number;
  /** The query itself; {@link readLastSuccesses} unless a test counts calls. */
  read?: (db: pg.Pool, suppliers: string[]) => Promise<FreshnessRows>;
}

export interface FreshnessCache {
  /** The cached snapshot, refreshed when older than `cacheMs`. Never rejects. */
  get(): Promise<FreshnessSnapshot>;
}

class QueryTimeoutError extends Error {
  override readonly name = "QueryTimeoutError";
  readonly code = "QUERY_TIMEOUT";
}

export function createFreshnessCache(options: FreshnessCacheOptions): FreshnessCache {
  const { db, suppliers, clock, cacheMs, queryTimeoutMs } = options;
  const read = options.read ?? readLastSuccesses;
  let cached: { at: number; snapshot: FreshnessSnapshot } | undefined;
  let lastKnown: FreshnessRows = {
    lastSuccess: new Map(suppliers.map((s) => [s, null])),
    held: new Map(suppliers.map((s) => [s, { runId: null, items: 0 }])),
    paused: new Map(suppliers.map((s) => [s, null])),
  };
  // The database query still in flight, possibly outliving the read that started it.
  let pendingQuery: Promise<FreshnessRows> | undefined;
  // The read in flight, shared by concurrent callers.
  let pendingRead: Promise<FreshnessSnapshot> | undefined;

  async function refresh(): Promise<FreshnessSnapshot> {
    if (!pendingQuery) {
      const query = read(db, suppliers);
      pendingQuery = query;
      const clear = () => {
        if (pendingQuery === query) pendingQuery = undefined;
      };
      query.then(clear, clear);
    }
    const timeout = new AbortController();
    let snapshot: FreshnessSnapshot;
    try {
      const result = await Promise.race([
        pendingQuery,
        clock.sleep(queryTimeoutMs, timeout.signal).then(() => {
          throw new QueryTimeoutError(`freshness query did not answer within ${queryTimeoutMs} ms`);
        }),
      ]);
      lastKnown = result;
      snapshot = { database: "ok", ...result };
    } catch (err) {
      snapshot = { database: "unreachable", ...lastKnown, error: errorMessage(err) };
    } finally {
      timeout.abort();
    }
    cached = { at: clock.now(), snapshot };
    return snapshot;
  }

  return {
    get() {
      if (cached && clock.now() - cached.at < cacheMs) return Promise.resolve(cached.snapshot);
      if (!pendingRead) {
        const current = refresh();
        pendingRead = current;
        // refresh() never rejects, so clearing on fulfilment is enough.
        void current.then(() => {
          if (pendingRead === current) pendingRead = undefined;
        });
      }
      return pendingRead;
    },
  };
}
