/**
 * The console as a person sees it, in a real browser (Chromium via playwright-core)
 * against the real loopback server and a real database: each supplier's row and
 * status, a failed run's error code, clicking through to a run's steps and rejects,
 * hostile markup in a reject shown as text with nothing run (with the CSP and, to
 * prove the escaping alone, without it), no resource loaded but the pages
 * themselves, and all of it with JavaScript disabled too.
 *
 * Set CONSOLE_SCREENSHOT_DIR to keep the screenshots (docs/console-*.png, shown in README.md and docs/operations.md, come from here).
 */
import { copyFileSync, mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext, Locator, Page } from "playwright-core";
import t, { type Test } from "tap";
import { createTestDatabase, testPool } from "../../../test/helpers/db.js";
import { createMetrics } from "../../observability/metrics.js";
import { ManualClock } from "../../platform/clock.js";
import { SecretRegistry } from "../../platform/redact.js";
import { createHealthServer } from "../server.js";
import { captureLogger, type Teardown } from "../test-support.js";
import { chromiumMissing, openBrowser } from "./browser-support.js";
import { type Scene, seedScene } from "./test-support.js";

const NOW = Date.parse("2026-03-01T12:00:00Z");
const CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

const missing = chromiumMissing();
if (missing) {
  t.comment(`browser tests skipped: ${missing}`);
  t.pass("skipped: no chromium", { skip: missing });
} else {
  t.test("the console in a browser", async (t) => {
    const { origin, scene } = await startConsole(t);

    t.test("with JavaScript: rows, statuses, click-through, hostile payload inert", async (t) => {
      const context = await openBrowser(t);
      const watch = watchRequests(context, origin);
      const page = await context.newPage();
      const consoleErrors: string[] = [];
      page.on("console", (m) => {
        if (m.type() === "error") consoleErrors.push(m.text());
      });
      const res = await page.goto(`${origin}/`);
      t.equal(res?.status(), 200);
      t.equal(res?.headers()["content-security-policy"], CSP);
      t.equal(res?.headers()["x-content-type-options"], "nosniff");
      await checkOverview(t, page, scene);
      await screenshot(page, "console-overview.png");

      await page.locator('tr[data-supplier="etm"] [data-last-run] a').click();
      await page.waitForURL(`${origin}/runs/${scene.etmLastRun}`);
      await checkRunPage(t, page);
      t.equal(await page.evaluate("typeof window.__pwned"), "undefined");
      await screenshot(page, "console-run.png");

      // The strip's right-most mark of iek is its failed run.
      await page.goto(`${origin}/`);
      await page.locator('tr[data-supplier="iek"] svg.strip a').last().click();
      await page.waitForURL(`${origin}/runs/${scene.iekFailedRun}`);
      t.match(await seen(page.locator("#run")), "HTTP_503");
      t.match(await seen(page.locator("#steps")), "HTTP_503");

      t.same(consoleErrors, [], "no console error (no CSP violation either)");
      t.same(watch.foreign(), [], "no request but the console's own pages");
      t.ok(watch.all().length >= 4, "the requests were watched");
    });

    t.test("without the CSP, the escaping alone keeps the payload inert", async (t) => {
      const context = await openBrowser(t, { bypassCSP: true });
      const page = await context.newPage();
      await page.goto(`${origin}/runs/${scene.etmLastRun}`);
      await checkRunPage(t, page);
      t.equal(await page.evaluate("typeof window.__pwned"), "undefined");
      t.equal(await page.evaluate("document.querySelectorAll('script, img, iframe, object').length"), 0);
    });

    t.test("with JavaScript disabled", async (t) => {
      const context = await openBrowser(t, { javaScriptEnabled: false });
      const watch = watchRequests(context, origin);
      const page = await context.newPage();
      await page.goto(`${origin}/`);
      await checkOverview(t, page, scene);
      await page.locator('tr[data-supplier="iek"] [data-last-run] a').click();
      await page.waitForURL(`${origin}/runs/${scene.iekFailedRun}`);
      t.match(await seen(page.locator("#steps")), "HTTP_503");
      await page.locator('a[href="/"]').first().click();
      await page.waitForURL(`${origin}/`);
      await page.locator('tr[data-supplier="etm"] svg.strip a').last().click();
      await page.waitForURL(`${origin}/runs/${scene.etmLastRun}`);
      await checkRunPage(t, page);
      const notFound = await page.goto(`${origin}/runs/12345678`);
      t.equal(notFound?.status(), 404);
      t.match(await seen(page.locator("main")), "No run has id 12345678");
      t.same(watch.foreign(), []);
    });
  });
}

async function startConsole(t: Teardown): Promise<{ origin: string; scene: Scene }> {
  const db = testPool(t, await createTestDatabase(t));
  const scene = await seedScene(db, NOW);
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

/** Every request the browser makes; `foreign()` lists those that are not one of the console's pages. */
function watchRequests(context: BrowserContext, origin: string) {
  const seen: { url: string; type: string }[] = [];
  context.on("request", (r) => seen.push({ url: r.url(), type: r.resourceType() }));
  return {
    all: () => seen,
    foreign: () => seen.filter((r) => !(r.url.startsWith(`${origin}/`) && r.type === "document")),
  };
}

/** The text a person sees in `locator` (rendered, as `innerText`; `textContent` would include hidden text). */
function seen(locator: Locator): Promise<string> {
  // biome-ignore lint/performance/useDomNodeTextContent: the rendered text is what these tests check
  return locator.innerText();
}

async function checkOverview(t: Test, page: Page, scene: Scene): Promise<void> {
  const status = (s: string) => seen(page.locator(`tr[data-supplier="${s}"] [data-status]`));
  t.equal(await status("etm"), "ok", "etm is ok");
  t.equal(await status("iek"), "stale", "iek is stale");
  t.equal(await status("systeme"), "none", "systeme never succeeded");
  t.equal(await page.locator('tr[data-supplier="yml"]').count(), 0, "disabled yml is not shown");
  t.equal(await page.locator("#suppliers tbody tr").count(), 3);
  t.equal(
    (await seen(page.locator('tr[data-supplier="iek"] [data-error-code]'))).trim(),
    "HTTP_503",
    "the failed run's error code",
  );
  const etm = await seen(page.locator('tr[data-supplier="etm"]'));
  t.match(etm, `#${scene.etmLastRun}`);
  t.match(etm, "succeeded");
  t.match(etm, "420ms");
  t.match(etm, "59m59s / 12h");
  t.equal(await page.locator('tr[data-supplier="etm"] svg.strip a').count(), 30, "30 runs in the strip");
  t.match(await seen(page.locator('tr[data-supplier="systeme"]')), "no run yet");
  t.match(await seen(page.locator("header")), "worker-a");
  t.ok(await page.locator('tr[data-supplier="etm"] svg.strip').isVisible(), "the strip is drawn");
}

async function checkRunPage(t: Test, page: Page): Promise<void> {
  t.equal(await page.locator("#steps tbody tr").count(), 3, "three steps");
  t.match(await seen(page.locator('#steps tr[data-seq="2"]')), /succeeded\s+100\s+2/);
  t.equal(await page.locator("#rejects .reject").count(), 2, "two rejects");
  const hostile = await seen(page.locator("#rejects .reject pre").first());
  t.match(hostile, "<script>window.__pwned='script'</script>", "the script markup is shown as text");
  t.match(hostile, "<img src=x onerror=window.__pwned='img'>", "the img markup is shown as text");
  t.match(await seen(page.locator("#rejects")), "price: not a number");
  t.equal(await page.locator("script").count(), 0, "no script element");
  t.equal(await page.locator("img").count(), 0, "no img element");
  t.match(await seen(page.locator('[data-column="owner"]')), "worker-a");
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
