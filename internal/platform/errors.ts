/**
 * Error classes of supplier-sync. Each has a fixed `name` and a stable `code`;
 * errors are classified once, where they are born, and causes are chained.
 *
 * `IngestionError.code` values are what ends up in `ingestion_runs.error_code`
 * and `ingestion_run_steps.error_code`.
 */

/** Invalid configuration or usage: the CLI exits 2. The message names the offending variable or token. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
  readonly code = "CONFIG";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** Infrastructure unavailable (database unreachable, migrations failed): the CLI exits 3. */
export class InfraError extends Error {
  override readonly name = "InfraError";
  readonly code = "INFRA";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** Stable causes recorded on runs and steps. `HTTP_<status>` is built by {@link httpErrorCode}. */
export type IngestionErrorCode =
  | "INTERRUPTED"
  | "DEADLINE"
  | "LEASE_LOST"
  | "SHUTDOWN"
  | "CONNECTOR_MISSING"
  | "AUTH"
  | "CONTRACT"
  | "SUPPLIER"
  | "NETWORK"
  | "RATE_LIMITED"
  | "DATABASE"
  | "INTERNAL"
  | `HTTP_${number}`;

export function httpErrorCode(status: number): IngestionErrorCode {
  return `HTTP_${status}`;
}

/**
 * A failure of one tick, run or step. `retryable` says whether the connector's
 * retry policy may try the same request again (docs/failure-modes.md, Suppliers).
 */
export class IngestionError extends Error {
  override readonly name: string = "IngestionError";
  readonly code: IngestionErrorCode;
  readonly retryable: boolean;
  /** Delay the server asked for (`Retry-After`), in ms, when known. */
  readonly retryAfterMs: number | undefined;
  /** HTTP requests spent on the failing page, when the error ends a page. */
  attempts: number | undefined;
  constructor(
    code: IngestionErrorCode,
    message: string,
    options?: { cause?: unknown; retryable?: boolean; retryAfterMs?: number; attempts?: number },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options?.retryable ?? false;
    this.retryAfterMs = options?.retryAfterMs;
    this.attempts = options?.attempts;
  }
}

/**
 * How a PostgreSQL failure was classified where it was born (internal/store/database-error.ts):
 * `unavailable` when the database cannot be reached or refuses the connection (down,
 * shutting down, unknown database, bad password: the CLI exits 3), `failed` for any
 * other failure of a statement or a connection.
 */
export type DatabaseErrorKind = "unavailable" | "failed";

/** A PostgreSQL failure: an `IngestionError('DATABASE')` that also says its kind. */
export class DatabaseError extends IngestionError {
  override readonly name: string = "DatabaseError";
  readonly kind: DatabaseErrorKind;
  /** PostgreSQL's SQLSTATE, when the server answered with an error. */
  readonly sqlState: string | undefined;
  constructor(kind: DatabaseErrorKind, message: string, options?: { cause?: unknown; sqlState?: string }) {
    super("DATABASE", message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.kind = kind;
    this.sqlState = options?.sqlState;
  }
}

export function isIngestionError(err: unknown): err is IngestionError {
  return err instanceof IngestionError;
}

/** Message of any thrown value, for logs and error columns. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
