// Another process holding the Control Plane database's write lock (an operator's sqlite3 shell, a second server on
// the same file): a request that must write waits out the short busy timeout (then, for a second, none) and is answered
// 503 with Retry-After, never 500; reads go on (WAL), and the same request succeeds once the lock is gone.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { startTestControl, seedRuns, type TestControl } from '../helpers/control-server.ts';
import { isDatabaseBusy, isDiskError } from '../../src/errors.ts';
import { BUSY_TIMEOUT_MS } from '../../src/db/open.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const T0 = '2026-02-01T10:00:00.000Z';
const batch = (run: string) => ({
  source: 'laptop',
  runs: [{ run, status: 'succeeded', started_at: T0, updated_at: T0, repo: 'acme/api', brief: 'fix login' }],
});
/** What SQLite throws when the disk fills up part way (SQLITE_FULL), or fails a write (SQLITE_IOERR_WRITE). */
const FULL = Object.assign(new Error('database or disk is full'), { code: 'ERR_SQLITE_ERROR', errcode: 13 });
const IOERR = Object.assign(new Error('disk I/O error'), { code: 'ERR_SQLITE_ERROR', errcode: 778 });

describe('a database another process keeps locked', () => {
  let cp: TestControl;
  let other: DatabaseSync;
  before(async () => {
    cp = await startTestControl();
    seedRuns(cp.deps, 5);
    other = new DatabaseSync(cp.deps.settings.dbPath);
  });
  after(async () => {
    if (other.isTransaction) other.exec('ROLLBACK');
    other.close();
    await cp.close();
  });

  /** A run of this server blocked on a question: its answer route, and the file an accepted answer is written to. */
  function blockedRun(run: string): { source: string; path: string; file: string } {
    const source = cp.deps.settings.source;
    seedRuns(cp.deps, 1, { run, status: 'blocked', repo_path: cp.dir }, source);
    const file = join(cp.deps.settings.answerDir, source, `${run}.json`);
    return { source, path: `/v1/runs/${source}/${run}/answer`, file };
  }

  /** Answers at `path` while the database refuses the COMMIT: the disk fills up (or fails) as it commits. */
  async function answerRefusedAtCommit(path: string, answer: string, refusal = FULL) {
    const { db } = cp.deps;
    const exec = db.exec.bind(db);
    db.exec = (sql: string) => {
      if (sql === 'COMMIT') throw refusal;
      return exec(sql);
    };
    try {
      return await cp.request('POST', path, { body: { answer } });
    } finally {
      db.exec = exec;
    }
  }

  it('answers a write 503 unavailable with Retry-After, serves reads, and takes the write once the lock is gone', async () => {
    /** How long the server's statements wait for the lock. */
    const waits = () => (cp.deps.db.prepare('PRAGMA busy_timeout').get() as { timeout: number }).timeout;
    assert.equal(waits(), BUSY_TIMEOUT_MS);
    other.exec('BEGIN IMMEDIATE');
    const refused = await cp.request('POST', '/v1/ingest', { body: batch('r-busy') });
    assert.equal(refused.status, 503);
    assert.equal((refused.json as { error: { code: string } }).error.code, 'unavailable');
    assert.equal(refused.headers.get('retry-after'), '1');
    // Backing off: the next writes take the lock only if it is free, none waits for it (the loop is not stalled). The
    // back-off lasts a second from the last refusal, so a slow machine may see it end: a write refused restarts it.
    await waitFor(async () => waits() === 0 ||
      (await cp.request('POST', '/v1/ingest', { body: batch('r-busy') })).status === 503 && waits() === 0,
    'the writes to back off');
    assert.equal((await cp.request('POST', '/v1/ingest', { body: batch('r-busy') })).status, 503);
    assert.equal((await cp.request('GET', '/health')).status, 200, 'reads go on beside the lock');
    assert.equal((await cp.request('GET', '/v1/runs?limit=2')).status, 200, 'reads go on beside the lock');
    other.exec('COMMIT');
    assert.equal((await cp.request('POST', '/v1/ingest', { body: batch('r-busy') })).status, 200);
    await waitFor(() => waits() === BUSY_TIMEOUT_MS, 'statements to wait for the lock again');
  });

  it('serves a list page with another process\'s committed change while that process holds the lock', async () => {
    other.exec("UPDATE runs SET brief = 'changed elsewhere' WHERE run = 'r000004'");
    other.exec('BEGIN IMMEDIATE');
    const page = await cp.request('GET', '/v1/runs?limit=3');
    other.exec('COMMIT');
    assert.equal(page.status, 200);
    assert.match(page.text, /changed elsewhere/);
  });

  it('answers an answer 503 without handing it to the run, and hands it over once the lock is gone', async () => {
    const { source, path, file } = blockedRun('r-asked');
    other.exec('BEGIN IMMEDIATE');
    const refused = await cp.request('POST', path, { body: { answer: 'the blue one' } });
    other.exec('COMMIT');
    assert.equal(refused.status, 503);
    assert.equal(existsSync(file), false, 'a refused answer never reaches the run');
    assert.equal((await cp.request('POST', path, { body: { answer: 'the blue one' } })).status, 202);
    assert.equal(existsSync(file), true);
    const events = cp.deps.stores.events.listAll({ after: 0, limit: 100, source, run: 'r-asked' });
    assert.equal(events.filter((e) => e.kind === 'answer').length, 1);
  });

  it('takes back the answer file with its event when the database refuses the COMMIT', async () => {
    const { source, path, file } = blockedRun('r-commit');
    const refused = await answerRefusedAtCommit(path, 'the blue one');
    // A full disk is a refusal the client can act on, not an internal error (before: 500 internal_error).
    assert.equal(refused.status, 503);
    assert.equal((refused.json as { error: { code: string } }).error.code, 'unavailable');
    assert.match((refused.json as { error: { message: string } }).error.message, /disk is full/);
    assert.equal(refused.headers.get('retry-after'), '60');
    assert.equal(existsSync(file), false, 'an answer whose event was taken back never reaches the run');
    const events = cp.deps.stores.events.listAll({ after: 0, limit: 100, source, run: 'r-commit' });
    assert.equal(events.filter((e) => e.kind === 'answer').length, 0);
  });

  it('answers a request whose disk write failed (SQLITE_IOERR) 503 with Retry-After, taken back', async () => {
    const { source, path, file } = blockedRun('r-ioerr');
    const refused = await answerRefusedAtCommit(path, 'the green one', IOERR);
    // Before, a 500 internal_error: SQLite reports most full disks and quotas it meets this way.
    assert.equal(refused.status, 503, refused.text);
    assert.equal((refused.json as { error: { code: string } }).error.code, 'unavailable');
    assert.equal(refused.headers.get('retry-after'), '60');
    assert.equal(existsSync(file), false);
    const events = cp.deps.stores.events.listAll({ after: 0, limit: 100, source, run: 'r-ioerr' });
    assert.equal(events.filter((e) => e.kind === 'answer').length, 0);
    assert.equal((await cp.request('POST', path, { body: { answer: 'the green one' } })).status, 202);
  });

  it('puts back the accepted answer the run has not taken when a second answer\'s COMMIT is refused', async () => {
    const { path, file } = blockedRun('r-second');
    assert.equal((await cp.request('POST', path, { body: { answer: 'the blue one' } })).status, 202);
    const accepted = readFileSync(file);
    const refused = await answerRefusedAtCommit(path, 'the red one');
    assert.equal(refused.status, 503);
    // Before, the refused answer's cleanup deleted the file, so the first answer (answered 202) never reached the run.
    assert.deepEqual(readFileSync(file), accepted, 'the first answer still waits for the run');
  });

  // Each action's writes are one transaction: a write the disk refuses part way takes the earlier ones back with it,
  // so the same request asked again does what it says (before, a stop left the run `stopping` with no request for its
  // runner, which a second stop never made; a delete left no record, so the runner's next batch brought the run back).
  it('takes a stop of another source\'s run back whole when its request cannot be written, and the next stop queues it',
    async () => {
    seedRuns(cp.deps, 1, { run: 'r-far-stop', status: 'running' }, 'far');
    const requests = cp.deps.stores.controlRequests;
    const add = requests.add;
    requests.add = () => {
      throw FULL;
    };
    let refused;
    try {
      refused = await cp.request('POST', '/v1/runs/far/r-far-stop/stop', { body: {} });
    } finally {
      requests.add = add;
    }
    assert.equal(refused.status, 503);
    assert.equal(cp.deps.stores.runs.get('far', 'r-far-stop')!.status, 'running', 'nothing of the refused stop stays');
    assert.equal((await cp.request('POST', '/v1/runs/far/r-far-stop/stop', { body: {} })).status, 202);
    const pending = cp.deps.stores.controlRequests.pending('far');
    assert.deepEqual(pending.map((p) => [p.run, p.action]), [['r-far-stop', 'stop']]);
  });

  it('takes a delete back whole when its record cannot be written: the run is still there to delete', async () => {
    seedRuns(cp.deps, 1, { run: 'r-far-gone', status: 'succeeded' }, 'far');
    const deleted = cp.deps.stores.deletedRuns;
    const add = deleted.add;
    deleted.add = () => {
      throw FULL;
    };
    let refused;
    try {
      refused = await cp.request('DELETE', '/v1/runs/far/r-far-gone');
    } finally {
      deleted.add = add;
    }
    assert.equal(refused.status, 503);
    assert.equal(cp.deps.stores.runs.get('far', 'r-far-gone')?.status, 'succeeded', 'a refused delete deletes nothing');
    assert.equal((await cp.request('DELETE', '/v1/runs/far/r-far-gone')).status, 200);
    assert.equal(cp.deps.stores.deletedRuns.has('far', 'r-far-gone'), true);
  });

  it('records a failed launch the lock refused once the lock goes, so the run gives back its slot', async () => {
    const source = cp.deps.settings.source;
    seedRuns(cp.deps, 1, { run: 'r-refused', status: 'queued', repo_path: cp.dir }, source);
    const waits = () => (cp.deps.db.prepare('PRAGMA busy_timeout').get() as { timeout: number }).timeout;
    await waitFor(() => waits() === BUSY_TIMEOUT_MS, 'no back-off left from an earlier test');
    other.exec('BEGIN IMMEDIATE');
    try {
      cp.deps.engine.launch(source, 'r-refused', ['no-such-command'], 'fail-run');
      // Its record met the lock (the connection backs off), and is tried again.
      await waitFor(() => waits() === 0, 'the failed launch\'s record refused');
      assert.equal(cp.deps.stores.runs.get(source, 'r-refused')!.status, 'queued');
    } finally {
      other.exec('COMMIT');
    }
    await waitFor(() => cp.deps.stores.runs.get(source, 'r-refused')!.status === 'failed',
      'the failed launch recorded');
  });

  it('looks for lost launches again when the database refused the look, so a lost launch frees its slot', async () => {
    const source = cp.deps.settings.source;
    const old = Date.now() - 10 * 60_000;
    seedRuns(cp.deps, 1, { run: 'r-lost', status: 'queued', repo_path: cp.dir, started_at: old, updated_at: old },
      source);
    const { runs } = cp.deps.stores;
    const each = runs.each;
    let refused = 0;
    // As node:sqlite throws when another process keeps the lock past the busy timeout (before: logged, never again).
    runs.each = function* (...args) {
      if (refused++ === 0) throw Object.assign(new Error('locked'), { code: 'ERR_SQLITE_ERROR', errcode: 5 });
      yield* each.apply(runs, args);
    };
    try {
      const looked = cp.deps.engine.failLostLaunches();
      assert.equal(runs.get(source, 'r-lost')!.status, 'queued');
      await looked;
    } finally {
      runs.each = each;
    }
    assert.equal(refused, 2, 'looked again');
    assert.equal(runs.get(source, 'r-lost')!.status, 'failed');
  });

  it('keeps serving when a stop or a failed launch ends while the lock is held', async () => {
    const source = cp.deps.settings.source;
    seedRuns(cp.deps, 1, { run: 'r-stopping', status: 'stopping', repo_path: cp.dir }, source);
    seedRuns(cp.deps, 1, { run: 'r-launch', status: 'running', repo_path: cp.dir }, source);
    const row = cp.deps.stores.runs.get(source, 'r-stopping')!;
    other.exec('BEGIN IMMEDIATE');
    try {
      await cp.deps.engine.stop(row);
      cp.deps.engine.launch(source, 'r-launch', ['no-such-command'], 'fail-run');
      await cp.deps.engine.close();
    } finally {
      other.exec('COMMIT');
    }
    assert.equal((await cp.request('GET', `/v1/runs/${source}/r-stopping`)).status, 200, 'the server is still up');
    assert.equal(cp.deps.stores.runs.get(source, 'r-launch')!.status, 'running', 'the worker\'s own state fixes it');
  });

  it('tells a full or failing disk (SQLite\'s or a file\'s) from any other error', () => {
    const noSpace = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    const quota = Object.assign(new Error('EDQUOT: disk quota exceeded, write'), { code: 'EDQUOT' });
    const constraint = Object.assign(new Error('x'), { code: 'ERR_SQLITE_ERROR', errcode: 19 });
    assert.deepEqual([FULL, noSpace, quota, IOERR].map(isDiskError), [true, true, true, true]);
    assert.equal(isDiskError(constraint), false);
    assert.equal(isDiskError(new Error('database or disk is full')), false, 'never by its message');
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
