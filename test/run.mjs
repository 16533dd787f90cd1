#!/usr/bin/env node
// `npm test`: builds, provides a real PostgreSQL (TEST_DATABASE_URL, else an embedded
// one started here), migrates a template database once, then runs tap. Each test file
// clones its own database from the template (test/helpers/db.ts), so files run in parallel.
import { spawn, spawnSync } from "node:child_process";
import { join } from "node:path";
import { createDatabase, dropDatabase, startEmbeddedPostgres } from "./support/pg-runtime.mjs";

const root = new URL("..", import.meta.url).pathname;

function run(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit" });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

async function main() {
  // CI runs the suite on two Node.js lines: say which one this is (tap and the test files inherit it).
  console.error(`test: Node.js ${process.version}`);
  if (!process.argv.includes("--no-build")) run("npx", ["tsc", "-p", "tsconfig.build.json"]);
  let embedded;
  let adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) {
    embedded = await startEmbeddedPostgres({
      prefix: "supplier-sync-test-pg-",
      flags: ["max_connections=300", "fsync=off"],
    });
    adminUrl = embedded.url;
    console.error(`test: embedded PostgreSQL started on 127.0.0.1:${embedded.port} (${embedded.dir})`);
  }
  const template = `ss_tpl_${process.pid}`;
  const { runMigrations } = await import(join(root, "dist/internal/store/migrate.js"));
  await createDatabase(adminUrl, template, runMigrations);

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
  await dropDatabase(adminUrl, template);
  if (embedded) await embedded.stop();
  process.exit(code);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
