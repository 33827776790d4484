// The runs page in headless Chromium against a real Control Plane seeded through /v1/ingest.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { launchBrowser, browserSkipReason, screenshot, unexpected, type TestBrowser } from './browser.ts';
import { seed, ingest, iso, BLOCKED } from './seed.ts';

const skip = browserSkipReason();

describe('runs page', { skip: skip ?? false }, () => {
  let control: TestControl;
  let browser: TestBrowser;
  let page: Page;

  before(async () => {
    control = await startTestControl();
    await seed(control, 60);
    browser = await launchBrowser();
    page = await browser.newPage();
  });

  after(async () => {
    await browser?.close();
    await control?.close();
  });

  it('lists the newest 50 runs with status, verdict, run, source, repo, branch/PR, origin and provider, started, duration and cost', async () => {
    await page.goto(`${control.url}/#/runs`);
    await page.locator('table.runs tbody tr').first().waitFor();
    assert.equal(await page.locator('table.runs tbody tr').count(), 50);
    const headers = await page.locator('table.runs thead th').allTextContents();
    assert.deepEqual(headers.map((h) => h.trim().toLowerCase()), ['status', 'verdict', 'run', 'source', 'repo', 'branch / pr', 'origin · provider', 'started', 'duration', 'cost']);
    await screenshot(page, 'runs');
  });

  it('renders data as text: a brief containing markup shows the markup literally', async () => {
    const cell = page.locator('td.brief a', { hasText: 'Round invoice totals' });
    assert.equal(await cell.textContent(), 'Round invoice totals half-even <b>not</b> half-up');
    assert.equal(await page.locator('td.brief b').count(), 0);
  });

  it('makes a blocked run stand out and names its question in a banner', async () => {
    const row = page.locator(`tr[data-key="local/${BLOCKED.run}"]`);
    assert.match((await row.getAttribute('class')) ?? '', /is-blocked/);
    assert.match(await page.locator('.banner-blocked').textContent() ?? '', /1 run is waiting for an answer[\s\S]*PostgreSQL 15 or 16/);
  });

  it('shows unmeasured cost as "unknown", never $0.00', async () => {
    const row = page.locator(`tr[data-key="local/${BLOCKED.run}"] td[data-label="Cost"]`);
    assert.equal((await row.textContent())?.trim(), 'unknown');
  });

  it('filters by verdict and keeps the filter in the URL', async () => {
    await page.selectOption('#f-verdict', 'not_verified');
    await page.click('form[data-role=filters] button[type=submit]');
    await page.waitForFunction(() => (globalThis as any).location.hash.includes('verdict=not_verified'));
    // At least one row: while the filtered page is on its way the table may be empty, and every() of nothing is true.
    await page.waitForFunction(() => {
      const rows = [...(globalThis as any).document.querySelectorAll('table.runs tbody tr')];
      return rows.length > 0 && rows.every((tr: any) => tr.textContent.includes('not verified'));
    });
    const count = await page.locator('table.runs tbody tr').count();
    assert.ok(count > 0 && count < 50, `expected a filtered subset, got ${count}`);
    await page.reload();
    await page.locator('table.runs tbody tr').first().waitFor();
    assert.equal(await page.inputValue('#f-verdict'), 'not_verified');
    assert.equal(await page.locator('table.runs tbody tr').count(), count);
  });

  it('says why a run failed in its row, and filters by failure class', async () => {
    await page.goto(`${control.url}/#/runs?failure=checks`);
    await page.waitForFunction(() => {
      const rows = [...(globalThis as any).document.querySelectorAll('table.runs tbody tr')];
      return rows.length > 0 && rows.every((tr: any) => tr.textContent.includes('Failed for checks: Required check "unit" failed'));
    });
    assert.equal(await page.inputValue('#f-failure'), 'checks');
    await page.goto(`${control.url}/#/runs?failure=infra`);
    await page.locator('.state-empty').waitFor();
    assert.match((await page.locator('.state-empty').textContent()) ?? '', /No runs match these filters/);
  });

  it('filters by repo from the URL and says so when nothing matches', async () => {
    await page.goto(`${control.url}/#/runs?repo=acme%2Fnothing`);
    await page.locator('.state-empty').waitFor();
    assert.match((await page.locator('.state-empty').textContent()) ?? '', /No runs match these filters/);
  });

  it('pages to older runs with the cursor and back to the newest', async () => {
    await page.goto(`${control.url}/#/runs`);
    await page.locator('[data-role=older]').click();
    await page.waitForFunction(() => (globalThis as any).location.hash.includes('cursor='));
    await page.waitForFunction(() => (globalThis as any).document.querySelectorAll('table.runs tbody tr').length === 13);
    const older = await page.locator('table.runs tbody tr').first().getAttribute('data-key');
    assert.match(older ?? '', /^local\/rdone00/);
    await page.click('text=← Newest');
    await page.waitForFunction(() => (globalThis as any).document.querySelectorAll('table.runs tbody tr').length === 50);
  });

  it('shows a newly ingested run without a reload', async () => {
    await page.goto(`${control.url}/#/runs`);
    await page.locator('table.runs tbody tr').first().waitFor();
    await page.locator('#conn[data-state=live]').waitFor();
    const now = Date.now();
    await ingest(control, {
      runs: [{ run: 'rlive0001', repo: 'acme/api', group_id: 'rlive0001', status: 'running', brief: 'Arrived while watching', started_at: iso(now), updated_at: iso(now) }],
      events: [{ run: 'rlive0001', seq: 1, ts: iso(now), kind: 'run.status', data: { from: 'queued', to: 'running' } }],
    });
    await page.locator('tr[data-key="local/rlive0001"]').waitFor();
    assert.equal(await page.locator('table.runs tbody tr').first().getAttribute('data-key'), 'local/rlive0001');
  });

  it('logged no console errors and no CSP violations', () => {
    assert.deepEqual(unexpected(browser.problems), []);
  });
});
