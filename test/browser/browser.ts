// Headless Chromium (Debian's package) driven by playwright-core for the UI tests; collects console errors,
// page errors and CSP violations so every test can assert the page stayed clean.
import { existsSync, mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = process.env.SVC_TEST_CHROMIUM ?? '/usr/bin/chromium';
export const SCREENSHOTS = join(process.cwd(), 'test-output', 'screenshots');

/** Why browser tests cannot run here, or null when they can. */
export function browserSkipReason(): string | null {
  if (existsSync(CHROMIUM)) return null;
  // Under CI a page test must never skip: .ci/run installs Chromium, so its absence is a failure there.
  if (process.env.CI) throw new Error(`CI must run the browser tests: no Chromium at ${CHROMIUM}`);
  return `no Chromium at ${CHROMIUM} (apt-get install chromium; .ci/run installs it)`;
}

export interface TestBrowser {
  context: BrowserContext;
  /** A fresh page whose console errors, page errors and failed requests are recorded in `problems`. */
  newPage(opts?: { colorScheme?: 'light' | 'dark'; width?: number; height?: number }): Promise<Page>;
  problems: string[];
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<TestBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'svc-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-dev-shm-usage'],
    viewport: { width: 1360, height: 900 },
    // Its crash-report settings and dconf cache go under HOME, never the HOME the test was given.
    env: { ...process.env, HOME: profile },
  });
  const problems: string[] = [];
  return {
    context,
    problems,
    async newPage(opts = {}) {
      const page = await context.newPage();
      await page.emulateMedia({ colorScheme: opts.colorScheme ?? 'light' });
      if (opts.width) await page.setViewportSize({ width: opts.width, height: opts.height ?? 900 });
      // CSP violations are reported as console errors ("Refused to …"); so are failed module loads.
      // Chromium logs every failed request as "Failed to load resource" without its URL; the response
      // listener records the same failure with method, status and path, which tests can allow precisely.
      page.on('console', (msg) => {
        if (msg.type() === 'error' && !/^Failed to load resource: the server responded with a status of/.test(msg.text())) {
          problems.push(`console: ${msg.text()}`);
        }
      });
      page.on('response', (res) => {
        if (res.status() >= 400) problems.push(`http ${res.status()} ${res.request().method()} ${new URL(res.url()).pathname}`);
      });
      page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
      return page;
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Console errors that are the expected result of what a test did (e.g. a 401 the page then handles). */
export function unexpected(problems: string[], allowed: RegExp[] = []): string[] {
  return problems.filter((p) => !allowed.some((re) => re.test(p)));
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}
