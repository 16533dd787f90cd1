/**
 * The console's pages at the widths operators use (1280 and 1920 px) in a real
 * browser (Chromium via playwright-core) against the real loopback server and a real
 * database: no page scrolls sideways, the supplier page's charts are drawn, its
 * filter form and pager work without JavaScript, the run page links to the supplier
 * and to the previous/next run, and no resource but the pages is requested.
 *
 * Set CONSOLE_SCREENSHOT_DIR to keep the screenshots (docs/screenshots/*.png, shown in
 * docs/operations.md, come from here: `CONSOLE_SCREENSHOT_DIR=docs/screenshots`).
 */
import { copyFileSync, mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import t, { type Test } from "tap";
import { createTestDatabase, testPool } from "../../../test/helpers/db.js";
import type { RunState, RunTrigger } from "../../ingestion/ports.js";
import { createMetrics } from "../../observability/metrics.js";
import { ManualClock } from "../../platform/clock.js";
import { SecretRegistry } from "../../platform/redact.js";
import { createHealthServer } from "../server.js";
import { captureLogger, type Teardown } from "../test-support.js";
import { chromiumMissing, openBrowser } from "./browser-support.js";
import { HOSTILE_NAME, insertRun, type Scene, seedScene } from "./test-support.js";

const NOW = Date.parse("2026-03-01T12:00:00Z");
const HOUR = 3_600_000;
const WIDTHS = [1280, 1920] as const;

const missing = chromiumMissing();
if (missing) {
  t.comment(`browser tests skipped: ${missing}`);
  t.pass("skipped: no chromium", { skip: missing });
} else {
  t.test("the console at 1280 and 1920 px", async (t) => {
    const { origin, scene } = await startConsole(t);
    const context = await openBrowser(t);
    const requested: string[] = [];
    context.on("request", (r) => {
      if (!(r.url().startsWith(`${origin}/`) && r.resourceType() === "document")) requested.push(r.url());
    });
    const page = await context.newPage();
    for (const width of WIDTHS) {
      await page.setViewportSize({ width, height: 900 });

      await page.goto(`${origin}/`);
      await noSideways(t, page, `/ at ${width}`);
      t.ok(await page.locator('tr[data-supplier="etm"] svg.strip').isVisible(), `strip visible at ${width}`);
      await screenshot(page, `overview-${width}.png`);

      await page.goto(`${origin}/suppliers/etm`);
      await noSideways(t, page, `/suppliers/etm at ${width}`);
      for (const chart of ["#chart-duration", "#chart-changed", "#chart-freshness"]) {
        t.ok(await page.locator(`${chart} svg`).isVisible(), `${chart} at ${width}`);
      }
      t.equal(await page.locator("#runs tbody tr").count(), 50, "a page of 50 runs");
      await screenshot(page, `supplier-${width}.png`);

      await page.goto(`${origin}/runs/${scene.etmLastRun}`);
      await noSideways(t, page, `/runs/<id> at ${width}`);
      await screenshot(page, `run-${width}.png`);
    }
    t.same(requested, [], "nothing requested but the pages");
  });

  t.test("without JavaScript: filter, page and follow links", async (t) => {
    const { origin, scene } = await startConsole(t);
    const context = await openBrowser(t, { javaScriptEnabled: false });
    const page = await context.newPage();
    await page.goto(`${origin}/`);
    await page.locator('tr[data-supplier="etm"] a[data-link="supplier"]').click();
    await page.waitForURL(`${origin}/suppliers/etm`);

    await page.locator('select[name="state"]').selectOption("failed");
    await page.locator("#filters button").click();
    await page.waitForURL(/state=failed/);
    const states = await page.locator("#runs tbody tr .badge").allInnerTexts();
    t.ok(states.length > 0, "failed runs listed");
    t.same([...new Set(states)], ["failed"], "only failed runs");

    await page.goto(`${origin}/suppliers/etm`);
    await page.locator('a[data-page="older"]').first().click();
    await page.waitForURL(/before=/);
    t.ok((await page.locator("#runs tbody tr").count()) > 0, "the older page lists runs");
    await page.locator('a[data-page="newer"]').first().click();
    await page.waitForURL(/after=|\/suppliers\/etm$/);
    t.equal(await page.locator("#runs tbody tr").count(), 50, "back to a full page");

    await page.goto(`${origin}/runs/${scene.etmLastRun}`);
    await page.locator('a[data-link="previous"]').click();
    await page.waitForURL(/\/runs\/\d+$/);
    t.not(page.url(), `${origin}/runs/${scene.etmLastRun}`, "the previous run's page");
    await page.locator('a[data-link="next"]').click();
    await page.waitForURL(`${origin}/runs/${scene.etmLastRun}`);
    await page.locator('nav.crumbs a[data-link="supplier"]').click();
    await page.waitForURL(`${origin}/suppliers/etm`);
  });
}

async function noSideways(t: Test, page: Page, what: string): Promise<void> {
  const { scroll, client } = (await page.evaluate(
    "({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth })",
  )) as { scroll: number; client: number };
  t.ok(scroll <= client, `${what}: no horizontal scrolling (content ${scroll} px, window ${client} px)`);
}

/** The scene of the console tests, with a longer etm history, a pause, held items and a hostile message. */
async function startConsole(t: Teardown): Promise<{ origin: string; scene: Scene }> {
  const db = testPool(t, await createTestDatabase(t));
  // Older runs first, so ids follow start times as they do in production.
  const states: RunState[] = ["succeeded", "succeeded", "succeeded", "partial", "succeeded", "failed"];
  const triggers: RunTrigger[] = ["schedule", "schedule", "retry", "forced"];
  for (let i = 0; i < 80; i++) {
    const startedAt = new Date(NOW - 400 * HOUR - i * 6 * HOUR);
    const state = states[i % states.length] as RunState;
    await insertRun(db, {
      supplier: "etm",
      state,
      trigger: triggers[i % triggers.length] as RunTrigger,
      startedAt,
      durationMs: 30_000 + ((i * 7919) % 50) * 1_000,
      errorCode: state === "failed" ? "HTTP_503" : state === "partial" ? "DEADLINE" : null,
      errorMessage: state === "failed" ? `GET /v1/offers answered 503 ${HOSTILE_NAME}` : null,
      pages: 3,
      seen: 250,
      inserted: i % 4,
      updated: (i * 13) % 40,
      unchanged: 200,
    });
  }
  const scene = await seedScene(db, NOW);
  await db.query(
    `insert into ingestion_held (run_id, supplier, sku, kind, reason, stored, proposed)
     values ($1, 'etm', 'ETM-1042', 'price_jump', 'price rose 12.0 × (from 10.00 to 120.00)',
             '{"price":"10.00","currency":"RUB"}', '{"price":"120.00","currency":"RUB"}')`,
    [scene.etmLastRun],
  );
  await db.query(
    "insert into ingestion_controls (supplier, paused_at, paused_by, pause_reason) values ('iek', $1, 'cli', 'supplier maintenance')",
    [new Date(NOW - 2 * HOUR)],
  );
  // The widest row an overview must still fit: a long name, big counts, a long error code.
  const wide = "rs24-electrotechnical-wholesale-moscow";
  scene.suppliers.push({ name: wide, intervalMs: 24 * HOUR, enabled: true });
  await insertRun(db, {
    supplier: wide,
    state: "failed",
    trigger: "tick_once",
    startedAt: new Date(NOW - 3 * HOUR),
    durationMs: 3 * HOUR + 17 * 60_000,
    errorCode: "CONNECTOR_MISSING",
    pages: 12_345,
    seen: 1_234_567,
    inserted: 1_234_567,
    updated: 234_567,
    unchanged: 1_000_000,
    rejected: 12_345,
    delisted: 123_456,
  });
  const server = createHealthServer({
    secrets: new SecretRegistry(),
    host: "127.0.0.1",
    port: 0,
    db,
    suppliers: scene.suppliers,
    metrics: createMetrics({ processMetrics: false }),
    log: captureLogger().log,
    clock: new ManualClock(NOW),
    instance: { owner: { hostname: "worker-a", pid: 4242, bootId: "6f1c2d" }, version: "0.1.0" },
  });
  t.teardown(() => server.stop());
  const { port } = await server.start();
  return { origin: `http://127.0.0.1:${port}`, scene };
}

const shots = mkdtempSync(join(tmpdir(), "ss-console-shots-"));

async function screenshot(page: Page, name: string): Promise<void> {
  const path = join(shots, name);
  await page.screenshot({ path, fullPage: true });
  const keep = process.env.CONSOLE_SCREENSHOT_DIR;
  if (keep) {
    mkdirSync(keep, { recursive: true });
    copyFileSync(path, join(keep, name));
  }
}
