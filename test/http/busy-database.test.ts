// Another process holding the Control Plane database's write lock (an operator's sqlite3 shell, a second server on
// the same file): a request that must write waits out the busy timeout and is answered 503 with Retry-After, never
// 500; reads go on (WAL), and the same request succeeds once the lock is gone.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { startTestControl, seedRuns, type TestControl } from '../helpers/control-server.ts';
import { isDatabaseBusy } from '../../src/http/pipeline.ts';

const T0 = '2026-02-01T10:00:00.000Z';
const batch = (run: string) => ({
  source: 'laptop',
  runs: [{ run, status: 'succeeded', started_at: T0, updated_at: T0, repo: 'acme/api', brief: 'fix login' }],
});

describe('a database another process keeps locked', () => {
  let cp: TestControl;
  let other: DatabaseSync;
  before(async () => {
    cp = await startTestControl();
    seedRuns(cp.deps, 5);
    // The server waits 50 ms for the lock here instead of its 5 s, so the test does not sit out the timeout.
    cp.deps.db.exec('PRAGMA busy_timeout = 50');
    other = new DatabaseSync(cp.deps.settings.dbPath);
  });
  after(async () => {
    if (other.isTransaction) other.exec('ROLLBACK');
    other.close();
    await cp.close();
  });

  it('answers a write 503 unavailable with Retry-After, serves reads, and takes the write once the lock is gone', async () => {
    other.exec('BEGIN IMMEDIATE');
    const refused = await cp.request('POST', '/v1/ingest', { body: batch('r-busy') });
    assert.equal(refused.status, 503);
    assert.equal((refused.json as { error: { code: string } }).error.code, 'unavailable');
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.equal((await cp.request('GET', '/v1/runs?limit=2')).status, 200, 'reads go on beside the lock');
    other.exec('COMMIT');
    assert.equal((await cp.request('POST', '/v1/ingest', { body: batch('r-busy') })).status, 200);
  });

  it('serves a list page with another process\'s committed change while that process holds the lock', async () => {
    other.exec("UPDATE runs SET brief = 'changed elsewhere' WHERE run = 'r000004'");
    other.exec('BEGIN IMMEDIATE');
    const page = await cp.request('GET', '/v1/runs?limit=3');
    other.exec('COMMIT');
    assert.equal(page.status, 200);
    assert.match(page.text, /changed elsewhere/);
  });

  it('tells a busy database from any other error', () => {
    const busy = Object.assign(new Error('database is locked'), { code: 'ERR_SQLITE_ERROR', errcode: 5 });
    const busySnapshot = Object.assign(new Error('x'), { code: 'ERR_SQLITE_ERROR', errcode: 517 });
    const constraint = Object.assign(new Error('x'), { code: 'ERR_SQLITE_ERROR', errcode: 19 });
    assert.equal(isDatabaseBusy(busy), true);
    assert.equal(isDatabaseBusy(busySnapshot), true);
    assert.equal(isDatabaseBusy(constraint), false);
    assert.equal(isDatabaseBusy(new Error('database is locked')), false, 'never by its message');
    assert.equal(isDatabaseBusy('database is locked'), false);
  });
});
