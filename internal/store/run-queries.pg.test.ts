import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { formatRunsTable } from "./format-runs.js";
import { commitPage } from "./offers.js";
import { lastSuccesses, listRuns } from "./run-queries.js";
import { closeRun, startRun } from "./runs.js";

const OWNER = { hostname: "host-a", pid: 42, bootId: "b1" };

t.test("listRuns, lastSuccesses and the runs table", async (t) => {
  const pool = testPool(t, await createTestDatabase(t));
  const client = await pool.connect();
  t.teardown(() => client.release());

  const start = async (supplier: string, startedAt: string) => {
    const id = await startRun(client, {
      supplier,
      slotStart: new Date("2025-01-01T00:00:00Z"),
      trigger: "schedule",
      owner: OWNER,
    });
    await client.query("update ingestion_runs set started_at = $2 where id = $1", [id, startedAt]);
    return id;
  };
  const etmOld = await start("etm", "2025-01-01T00:01:00Z");
  await commitPage(client, {
    runId: etmOld,
    supplier: "etm",
    page: {
      seq: 1,
      offers: [{ sku: "A", name: "a", price: "1", currency: "EUR", stock: 1 }],
      rejects: [],
      httpAttempts: 1,
    },
  });
  await closeRun(client, { runId: etmOld, walkComplete: true, errorCode: null, errorMessage: null });
  await client.query(
    "update ingestion_runs set finished_at = '2025-01-01T00:02:05Z', started_at = '2025-01-01T00:01:00Z' where id = $1",
    [etmOld],
  );
  const etmFailed = await start("etm", "2025-01-01T06:01:00Z");
  await closeRun(client, {
    runId: etmFailed,
    walkComplete: false,
    errorCode: "HTTP_503",
    errorMessage: "supplier answered 503\nafter 5 attempts",
  });
  const iekRunning = await start("iek", "2025-01-01T07:00:00Z");

  const all = await listRuns(pool, { limit: 10 });
  t.same(
    all.map((r) => r.id),
    [iekRunning, etmFailed, etmOld],
    "newest first",
  );
  t.match(all[2], {
    supplier: "etm",
    trigger: "schedule",
    state: "succeeded",
    owner: OWNER,
    startedAt: new Date("2025-01-01T00:01:00Z"),
    finishedAt: new Date("2025-01-01T00:02:05Z"),
    counts: { pages: 1, recordsSeen: 1, recordsInserted: 1, recordsDelisted: 0 },
  });
  t.same(
    (await listRuns(pool, { supplier: "etm", limit: 1 })).map((r) => r.id),
    [etmFailed],
    "filtered and limited",
  );
  t.same(await listRuns(pool, { supplier: "nope", limit: 5 }), []);

  const last = await lastSuccesses(pool, ["etm", "iek", "systeme"]);
  t.same(
    [...last.entries()],
    [
      ["etm", new Date("2025-01-01T00:02:05Z")],
      ["iek", null],
      ["systeme", null],
    ],
  );
  t.equal((await lastSuccesses(pool, [])).size, 0);

  const table = formatRunsTable(all);
  const lines = table.trimEnd().split("\n");
  t.equal(lines.length, 4, "header and one line per run");
  t.match(lines[0], /^\s*ID\s+SUPPLIER\s+TRIGGER\s+STATE\s+STARTED\s+DURATION\s+PAGES\s+SEEN/);
  t.match(lines[1], /iek\s+schedule\s+running\s+2025-01-01 07:00:00Z\s+running/);
  t.match(lines[2], /etm\s+schedule\s+failed\s+.*HTTP_503: supplier answered 503 after 5 attempts$/);
  t.match(lines[3], /etm\s+schedule\s+succeeded\s+2025-01-01 00:01:00Z\s+1m05s\s+1\s+1\s+1\s+0/);
  t.equal(lines[0]?.indexOf("STATE"), lines[3]?.indexOf("succeeded"), "columns aligned");
  t.equal(formatRunsTable([]), "no runs recorded\n");
});
