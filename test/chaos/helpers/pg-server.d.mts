/** The directory of the bundled PostgreSQL binaries for this platform. */
export function postgresBinDir(): string;
/** Runs initdb in `dataDir` (as root: as the `postgres` user, who must be able to traverse its parent). */
export function initPostgres(options: { dataDir: string; port: number }): Promise<void>;
/** Resolves once `url` accepts a query, or rejects after `timeoutMs`. */
export function waitForPostgres(url: string, timeoutMs?: number): Promise<void>;
/** Starts the postmaster on `dataDir` (listen_addresses `listen`, default 127.0.0.1) and waits until it answers. */
export function startPostgres(options: {
  dataDir: string;
  port: number;
  timeoutMs?: number;
  listen?: string;
}): Promise<void>;
/** The running postmaster's pid, from `postmaster.pid`, if any. */
export function postmasterPid(dataDir: string): number | undefined;
/** Fast shutdown (SIGINT) of the postmaster, waiting until it is gone. */
export function stopPostgres(options: { dataDir: string; timeoutMs?: number }): Promise<void>;
