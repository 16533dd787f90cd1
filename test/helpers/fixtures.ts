import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";

/** The field mapping of docs/connectors.md's first example, which the simulator's records follow. */
export const SIM_FIELDS = {
  sku: "article",
  name: "title",
  price: "price.value",
  currency: "price.currency",
  stock: "stock.total",
};

/** Writes connector definitions `<name>.json` into a fresh folder and returns it. */
export function connectorsDir(definitions: Record<string, Record<string, unknown>>): string {
  const dir = mkdtempSync(join(tmpdir(), "ss-connectors-"));
  for (const [name, def] of Object.entries(definitions)) {
    writeFileSync(join(dir, `${name}.json`), JSON.stringify(def, null, 2));
  }
  return dir;
}

/** A page-paginated simulator connector for `baseUrl`. */
export function simConnector(baseUrl: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    baseUrl,
    request: { path: "/v1/offers", query: { limit: "100" } },
    pagination: { type: "page", param: "page", start: 1 },
    records: { path: "data.items" },
    fields: SIM_FIELDS,
    rateLimit: { requestsPerSecond: 1000, burst: 1000, maxConcurrency: 2 },
    retry: { maxAttempts: 2, baseDelayMs: 50, maxDelayMs: 200, maxRetryAfterMs: 5000 },
    ...extra,
  };
}

/** Polls `fn` until it returns a truthy value, or fails after `timeoutMs`. */
export async function until<T>(
  fn: () => Promise<T> | T,
  timeoutMs = 20_000,
  what = "condition",
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** One-off query on a database URL. */
export async function query<R extends pg.QueryResultRow = Record<string, unknown>>(
  url: string,
  text: string,
  params: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, params)).rows;
  } finally {
    await client.end();
  }
}

/** Backend pid holding the supplier's lease, if any. */
export async function leaseHolderPid(url: string, supplier: string): Promise<number | undefined> {
  const rows = await query<{ pid: number }>(
    url,
    // This database's lock only: test files running in parallel lock the same supplier names in theirs.
    "select pid from pg_locks where locktype = 'advisory' and granted and objsubid = 1 and database = (select oid from pg_database where datname = current_database()) and objid = (hashtext('ingestion:' || $1)::bigint & 4294967295)::oid",
    [supplier],
  );
  return rows[0]?.pid;
}

/**
 * Whether the supplier's lease is held, whichever lease the test processes use
 * (`testLease()`): the advisory lock in `pg_locks`, or a live `ingestion_leases` row.
 */
export async function leaseHeld(url: string, supplier: string): Promise<boolean> {
  if (process.env.SUPPLIER_SYNC_TEST_LEASE !== "table")
    return (await leaseHolderPid(url, supplier)) !== undefined;
  const rows = await query<{ live: boolean }>(
    url,
    "select expires_at > now() as live from ingestion_leases where supplier = $1",
    [supplier],
  );
  return rows[0]?.live === true;
}

/**
 * Backends to terminate to cut a daemon's lease connection: the advisory lock's holder,
 * or (table lease: the lease connection holds no lock to find it by) every backend of
 * supplier-sync on the database.
 */
export async function leaseConnectionPids(url: string, supplier: string): Promise<number[]> {
  if (process.env.SUPPLIER_SYNC_TEST_LEASE !== "table") {
    const pid = await leaseHolderPid(url, supplier);
    return pid === undefined ? [] : [pid];
  }
  const rows = await query<{ pid: number }>(
    url,
    "select pid from pg_stat_activity where datname = current_database() and application_name = 'supplier-sync'",
  );
  return rows.map((r) => r.pid);
}
