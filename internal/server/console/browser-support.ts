/**
 * A real browser for the console's tests: Debian's Chromium driven by
 * playwright-core, headless, with a fresh profile per launch and the background
 * services that would try to reach the network switched off. Playwright never
 * downloads a browser here: it is given the system's executable.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium } from "playwright-core";

export const CHROMIUM_PATH = "/usr/bin/chromium";

/** Null when the browser can run here, else why not (the tests then skip, saying so). */
export function chromiumMissing(): string | null {
  return existsSync(CHROMIUM_PATH)
    ? null
    : `${CHROMIUM_PATH} not found: install Debian's chromium (apt-get install -y chromium; .ci/run does)`;
}

const ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-dev-shm-usage",
];

export interface Teardown {
  teardown(fn: () => unknown): void;
}

/** A browser context on its own fresh profile, closed (and the profile removed) on teardown. */
export async function openBrowser(
  t: Teardown,
  options: { javaScriptEnabled?: boolean; bypassCSP?: boolean } = {},
): Promise<BrowserContext> {
  const profile = mkdtempSync(join(tmpdir(), "ss-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: ARGS,
    javaScriptEnabled: options.javaScriptEnabled ?? true,
    bypassCSP: options.bypassCSP ?? false,
    viewport: { width: 1500, height: 900 },
    timeout: 60_000,
  });
  context.setDefaultTimeout(15_000);
  t.teardown(async () => {
    await context.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  });
  return context;
}
