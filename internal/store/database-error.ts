/**
 * PostgreSQL failures classified where they are born: at the store and lease
 * boundary, every error of `pg` becomes a `DatabaseError` (an
 * `IngestionError('DATABASE')` with a kind), so the tick, the app and the CLI switch
 * on a type and a code instead of matching error codes or messages themselves.
 * Errors the store or a lease raises on purpose (`LEASE_LOST`, `INTERRUPTED`, ...)
 * are already `IngestionError`s and pass through unchanged.
 */
import pg from "pg";
import { DatabaseError, errorMessage, IngestionError } from "../platform/errors.js";

/** Socket errors of reaching the server: it is down, unknown or unreachable. */
const UNREACHABLE = new Set(["ECONNREFUSED", "ENOTFOUND", "ETIMEDOUT", "EAI_AGAIN"]);

/**
 * SQLSTATEs meaning the database cannot be used at all: class 08 (connection
 * exception), 57P0x (admin or crash shutdown, cannot connect now), 28P01 (password
 * authentication failed), 3D000 (the database does not exist).
 */
function isUnavailableState(state: string): boolean {
  return state.startsWith("08") || state.startsWith("57P0") || state === "28P01" || state === "3D000";
}

/** `err`, thrown by `pg` or a store function, as an `IngestionError` (a `DatabaseError` unless it already was one). */
export function classifyDatabaseError(err: unknown): IngestionError {
  if (err instanceof IngestionError) return err;
  if (err instanceof pg.DatabaseError) {
    const state = err.code;
    const kind = state !== undefined && isUnavailableState(state) ? "unavailable" : "failed";
    return new DatabaseError(kind, err.message, { cause: err, ...(state ? { sqlState: state } : {}) });
  }
  const code = (err as { code?: unknown } | null)?.code;
  const kind = typeof code === "string" && UNREACHABLE.has(code) ? "unavailable" : "failed";
  return new DatabaseError(kind, errorMessage(err), { cause: err });
}

/** Runs `fn`, classifying what it throws (see {@link classifyDatabaseError}). */
export async function classified<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw classifyDatabaseError(err);
  }
}
