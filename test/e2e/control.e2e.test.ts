// docs/operations.md, Pausing and triggering, with real daemons and the real CLI: a trigger is served
// once, by one of three replicas, within 5 s; a pause reaches every replica (readiness, metrics), makes
// a walk in progress stop at its step boundary (PAUSED, nothing delisted) and holds triggers until
// resume; the CLI names an unknown supplier (exit 2).
import pg from "pg";
import t from "tap";
import { pauseSupplier, resumeSupplier } from "../../internal/control/controls.js";
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, type CliProcess, runCli, startCli } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector, until } from "../helpers/fixtures.js";

interface RunRow {
  id: string;
  trigger: string;
  state: string;
  error_code: string | null;
  pages: number;
}

t.test("three daemons: trigger, pause mid-walk, trigger while paused, resume", async (t) => {
  const url = await createTestDatabase(t);
  const sim = await startSimulator({
    suppliers: { acme: { size: 3_000, pageSize: 100 }, beta: { size: 10 } },
  });
  t.teardown(() => sim.close());
  // beta is only a witness: its pause and resume show when each replica's watcher has polled.
  const dir = connectorsDir({
    acme: simConnector(sim.baseUrl("acme"), { timeouts: { runMs: 120_000 } }),
    beta: simConnector(sim.baseUrl("beta")),
  });
  const env = baseEnv({
    DATABASE_URL: url,
    SUPPLIER_SYNC_SUPPLIERS: "acme:1h,beta:1h",
    SUPPLIER_SYNC_CONNECTORS_DIR: dir,
  });
  const cliEnv = baseEnv({ DATABASE_URL: url });
  const daemons = [startCli(t, [], env), startCli(t, [], env), startCli(t, [], env)];
  const bases = await Promise.all(
    daemons.map(async (d) => {
      const l = await d.waitForLog((l) => l.msg === "health and metrics server listening", 30_000);
      return `http://${String(l.addr)}`;
    }),
  );
  const runs = () =>
    query<RunRow>(
      url,
      "select id::text, trigger, state, error_code, pages from ingestion_runs where supplier = 'acme' order by id",
    );
  await until(async () => (await runs()).some((r) => r.state === "succeeded"), 30_000, "the catch-up walk");

  // Trigger: served once within 5 s, by one replica, as a manual run.
  const trig = await runCli(t, ["trigger", "acme"], cliEnv);
  t.equal(trig.code, 0, trig.stderr);
  t.match(trig.stdout, /trigger request \d+ for acme recorded/);
  const manual = await until(
    async () => (await runs()).find((r) => r.trigger === "manual" && r.state === "succeeded"),
    5_000,
    "the manual walk",
  );
  const [lag] = await query<{ ms: number }>(
    url,
    "select (extract(epoch from r.started_at - g.requested_at) * 1000)::int as ms from ingestion_triggers g join ingestion_runs r on r.id = g.run_id",
  );
  t.ok((lag?.ms ?? 99_999) < 5_000, `the manual walk started ${lag?.ms} ms after the request`);
  const served = await query<{ run_id: string; taken_at: Date | null }>(
    url,
    "select run_id::text, taken_at from ingestion_triggers",
  );
  t.same(
    served.map((r) => r.run_id),
    [manual.id],
    "the request names the one run that served it",
  );

  // Pause while a walk is in progress: slow pages, trigger, wait for its first page, pause.
  sim.setFaults("acme", { latencyMs: 1_000 });
  await runCli(t, ["trigger", "acme"], cliEnv);
  const walking = await until(
    async () => (await runs()).find((r) => r.trigger === "manual" && r.state === "running" && r.pages >= 1),
    10_000,
    "a manual walk past its first page",
  );
  const pause = await runCli(t, ["pause", "acme", "--reason", "API migration"], cliEnv);
  t.equal(pause.code, 0, pause.stderr);
  t.match(pause.stdout, /paused acme at .* \(API migration\)/);
  const stopped = await until(
    async () => (await runs()).find((r) => r.id === walking.id && r.state !== "running"),
    20_000,
    "the walk to stop",
  );
  t.match(stopped, { state: "partial", error_code: "PAUSED" }, "stopped at a step boundary, PAUSED");
  t.ok(stopped.pages < 30, `stopped after ${stopped.pages} of 30 pages`);
  const delisted = await query<{ n: number }>(
    url,
    "select count(*)::int as n from supplier_offers where delisted_at is not null",
  );
  t.equal(delisted[0]?.n, 0, "nothing delisted by the pause");

  // Every replica reports it.
  for (const base of bases) {
    const ready = await until(
      async () => {
        const r = await fetch(`${base}/readyz`);
        const body = (await r.json()) as { suppliers: Record<string, { status: string }> };
        return body.suppliers.acme?.status === "paused" ? r : null;
      },
      10_000,
      `${base}/readyz paused`,
    );
    t.equal(ready.status, 200, "paused is not a 503");
    const metrics = await (await fetch(`${base}/metrics`)).text();
    t.match(metrics, /ingestion_supplier_paused\{supplier="acme"\} 1/);
  }

  // A trigger while paused waits: nothing runs over three watcher polls of every replica.
  // A poll is seen by what it logs about beta, paused, resumed and paused again after the
  // request: each replica logs each change on its next poll, which also reads the request.
  sim.setFaults("acme", {});
  const waiting = await runCli(t, ["trigger", "acme"], cliEnv);
  t.match(waiting.stdout, /acme is paused: it waits for resume/);
  const before = (await runs()).length;
  const betaLines = (d: CliProcess, msg: string) =>
    d.logs().filter((l) => l.supplier === "beta" && String(l.msg).startsWith(msg)).length;
  const steps = [
    { command: "pause", msg: "supplier paused", lines: 1 },
    { command: "resume", msg: "supplier resumed", lines: 1 },
    { command: "pause", msg: "supplier paused", lines: 2 },
  ];
  const witness = new pg.Client({ connectionString: url });
  await witness.connect();
  try {
    for (const [i, { command, msg, lines }] of steps.entries()) {
      if (command === "pause") await pauseSupplier(witness, { supplier: "beta", by: "test" });
      else t.ok(await resumeSupplier(witness, "beta"), "beta resumed");
      await until(
        () => daemons.every((d) => betaLines(d, msg) >= lines),
        10_000,
        `watcher poll ${i + 1} after the request: every replica logging "${msg}" for beta`,
      );
    }
  } finally {
    await witness.end();
  }
  t.equal((await runs()).length, before, "no run while paused, over three watcher polls");
  const pending = await query<{ n: number }>(
    url,
    "select count(*)::int as n from ingestion_triggers where taken_at is null",
  );
  t.equal(pending[0]?.n, 1, "the request is still pending");

  // Resume: the waiting request is served.
  const resume = await runCli(t, ["resume", "acme"], cliEnv);
  t.equal(resume.code, 0, resume.stderr);
  t.match(resume.stdout, /resumed acme \(paused since .* by cli:/);
  await until(
    async () =>
      (
        await query<{ n: number }>(
          url,
          "select count(*)::int as n from ingestion_triggers where taken_at is null",
        )
      )[0]?.n === 0,
    10_000,
    "the waiting request to be served after resume",
  );
  const manualRuns = (await runs()).filter((r) => r.trigger === "manual");
  t.equal(manualRuns.length, 3, "three requests, three manual runs, none twice");
  const resumedMetrics = await until(
    async () => {
      const text = await (await fetch(`${bases[0]}/metrics`)).text();
      return /ingestion_supplier_paused\{supplier="acme"\} 0/.test(text) ? text : null;
    },
    10_000,
    "the gauge back at 0",
  );
  t.match(resumedMetrics, /ingestion_tick_attempt_total\{supplier="acme",outcome="paused"\}/);

  for (const d of daemons) d.child.kill("SIGTERM");
  for (const d of daemons) t.equal(await d.exited(30_000), 0);
});

t.test(
  "pause, resume and trigger need only DATABASE_URL and name an unknown supplier (exit 2)",
  async (t) => {
    const url = await createTestDatabase(t, { migrated: true });
    const env = baseEnv({ DATABASE_URL: url });
    for (const args of [
      ["pause", "nosuch"],
      ["resume", "nosuch"],
      ["trigger", "nosuch"],
    ]) {
      const r = await runCli(t, args, env);
      t.equal(r.code, 2, `${args.join(" ")}: exit 2`);
      t.match(r.stderr, /unknown supplier "nosuch"/);
    }
    const bad = await runCli(t, ["pause"], env);
    t.equal(bad.code, 2);
    t.match(bad.stderr, /pause needs a supplier NAME/);
    await query(url, "insert into ingestion_controls (supplier) values ('acme')");
    const ok = await runCli(t, ["resume", "acme"], env);
    t.equal(ok.code, 0, ok.stderr);
    t.match(ok.stdout, /acme was not paused: nothing to resume/);
  },
);
