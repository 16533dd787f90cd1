// The session probe against a direct PostgreSQL and a real PgBouncer in both pool modes.
import t from "tap";
import { createTestDatabase, testPool } from "../../test/helpers/db.js";
import { pgbouncerMissing, startPgBouncer } from "../../test/helpers/pgbouncer.js";
import { InfraError } from "../platform/errors.js";
import { assertSessionPinning, probeSessionPinning } from "./probe.js";

t.test("a direct connection is session-pinned", async (t) => {
  const pool = testPool(t, await createTestDatabase(t), 2);
  t.same(await probeSessionPinning(pool), { pinned: true });
  await assertSessionPinning(pool);
  t.equal(pool.totalCount - pool.idleCount, 0, "probe connections returned");
});

t.test("through PgBouncer", { skip: pgbouncerMissing() }, async (t) => {
  const url = await createTestDatabase(t);
  t.test("pool_mode = session: pinned", async (t) => {
    const bouncer = await startPgBouncer(t, { poolMode: "session" });
    const pool = testPool(t, bouncer.url(url), 2);
    t.same(await probeSessionPinning(pool), { pinned: true });
  });
  t.test(
    "pool_mode = transaction: not pinned, and the error names the cause and both ways out",
    async (t) => {
      const bouncer = await startPgBouncer(t, { poolMode: "transaction" });
      const pool = testPool(t, bouncer.url(url), 2);
      const probe = await probeSessionPinning(pool);
      t.equal(probe.pinned, false, JSON.stringify(probe));
      const err = await assertSessionPinning(pool).then(
        () => undefined,
        (e: unknown) => e,
      );
      t.type(err, InfraError, "exit 3 class");
      const message = (err as Error).message;
      t.match(message, /transaction pooler/);
      t.match(message, /SUPPLIER_SYNC_LEASE=table/);
      t.match(message, /session-pooled/);
    },
  );
  t.test("pool_mode = transaction with a warm pool of several servers: still caught", async (t) => {
    const bouncer = await startPgBouncer(t, { poolMode: "transaction" });
    const pool = testPool(t, bouncer.url(url), 8);
    // Warm several server sessions at once, so the probe does not start from one.
    const clients = await Promise.all(Array.from({ length: 6 }, () => pool.connect()));
    await Promise.all(clients.map((c) => c.query("begin").then(() => c.query("select pg_sleep(0.05)"))));
    await Promise.all(clients.map((c) => c.query("commit")));
    for (const c of clients) c.release();
    for (let i = 0; i < 5; i++) t.equal((await probeSessionPinning(pool)).pinned, false, `probe ${i + 1}`);
  });
});
