import type pg from "pg";

/** A TCP port free on 127.0.0.1 right now. */
export function freePort(): Promise<number>;
/** `url` with its database replaced by `name`. */
export function withDatabase(url: string, name: string): string;
/** A fresh temporary folder for a data directory: 0711 as root (traversable by `postgres`), else 0700. */
export function makeDataParent(prefix: string): string;
export interface EmbeddedPostgresRun {
  url: string;
  port: number;
  dir: string;
  stop(): Promise<void>;
}
/** An embedded PostgreSQL for one run on a free port; `flags` are `-c` settings. */
export function startEmbeddedPostgres(options: {
  prefix: string;
  flags?: string[];
}): Promise<EmbeddedPostgresRun>;
/** Creates (after dropping) database `name`, migrated with `runMigrations` when given; returns its URL. */
export function createDatabase(
  adminUrl: string,
  name: string,
  runMigrations?: (pool: pg.Pool) => Promise<unknown>,
): Promise<string>;
/** Drops database `name`, ending its sessions; never throws. */
export function dropDatabase(adminUrl: string, name: string): Promise<void>;
