/**
 * A real PgBouncer (Debian's `pgbouncer`) in front of the test PostgreSQL, started on a
 * free loopback port with its own config in a temp folder, stopped on teardown.
 * `pgbouncerMissing()` says why tests that need it skip (only when the binary is absent).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { adminUrl, type Teardown } from "./db.js";

const CANDIDATES = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer", "/usr/local/bin/pgbouncer"];

export function pgbouncerBinary(): string | undefined {
  return CANDIDATES.find((p) => existsSync(p));
}

/** The skip reason, or false when PgBouncer is installed. */
export function pgbouncerMissing(): string | false {
  return pgbouncerBinary()
    ? false
    : `pgbouncer is not installed (looked in ${CANDIDATES.join(", ")}): apt-get install -y pgbouncer`;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address();
      const port = typeof address === "object" && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
    srv.on("error", reject);
  });
}

/** PgBouncer refuses to run as root: as root, run it as the `postgres` system user. */
function runAs(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  return { uid, gid };
}

export interface PgBouncer {
  readonly port: number;
  readonly poolMode: "session" | "transaction";
  /** `databaseUrl` (a URL of the test PostgreSQL) rewritten to go through this PgBouncer. */
  url(databaseUrl: string): string;
  /** PgBouncer's own log so far. */
  log(): string;
}

export async function startPgBouncer(
  t: Teardown,
  options: { poolMode: "session" | "transaction"; poolSize?: number },
): Promise<PgBouncer> {
  const binary = pgbouncerBinary();
  if (!binary) throw new Error(pgbouncerMissing() || "pgbouncer missing");
  const upstream = new URL(adminUrl());
  const dir = mkdtempSync(join(tmpdir(), "ss-pgbouncer-"));
  chmodSync(dir, 0o777);
  const port = await freePort();
  const user = decodeURIComponent(upstream.username || "postgres");
  const password = decodeURIComponent(upstream.password);
  const server = [
    `host=${upstream.hostname}`,
    `port=${upstream.port || "5432"}`,
    `user=${user}`,
    ...(password ? [`password=${password}`] : []),
  ].join(" ");
  const ini = join(dir, "pgbouncer.ini");
  writeFileSync(join(dir, "users.txt"), `"${user}" ""\n`);
  writeFileSync(
    ini,
    [
      "[databases]",
      `* = ${server}`,
      "[pgbouncer]",
      "listen_addr = 127.0.0.1",
      `listen_port = ${port}`,
      "unix_socket_dir =",
      "auth_type = trust",
      `auth_file = ${join(dir, "users.txt")}`,
      `pool_mode = ${options.poolMode}`,
      `default_pool_size = ${options.poolSize ?? 20}`,
      "max_client_conn = 500",
      "ignore_startup_parameters = extra_float_digits,options",
      `logfile = ${join(dir, "pgbouncer.log")}`,
      `pidfile = ${join(dir, "pgbouncer.pid")}`,
      "",
    ].join("\n"),
  );
  for (const f of ["users.txt", "pgbouncer.ini"]) chmodSync(join(dir, f), 0o644);
  const child: ChildProcess = spawn(binary, [ini], { ...runAs(), stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  const logOf = () => {
    try {
      return readFileSync(join(dir, "pgbouncer.log"), "utf8");
    } catch {
      return "";
    }
  };
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 3_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  });
  const url = (databaseUrl: string) => {
    const u = new URL(databaseUrl);
    u.hostname = "127.0.0.1";
    u.port = String(port);
    u.password = "";
    return u.toString();
  };
  // Ready when a query goes through it.
  const deadline = Date.now() + 10_000;
  for (;;) {
    const client = new pg.Client({ connectionString: url(adminUrl()), connectionTimeoutMillis: 1_000 });
    client.on("error", () => {});
    try {
      await client.connect();
      await client.query("select 1");
      await client.end();
      break;
    } catch (err) {
      await client.end().catch(() => {});
      if (child.exitCode !== null || Date.now() > deadline) {
        throw new Error(`pgbouncer did not start: ${err}; stderr: ${stderr}; log: ${logOf()}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { port, poolMode: options.poolMode, url, log: logOf };
}
