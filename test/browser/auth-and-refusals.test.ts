// Token prompt and refused actions, in headless Chromium against a real Control Plane that has a token.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { launchBrowser, browserSkipReason, screenshot, unexpected, type TestBrowser } from './browser.ts';
import { seed, RUNNING, RECEIPTED } from './seed.ts';

const skip = browserSkipReason();
const TOKEN = 'browser-test-token-5f2c';

describe('token prompt and refused actions', { skip: skip ?? false }, () => {
  let control: TestControl;
  let browser: TestBrowser;
  let page: Page;
  let base: string;

  before(async () => {
    // Bound to every interface (with a token): machine-touching actions answer loopback_only even from this machine.
    control = await startTestControl({ token: TOKEN, host: '0.0.0.0' });
    base = control.url.replace('0.0.0.0', '127.0.0.1');
    await seed(control, 3);
    browser = await launchBrowser();
    page = await browser.newPage();
  });

  after(async () => {
    await browser?.close();
    await control?.close();
  });

  it('asks for the token when the server answers 401, and says so when the token is wrong', async () => {
    await page.goto(`${base}/#/runs`);
    const dialog = page.locator('svc-token-dialog dialog[open]');
    await dialog.waitFor();
    await screenshot(page, 'token-prompt');
    await page.fill('#token-input', 'not-the-token');
    await dialog.locator('button[type=submit]').click();
    await dialog.locator('[data-role=error]:not([hidden])').waitFor();
    assert.match((await dialog.locator('[data-role=error]').textContent()) ?? '', /token is wrong/);
    assert.equal(await dialog.isVisible(), true);
  });

  it('keeps a right token in sessionStorage and loads the page with it', async () => {
    await page.fill('#token-input', TOKEN);
    await page.locator('svc-token-dialog button[type=submit]').click();
    await page.locator('table.runs tbody tr').first().waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('svc.control.token')), TOKEN);
    // Live updates use the token too (fetch streaming with the Authorization header).
    await page.locator('#conn[data-state=live]').waitFor();
  });

  it('does not ask again on the next page', async () => {
    await page.goto(`${base}/#/runs/local/${RECEIPTED.run}`);
    await page.locator('.run-head h1').waitFor();
    assert.equal(await page.locator('svc-token-dialog dialog[open]').count(), 0);
  });

  it('downloads an artifact with the token instead of following a bare link', async () => {
    const download = page.waitForEvent('download');
    await page.locator('svc-artifact-list a', { hasText: 'checks/unit.txt' }).click();
    const file = await download;
    assert.equal(file.suggestedFilename(), 'unit.txt');
  });

  it('shows the refusal when the server refuses stop with loopback_only', async () => {
    await page.goto(`${base}/#/runs/local/${RUNNING.run}`);
    await page.locator('button[data-run-action=stop]:not([disabled])').click();
    await page.locator('svc-confirm button[data-role=ok]').click();
    const error = page.locator('svc-run-actions .notice.error');
    await error.waitFor();
    assert.equal(await error.getAttribute('data-error-code'), 'loopback_only');
    assert.match((await error.textContent()) ?? '', /Stop refused[\s\S]*only works on a Control Plane bound to this machine/);
    await screenshot(page, 'run-detail-refused');
  });

  it('logged nothing unexpected: only the 401s that triggered the prompt and the loopback-only refusals', () => {
    assert.deepEqual(
      unexpected(browser.problems, [/^http 401 GET \/v1\//, /^http 403 (GET \/v1\/repos|GET \/v1\/keys|POST \/v1\/runs\/local\/[^/]+\/stop)$/]),
      [],
    );
  });
});
