// Issue 28, scenario 8: the lease holder's host drops off the network mid-walk (its
// link goes down; the database stays up). Real network namespaces: the holder daemon
// runs inside one (`ip netns exec`), joined to this host by a veth pair, and reaches
// PostgreSQL and the simulator on the host end's address; the other daemon runs here.
// The cut is `ip link set down` on the namespace's end, with blackhole routes for the
// subnet on both sides first (so nothing leaks to a default route and nothing answers:
// a silent peer, as a dead host is). Measured against docs/failure-modes.md, A holder
// cut off from the network:
// - the holder's tick ends `lease_lost` within the heartbeat period + the statement
//   deadline (10 s + 10 s with the default SUPPLIER_SYNC_LEASE_DEAD_PEER of 30 s);
// - the other daemon walks the supplier within the dead-peer bound (advisory: the
//   server drops the silent session, and its lock) or the TTL (table), plus one tick;
// - nothing of the cut-off run is committed after the takeover;
// - after the heal the holder keeps scheduling (no skipped overlap, no stuck tick).
// Needs root (ip netns) and the chaos runner's own PostgreSQL, which it restarts to
// listen on the veth address too, and back on loopback only at the end; skips with a
// message where namespaces cannot be created.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseDuration } from "../../internal/platform/duration.js";
import { startSimulator } from "../../internal/simulator/index.js";
import { baseEnv, type CliProcess, startCli, testLease } from "../helpers/cli.js";
import { createTestDatabase } from "../helpers/db.js";
import { connectorsDir, query, simConnector, until } from "../helpers/fixtures.js";
import { assertInvariants } from "./helpers/invariants.js";
import { startPostgres, stopPostgres } from "./helpers/pg-server.mjs";
import { scenario } from "./helpers/scenario.js";

const dataDir = process.env.CHAOS_PG_DATA;
const port = Number(process.env.CHAOS_PG_PORT);

/** SUPPLIER_SYNC_LEASE_DEAD_PEER's default, which the daemons run with. */
const DEAD_PEER_MS = 30_000;
/** min(10 s, D/3) + D/3. */
const HOLDER_BOUND_MS = 10_000 + 10_000;
const INTERVAL_MS = 5_000;
/** Scheduling and loaded-machine slack on top of each bound. */
const SLACK_MS = 5_000;

function ip(...args: string[]): string {
  return execFileSync("ip", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** The runs a daemon (by pid) started, oldest first, with their start in epoch ms. */
async function runsOf(url: string, pid: number) {
  return query<{ id: string; state: string; error_code: string | null; started: number }>(
    url,
    `select id::text, state, error_code, extract(epoch from started_at) * 1000 as started
       from ingestion_runs where (owner->>'pid')::int = $1 order by id`,
    [pid],
  );
}

scenario("8. holder network cut", { timeoutMs: 200_000 }, async (t) => {
  if (!dataDir || !port) {
    t.comment("skipped: needs the chaos runner's own PostgreSQL (node test/chaos/run.mjs)");
    return [];
  }
  const n = process.pid % 200;
  const ns = `ss-part-${process.pid}`;
  const hostEnd = `ssph${n}`;
  const nsEnd = `sspn${n}`;
  const subnet = `10.213.${n + 20}.0/24`;
  const hostAddr = `10.213.${n + 20}.1`;
  const nsAddr = `10.213.${n + 20}.2`;
  try {
    ip("netns", "add", ns);
  } catch (err) {
    const why = String((err as { stderr?: string }).stderr ?? err).trim();
    t.comment(`skipped: cannot create a network namespace here (ip netns add: ${why}); needs root`);
    return { invariants: [], note: `skipped: ip netns add failed (${why})` };
  }
  const hba = join(dataDir, "pg_hba.conf");
  const hbaBefore = readFileSync(hba, "utf8");
  const daemons: CliProcess[] = [];
  let rootBlackhole = false;
  try {
    ip("link", "add", hostEnd, "type", "veth", "peer", "name", nsEnd);
    ip("link", "set", nsEnd, "netns", ns);
    ip("addr", "add", `${hostAddr}/24`, "dev", hostEnd);
    ip("link", "set", hostEnd, "up");
    ip("netns", "exec", ns, "ip", "addr", "add", `${nsAddr}/24`, "dev", nsEnd);
    ip("netns", "exec", ns, "ip", "link", "set", nsEnd, "up");
    ip("netns", "exec", ns, "ip", "link", "set", "lo", "up");
    // When the link goes down, these catch the subnet: dropped without a word.
    ip("netns", "exec", ns, "ip", "route", "add", "blackhole", subnet, "metric", "4000");
    ip("route", "add", "blackhole", subnet, "metric", "4000");
    rootBlackhole = true;

    // PostgreSQL on the veth address too (and the subnet allowed in), every other scenario's loopback kept.
    writeFileSync(hba, `${hbaBefore}\nhost all all ${subnet} password\n`);
    await stopPostgres({ dataDir });
    await startPostgres({ dataDir, port, listen: `127.0.0.1,${hostAddr}` });

    const url = await createTestDatabase(t);
    const nsUrl = new URL(url);
    nsUrl.hostname = hostAddr;
    // 60 pages of 100 at 400 ms each: the holder is mid-walk for well over the bounds.
    const sim = await startSimulator({
      host: hostAddr,
      suppliers: { etm: { size: 6_000, pageSize: 100, faults: { latencyMs: 400 } } },
    });
    t.teardown(() => sim.close());
    const dir = connectorsDir({ etm: simConnector(sim.baseUrl("etm")) });
    const env = (databaseUrl: string) =>
      baseEnv({
        DATABASE_URL: databaseUrl,
        SUPPLIER_SYNC_SUPPLIERS: `etm:${INTERVAL_MS / 1000}s`,
        SUPPLIER_SYNC_CONNECTORS_DIR: dir,
        SUPPLIER_SYNC_RETRY_BACKOFF: "1s",
      });
    const holder = startCli(t, [], env(nsUrl.toString()), ["ip", "netns", "exec", ns]);
    daemons.push(holder);
    const holderPid = holder.child.pid as number;
    await until(
      async () =>
        (await query(url, "select 1 from ingestion_runs where pages >= 2 and state = 'running'")).length > 0,
      60_000,
      "the holder (in the namespace) walking, 2 pages committed",
    );
    const other = startCli(t, [], env(url));
    daemons.push(other);
    const otherPid = other.child.pid as number;
    await other.waitForLog((l) => l.outcome === "lease_busy", 30_000);
    const holderRun = (await runsOf(url, holderPid)).at(-1);
    t.ok(holderRun, "the holder's run is known");

    const cutAt = Date.now();
    ip("netns", "exec", ns, "ip", "link", "set", nsEnd, "down");
    t.comment(`cut at ${new Date(cutAt).toISOString()}`);

    const lost = await holder.waitForLog(
      (l) => l.outcome === "lease_lost" && (l.time as number) > cutAt,
      HOLDER_BOUND_MS + SLACK_MS + 10_000,
    );
    const holderEndMs = (lost.time as number) - cutAt;
    t.ok(
      holderEndMs <= HOLDER_BOUND_MS + SLACK_MS,
      `the holder's tick ended lease_lost ${holderEndMs} ms after the cut (bound ${HOLDER_BOUND_MS} ms + ${SLACK_MS} ms slack)`,
    );
    t.equal(holder.child.exitCode, null, "the cut-off holder is still running");

    const { lease, ttl } = testLease();
    // Advisory: PostgreSQL drops the silent session (and its lock) within the dead-peer
    // bound; table: the lease row expires after the TTL (a step's row lock ends with the
    // holder's transaction, idle_in_transaction_session_timeout = TTL). Then one tick.
    const ttlMs = parseDuration(ttl ?? "60s") ?? 60_000;
    const takeoverBound = (lease === "table" ? ttlMs : DEAD_PEER_MS) + INTERVAL_MS;
    const taken = await until(
      async () => (await runsOf(url, otherPid))[0],
      takeoverBound + SLACK_MS + 20_000,
      "the other daemon walking etm",
    );
    const takeoverMs = Math.round(taken.started - cutAt);
    t.ok(
      takeoverMs <= takeoverBound + SLACK_MS,
      `the other daemon took etm over ${takeoverMs} ms after the cut (${lease} lease${ttl ? `, ttl ${ttl}` : ""}; bound ${takeoverBound} ms + ${SLACK_MS} ms slack)`,
    );

    // Fencing: not one step of the cut-off run committed after the takeover.
    const late = await query(
      url,
      `select seq, state, finished_at from ingestion_run_steps
        where run_id = $1 and coalesce(finished_at, started_at) >= to_timestamp($2 / 1000.0)`,
      [holderRun?.id, taken.started],
    );
    t.same(late, [], "nothing of the cut-off run written after the takeover");

    const healAt = Date.now();
    ip("netns", "exec", ns, "ip", "link", "set", nsEnd, "up");
    const after = await holder.waitForLog(
      (l) => typeof l.outcome === "string" && (l.time as number) > healAt,
      INTERVAL_MS * 2 + SLACK_MS + 20_000,
    );
    t.ok(
      true,
      `after the heal the holder ticked again (${String(after.outcome)}) ${(after.time as number) - healAt} ms later`,
    );
    const skipped = holder
      .logs()
      .filter(
        (l) =>
          (l.time as number) > (lost.time as number) && /previous tick has not completed/.test(String(l.msg)),
      );
    t.same(skipped, [], "no tick skipped as overlapping after the lost one: it did not hang");
    t.equal(holder.child.exitCode, null, "the holder survived the partition");
    const closed = (await runsOf(url, holderPid)).find((r) => r.id === holderRun?.id);
    t.not(closed?.state, "succeeded", `the cut-off run closed ${closed?.state}/${closed?.error_code}`);
    t.match(String(closed?.error_code), /^(LEASE_LOST|INTERRUPTED)$/);

    for (const d of daemons) d.child.kill("SIGTERM");
    for (const d of daemons) await d.exited(30_000);
    const invariants = await assertInvariants(t, {
      url,
      sim,
      suppliers: [{ name: "etm", intervalMs: INTERVAL_MS }],
    });
    return {
      invariants: [...invariants, "a cut-off holder frees its supplier and ends its tick within bounds"],
      note: `holder tick ended ${(holderEndMs / 1000).toFixed(1)} s after the cut (bound ${HOLDER_BOUND_MS / 1000}); takeover ${(takeoverMs / 1000).toFixed(1)} s (bound ${takeoverBound / 1000})`,
    };
  } finally {
    for (const d of daemons) if (d.child.exitCode === null) d.child.kill("SIGKILL");
    try {
      ip("netns", "del", ns);
    } catch (err) {
      t.comment(`cleanup: ip netns del ${ns}: ${err}`);
    }
    if (rootBlackhole) {
      try {
        ip("route", "del", "blackhole", subnet, "metric", "4000");
      } catch (err) {
        t.comment(`cleanup: blackhole route: ${err}`);
      }
    }
    try {
      ip("link", "del", hostEnd);
    } catch {
      // Gone with the namespace (a veth pair dies with either end).
    }
    writeFileSync(hba, hbaBefore);
    await stopPostgres({ dataDir }).catch(() => {});
    await startPostgres({ dataDir, port });
  }
});
