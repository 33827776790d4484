// The attack of a web page on the operator's machine, in headless Chromium: a page on another local origin loops
// no-cors GETs of /v1/stats (and tries an <img> and a no-cors POST) at a tokenless Control Plane. The browser marks
// them cross-site or same-site (Fetch Metadata); the Control Plane refuses every one before any work.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { launchBrowser, browserSkipReason, type TestBrowser } from './browser.ts';
import { seed, RUNNING } from './seed.ts';

const skip = browserSkipReason();

/** The attacker's page: loops no-cors reads of the stats, an <img> of them and a no-cors stop, then says done. */
const ATTACK = `<!doctype html><title>cat pictures</title><script>
const target = new URLSearchParams(location.search).get('t');
(async () => {
  for (let i = 0; i < 30; i++) {
    await fetch(target + '/v1/stats?since=' + (1700000000000 + i), { mode: 'no-cors' }).catch(() => {});
  }
  const img = new Image();
  img.src = target + '/v1/stats/cost?since=1';
  await new Promise((r) => { img.onload = r; img.onerror = r; });
  await fetch(target + '/v1/runs/local/${RUNNING.run}/stop', { method: 'POST', mode: 'no-cors', body: '{}' }).catch(() => {});
  document.title = 'done';
})();
</script>`;

describe('a web page on another local origin', { skip: skip ?? false }, () => {
  let control: TestControl;
  let attacker: Server;
  let browser: TestBrowser;
  let page: Page;
  let computed = 0;
  const seen: Array<{ path: string; site: string | undefined; status: number }> = [];

  before(async () => {
    control = await startTestControl();
    await seed(control, 3);
    const reads = control.deps.reads;
    for (const name of ['stats', 'cost'] as const) {
      const original = reads[name];
      reads[name] = (f) => {
        computed++;
        return original.call(reads, f);
      };
    }
    control.running.server.on('request', (req, res) => {
      const site = req.headers['sec-fetch-site'];
      res.on('finish', () => seen.push({ path: req.url ?? '', site: typeof site === 'string' ? site : undefined, status: res.statusCode }));
    });
    attacker = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(ATTACK));
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
    browser = await launchBrowser();
    page = await browser.newPage();
  });

  after(async () => {
    await browser?.close();
    await new Promise((resolve) => attacker?.close(resolve));
    await control?.close();
  });

  const port = (url: string): number => Number(new URL(url).port);
  const cases = [
    ['another site (127.0.0.1 against localhost)', () => `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`, () => `http://localhost:${port(control.url)}`, 'cross-site'],
    ['another port of localhost', () => `http://localhost:${(attacker.address() as AddressInfo).port}`, () => `http://localhost:${port(control.url)}`, 'same-site'],
  ] as const;

  for (const [what, from, target, site] of cases) {
    it(`gets nothing from ${what}: every request refused 403 before any stats are computed, nothing stopped`, async () => {
      seen.length = 0;
      computed = 0;
      await page.goto(`${from()}/?t=${encodeURIComponent(target())}`);
      await page.waitForFunction(() => (globalThis as any).document.title === 'done', undefined, { timeout: 30_000 });
      const api = seen.filter((s) => s.path.startsWith('/v1/'));
      assert.ok(api.length >= 31, `the page's requests reached the server (${api.length})`);
      assert.deepEqual([...new Set(api.map((s) => `${s.site} ${s.status}`))], [`${site} 403`]);
      assert.equal(computed, 0, 'no stats were computed for the page');
      assert.equal(control.deps.stores.runs.get('local', RUNNING.run)?.status, 'running');
      assert.equal(control.deps.stores.controlRequests.pending('local').length, 0);
    });
  }

  it('still serves the UI itself, whose requests the browser marks same-origin', async () => {
    computed = 0;
    const ui = await browser.newPage();
    await ui.goto(`${control.url}/#/stats`);
    await ui.locator('svc-stats-page .cards, svc-stats-page [data-role=body] .card').first().waitFor();
    assert.ok(computed >= 2, `the stats page computed its stats (${computed})`);
    await ui.close();
  });
});
