// The validators of docs/conditional-requests.md in a real PostgreSQL: only a succeeded run's are read
// back, and a 304 close succeeds with the listed offers unchanged and nothing delisted.
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { commitPage } from "./offers.js";
import { closeRun, startRun } from "./runs.js";
import { closeRunNotModified, lastRunValidators, saveRunValidators } from "./validators.js";

const OWNER = { hostname: "test-host", pid: 1, bootId: "boot" };

t.test("only the last succeeded run's validators are reused", async (t) => {
  const pool = testPool(t, await createTestDatabase(t));
  const client = await pool.connect();
  t.teardown(() => client.release());
  const start = (slot: string) =>
    startRun(client, { supplier: "acme", slotStart: new Date(slot), trigger: "forced", owner: OWNER });
  t.equal(await lastRunValidators(client, "acme"), null, "no run yet");

  const ok = await start("2026-01-01T00:00:00Z");
  await commitPage(client, {
    runId: ok,
    supplier: "acme",
    page: {
      seq: 1,
      offers: [{ sku: "A", name: null, price: "1.00", currency: "EUR", stock: 1 }],
      rejects: [],
      httpAttempts: 1,
    },
  });
  await saveRunValidators(client, ok, { etag: '"v1"', lastModified: "Thu, 01 Jan 2026 00:00:00 GMT" });
  t.match(await closeRun(client, { runId: ok, walkComplete: true, errorCode: null, errorMessage: null }), {
    state: "succeeded",
  });

  // Later runs that did not succeed, with validators of their own, are never read back.
  for (const [slot, code] of [
    ["2026-01-02T00:00:00Z", "CONTRACT"],
    ["2026-01-03T00:00:00Z", "DEADLINE"],
  ] as const) {
    const id = await start(slot);
    await saveRunValidators(client, id, { etag: `"${code}"`, lastModified: null });
    t.match(await closeRun(client, { runId: id, walkComplete: false, errorCode: code, errorMessage: code }), {
      state: "failed",
    });
  }
  const running = await start("2026-01-04T00:00:00Z");
  await saveRunValidators(client, running, { etag: '"running"', lastModified: null });
  t.same(await lastRunValidators(client, "acme"), {
    etag: '"v1"',
    lastModified: "Thu, 01 Jan 2026 00:00:00 GMT",
  });
  t.equal(await lastRunValidators(client, "other"), null, "per supplier");

  const closed = await closeRunNotModified(client, {
    runId: running,
    validators: { etag: '"v1"', lastModified: null },
  });
  t.match(closed, { state: "succeeded", counts: { pages: 0, recordsUnchanged: 1, recordsDelisted: 0 } });
  t.same(await lastRunValidators(client, "acme"), { etag: '"v1"', lastModified: null }, "the 304 run's now");
  t.equal(
    await closeRunNotModified(client, { runId: running, validators: { etag: null, lastModified: null } }),
    null,
    "a closed run is not closed twice",
  );
  const { rows } = await client.query("select delisted_at from supplier_offers where supplier = 'acme'");
  t.same(rows, [{ delisted_at: null }]);
});
