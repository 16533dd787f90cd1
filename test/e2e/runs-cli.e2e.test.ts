// `supplier-sync runs` and `migrate` with nothing but DATABASE_URL, sub-second
// durations in the table, and logs as an operator's terminal shows them (issue 20,
// README.md, Command line): real CLI processes against a real database.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import t from "tap";
import { baseEnv, CLI, runCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { query } from "../helpers/fixtures.js";

async function insertRun(url: string, supplier: string, startedAt: string, durationMs: number | null) {
  await query(
    url,
    `insert into ingestion_runs (supplier, slot_start, trigger, state, owner, started_at, heartbeat_at, finished_at, pages)
     values ($1, $2::timestamptz, 'schedule', case when $3::int is null then 'running' else 'succeeded' end,
             '{"hostname":"h","pid":1,"bootId":"b"}', $2::timestamptz, $2::timestamptz,
             $2::timestamptz + $3::int * interval '1 millisecond', 1)`,
    [supplier, startedAt, durationMs],
  );
}

t.test("runs needs only DATABASE_URL and shows sub-second durations", async (t) => {
  const url = await createTestDatabase(t);
  await insertRun(url, "etm", "2026-03-01T10:00:00Z", 340);
  await insertRun(url, "iek", "2026-03-01T10:01:00Z", 4_250);
  await insertRun(url, "etm", "2026-03-01T10:02:00Z", 95_000);
  await insertRun(url, "yml", "2026-03-01T10:03:00Z", null);
  const env = baseEnv({ DATABASE_URL: url });
  t.notOk("SUPPLIER_SYNC_SUPPLIERS" in env);

  const table = await runCli(t, ["runs"], env);
  t.equal(table.code, 0, table.stderr);
  const lines = table.stdout.split("\n").filter((l) => l.trim() !== "");
  t.match(lines[0], /DURATION/);
  const row = (supplier: string, at: string) =>
    lines.find((l) => l.includes(supplier) && l.includes(at)) ?? "";
  t.match(row("etm", "10:00:00Z"), /\s340ms\s/, "340 ms, not 0s");
  t.match(row("iek", "10:01:00Z"), /\s4\.2s\s/, "tenths under 10 s");
  t.match(row("etm", "10:02:00Z"), /\s1m35s\s/);
  t.match(row("yml", "10:03:00Z"), /\srunning\s/);

  const json = await runCli(t, ["runs", "--json", "--supplier", "etm"], env);
  t.equal(json.code, 0, json.stderr);
  // Log lines of `runs` go to stderr: its stdout is the JSON alone, fit for a pipe.
  const rows = JSON.parse(json.stdout) as { supplier: string; durationMs: number | null }[];
  t.same(
    rows.map((r) => [r.supplier, r.durationMs]),
    [
      ["etm", 95_000],
      ["etm", 340],
    ],
  );

  const migrate = await runCli(t, ["migrate"], env);
  t.equal(migrate.code, 0, migrate.stderr);

  // A retired variable or a bad supplier list does not concern `runs`; the daemon still refuses them.
  const odd = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "not a list",
    SUPPLIER_SYNC_ENABLED: "x",
  });
  t.equal((await runCli(t, ["runs"], odd)).code, 0);
  t.equal((await runCli(t, ["check-config"], odd)).code, 2);
});

const SCRIPT = "/usr/bin/script";

t.test("logs are human-readable on a terminal, JSON otherwise and in production", async (t) => {
  if (!existsSync(SCRIPT)) {
    t.pass("skipped", { skip: `${SCRIPT} (util-linux) is missing: no pseudo-terminal to run the CLI on` });
    return;
  }
  const url = await createTestDatabase(t);
  const onTerminal = (extra: Record<string, string>) => {
    // script(1) runs the command on a pseudo-terminal: stdout is a TTY for the CLI.
    const r = spawnSync(SCRIPT, ["-qec", `${process.execPath} ${CLI} migrate`, "/dev/null"], {
      env: baseEnv({ DATABASE_URL: url, ...extra }),
      encoding: "utf8",
      timeout: 60_000,
    });
    return { code: r.status, out: r.stdout.replace(/\r/g, "") };
  };
  const dev = onTerminal({});
  t.equal(dev.code, 0, dev.out);
  t.match(dev.out, /^\d\d:\d\d:\d\d\.\d{3} .*INFO.* migrations applied$/m, "a human line");
  t.notMatch(dev.out, /"level":/, "no JSON on a terminal");

  const prod = onTerminal({ NODE_ENV: "production" });
  t.equal(prod.code, 0, prod.out);
  t.match(prod.out, /"msg":"migrations applied"/, "JSON in production, terminal or not");

  const piped = await runCli(t, ["migrate"], baseEnv({ DATABASE_URL: url }));
  t.ok(
    piped.logs.some((l) => l.msg === "migrations applied"),
    "JSON when stdout is not a terminal",
  );
});
