// The runs list's read thread (src/control/runs-page-reader.ts): the same bytes as the main connection, every write
// the server answered is on the very next page, and a thread that is gone never fails a list request.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestControl, seedRuns, type TestControl } from '../helpers/control-server.ts';
import { createRunsPageReader, ReadThreadGoneError } from '../../src/control/runs-page-reader.ts';
import { pageFrame } from '../../src/control/runs-page-frame.ts';
import { resolveControlSettings } from '../../src/control/settings.ts';
import { silentLogger } from '../../src/log.ts';
import type { RunFilter } from '../../src/db/runs-store.ts';

describe('GET /v1/runs read on the read thread', () => {
  let threaded: TestControl;
  let inline: TestControl;

  before(async () => {
    threaded = await startTestControl({ settings: { readThread: true } });
    inline = await startTestControl({ settings: { readThread: false } });
    for (const cp of [threaded, inline]) {
      seedRuns(cp.deps, 120, {}, 'local');
      seedRuns(cp.deps, 40, { repo: 'acme/other', verdict: 'verified' }, 'ci');
    }
  });
  after(async () => {
    await threaded.close();
    await inline.close();
  });

  it('has a thread only when asked for', () => {
    assert.ok(threaded.deps.pageReader);
    assert.equal(inline.deps.pageReader, undefined);
  });

  it('answers every page of several filters with the bytes the main connection reads', async () => {
    for (const query of ['limit=7', 'limit=50', 'repo=acme%2Fother&limit=9', 'verdict=verified&limit=5', 'source=local&limit=33']) {
      let cursor = '';
      let pages = 0;
      for (;;) {
        const [a, b] = await Promise.all([
          threaded.request('GET', `/v1/runs?${query}${cursor}`),
          inline.request('GET', `/v1/runs?${query}${cursor}`),
        ]);
        assert.equal(a.status, 200, a.text);
        assert.equal(a.text, b.text, `${query}${cursor}`);
        pages += 1;
        if (a.json.next_cursor === null) break;
        cursor = `&cursor=${a.json.next_cursor}`;
      }
      assert.ok(pages >= 1);
    }
  });

  it('shows each write the server answered on the very next list call', async () => {
    // Newer than every seeded run, and not in the future: ingest refuses times more than 5 minutes ahead.
    const base = Date.now() - 60_000;
    for (let i = 0; i < 15; i++) {
      const t = new Date(base + i * 1000).toISOString();
      const run = { run: `fresh${i}`, status: i % 2 ? 'running' : 'succeeded', started_at: t, updated_at: t, brief: `write ${i}` };
      const ingest = await threaded.request('POST', '/v1/ingest', { body: { source: 'laptop', runs: [run], events: [], artifacts: [] } });
      assert.equal(ingest.status, 200, ingest.text);
      // A new `until` each time: never a cached page, always the read thread.
      const page = await threaded.request('GET', `/v1/runs?limit=3&until=${Date.UTC(2028, 0, 1) + i}`);
      const first = (page.json.items as Array<{ run: string; brief: string }>)[0];
      assert.deepEqual([first?.run, first?.brief], [`fresh${i}`, `write ${i}`], page.text);
    }
  });

  it('reads pages on the main connection once the thread is gone', async () => {
    const before = await threaded.request('GET', '/v1/runs?limit=11');
    await threaded.deps.pageReader!.close();
    assert.equal(threaded.deps.pageReader!.alive(), false);
    const afterClose = await threaded.request('GET', '/v1/runs?limit=11');
    assert.equal(afterClose.status, 200);
    assert.equal(afterClose.text, before.text);
  });
});

describe('runs page reader', () => {
  it('refuses with ReadThreadGoneError when its thread cannot open the DB', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-reader-'));
    try {
      const reader = createRunsPageReader(join(dir, 'missing', 'control.db'), silentLogger);
      const filter: RunFilter = { limit: 5 };
      await assert.rejects(reader.page(filter), ReadThreadGoneError);
      assert.equal(reader.alive(), false);
      await assert.rejects(reader.page(filter), ReadThreadGoneError);
      await reader.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('frames a page like the main connection', () => {
    assert.deepEqual(pageFrame(null), { open: '{"items":[', close: '],"next_cursor":null}' });
  });
});

describe('SVC_CONTROL_READ_THREAD', () => {
  const settings = (value: string | undefined): boolean =>
    resolveControlSettings({ HOME: '/nonexistent', ...(value === undefined ? {} : { SVC_CONTROL_READ_THREAD: value }) }, {}, '/s').readThread;

  it('takes on, off and auto, and refuses anything else', () => {
    assert.equal(settings('on'), true);
    assert.equal(settings('off'), false);
    assert.equal(settings('auto'), settings(undefined));
    assert.throws(() => settings('yes'), /SVC_CONTROL_READ_THREAD must be auto, on or off/);
  });
});
