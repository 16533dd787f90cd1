/**
 * Console actions in a real browser (Chromium via playwright-core), JavaScript off so the
 * forms must work on their own: log in with the admin token, pause a supplier, approve
 * the item a guard held (a tenfold price jump, held by a real tick with guards on).
 */
import t from "tap";
import { createTestDatabase, testPool } from "../../../test/helpers/db.js";
import { forcedTick, tickDeps } from "../../../test/helpers/tick.js";
import { pauseSupplier, readControls, requestTrigger, resumeSupplier } from "../../control/controls.js";
import type { Connector, GuardSettings, Offer } from "../../ingestion/ports.js";
import { acquireLease } from "../../lease/lease.js";
import { createMetrics } from "../../observability/metrics.js";
import { systemClock } from "../../platform/clock.js";
import { SecretRegistry } from "../../platform/redact.js";
import { decideHeld } from "../../store/held.js";
import { inTransaction } from "../../store/queryable.js";
import { createHealthServer } from "../server.js";
import { captureLogger } from "../test-support.js";
import { chromiumMissing, openBrowser } from "./browser-support.js";

const TOKEN = "browser-admin-token-0123456789";
const GUARDS: GuardSettings = {
  maxDelistRatio: 0.25,
  minDelistCount: 20,
  priceJumpFactor: 10,
  currencyChange: true,
};

const oneStep = (price: string): Connector => ({
  async *walk() {
    const offers: Offer[] = [
      { sku: "A-1", name: "cable", price, currency: "EUR", stock: 3 },
      { sku: "A-2", name: "switch", price: "5.00", currency: "EUR", stock: 1 },
    ];
    yield { seq: 1, offers, rejects: [], httpAttempts: 1 };
  },
  async close() {},
});

const missing = chromiumMissing();
if (missing) {
  t.pass("skipped: no chromium", { skip: missing });
} else {
  t.test("log in, pause a supplier and approve a held item, JavaScript off", async (t) => {
    const db = testPool(t, await createTestDatabase(t), 6);
    const log = captureLogger().log;
    const deps = tickDeps(db);
    await forcedTick(deps, "etm", oneStep("10.00"), GUARDS);
    const held = await forcedTick(deps, "etm", oneStep("100.00"), GUARDS);
    t.equal(held.errorCode, "GUARD", "the tenfold price is held");
    const suppliers = [{ name: "etm", intervalMs: 3_600_000, enabled: true }];
    const server = createHealthServer({
      secrets: new SecretRegistry(),
      host: "127.0.0.1",
      port: 0,
      db,
      suppliers,
      metrics: createMetrics({ processMetrics: false }),
      log,
      clock: systemClock,
      freshnessCacheMs: 0,
      admin: {
        token: TOKEN,
        actions: {
          pause: (supplier, by) => pauseSupplier(db, { supplier, by }),
          resume: (supplier) => resumeSupplier(db, supplier),
          trigger: (supplier, by) => requestTrigger(db, { supplier, by }),
          decide: async (runId, decision, by) => {
            const lease = await acquireLease(db, "etm", log);
            if (!lease) throw new Error("lease busy");
            try {
              return await inTransaction(lease.client, (tx) => decideHeld(tx, { runId, decision, by }));
            } finally {
              await lease.release();
            }
          },
        },
      },
    });
    t.teardown(() => server.stop());
    const { port } = await server.start();
    const origin = `http://127.0.0.1:${port}`;

    const context = await openBrowser(t, { javaScriptEnabled: false });
    const page = await context.newPage();
    await page.goto(`${origin}/`);
    t.equal(await page.locator('[data-action="pause"]').count(), 0, "no actions before logging in");
    await page.goto(`${origin}/login`);
    await page.fill('input[name="token"]', "wrong-token-wrong-token");
    await page.click('button[type="submit"]');
    t.match(await page.locator("[data-login-error]").textContent(), /Wrong token/);
    await page.fill('input[name="token"]', TOKEN);
    await page.click('button[type="submit"]');
    await page.waitForURL(`${origin}/`);
    const cookie = (await context.cookies()).find((c) => c.name === "ss_session");
    t.equal(cookie?.httpOnly, true);
    t.equal(cookie?.sameSite, "Strict");

    await page.click('tr[data-supplier="etm"] [data-action="pause"]');
    await page.waitForURL(`${origin}/`);
    const status = page.locator('tr[data-supplier="etm"] [data-status]');
    t.equal(await status.getAttribute("data-status"), "paused", "the supplier shows paused");
    t.match(await status.textContent(), /^paused1 held$/, "with the link to its held run");
    t.equal((await readControls(db)).paused.get("etm")?.pausedBy, "console");

    await page.goto(`${origin}/runs/${held.runId}`);
    await page.click('#held-actions [data-action="approve"]');
    await page.waitForURL(`${origin}/runs/${held.runId}`);
    const { rows } = await db.query("select state, decided_by from ingestion_held where run_id = $1", [
      held.runId,
    ]);
    t.same(rows, [{ state: "approved", decided_by: "console" }], "the held item approved by the console");
    const { rows: offer } = await db.query("select price::text from supplier_offers where sku = 'A-1'");
    t.equal(offer[0]?.price, "100.00", "the held price applied");
  });
}
