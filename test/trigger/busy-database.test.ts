// A trigger server whose SQLite file another connection keeps write-locked (an operator's sqlite3 shell): it keeps
// answering, refuses with 503 only what it could not write, and its background work finishes once the lock goes.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { BUSY_TIMEOUT_MS, openDatabase } from '../../src/db/open.ts';
import { triggerMigrations } from '../../src/db/trigger-migrations.ts';
import { createTriggerStores } from '../../src/db/trigger-stores.ts';
import { SOURCE_NAMES } from '../../src/webhook-sources.ts';
import type { JobExecutor } from '../../src/trigger/executor.ts';
import { createNotifier } from '../../src/trigger/notify.ts';
import { createAnswerDesk, type AnswerRequest } from '../../src/trigger/answers.ts';
import { githubReply } from '../../src/trigger/sources/webhook.ts';
import { isDatabaseBusy } from '../../src/errors.ts';
import { createLogger, type Logger } from '../../src/log.ts';
import { waitFor } from '../helpers/wait-for.ts';
import {
  SECRETS, get, insertJob, makeRepo, post, rowCount, startTestTrigger, tempDir, type LogLine, type TestTrigger,
} from './helpers.ts';

const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };

/** A second connection holding the write lock, as `sqlite3 trigger.db` with `BEGIN IMMEDIATE` would. */
function holdLock(path: string): { release: () => void } {
  const holder = new DatabaseSync(path);
  holder.exec('BEGIN IMMEDIATE');
  return {
    release() {
      if (!holder.isOpen) return;
      holder.exec('ROLLBACK');
      holder.close();
    },
  };
}

/** How long the server's connection now waits for the lock (0 while it backs off after meeting it). */
function busyTimeout(t: TestTrigger): number {
  return (t.stores.db.prepare('PRAGMA busy_timeout').get() as { timeout: number }).timeout;
}

/** Each job's run ends at once, succeeded. */
const executor: JobExecutor = {
  source: 'local',
  async launch(job) {
    return { exitCode: 0, run: { source: 'local', run: `r${job.id}` }, error: null };
  },
  async follow() {
    return { status: 'succeeded', verdict: 'verified', pr_url: null, cost_usd: 0, started_at: null, ended_at: null,
      error: null };
  },
};

async function jobStatus(t: TestTrigger, id: string): Promise<unknown> {
  return (await get(`${t.url}/jobs/${id}`, bearer)).body.status;
}

/** A logger that keeps its lines and hands each to `seen` as it is written. */
function keptLog(lines: LogLine[], seen: (line: LogLine) => void = () => {}): Logger {
  return createLogger('trigger-test', (text) => {
    const line = JSON.parse(text) as LogLine;
    lines.push(line);
    seen(line);
  });
}

describe('a trigger server on a database another process keeps locked', () => {
  it('rides out a brief lock on intake without blocking: /health answers while the delivery waits, then it is queued',
    async () => {
      // Tries without end: the lock is released below only after /health was answered, however slow the machine.
      const t = await startTestTrigger({}, { executor, busyTries: Infinity });
      const lock = holdLock(t.settings.dbPath);
      try {
        assert.equal(busyTimeout(t), BUSY_TIMEOUT_MS);
        let answered = false;
        const delivery = post(`${t.url}/jobs`, JSON.stringify({ brief: 'fix it' }), bearer);
        void delivery.then(() => (answered = true), () => (answered = true));
        // The delivery met the lock: the connection backs off (statements stop waiting for it).
        await waitFor(() => busyTimeout(t) === 0, 'the server to meet the lock');
        assert.equal((await get(`${t.url}/health`)).status, 200);
        assert.equal(answered, false, '/health was answered while the delivery waited for the lock');
        lock.release();
        const res = await delivery;
        assert.equal(res.status, 202);
        const id = res.body.job_id as string;
        await waitFor(async () => (await jobStatus(t, id)) === 'succeeded', 'the job to run once the lock went');
      } finally {
        lock.release();
        await t.cleanup();
      }
    });

  it('answers a delivery 503 unavailable with Retry-After: 1 and keeps nothing of it while the lock stays, then ' +
    'takes it once the lock goes', async () => {
    const t = await startTestTrigger({}, { executor });
    const lock = holdLock(t.settings.dbPath);
    try {
      const refused = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'fix it' }), bearer);
      assert.equal(refused.status, 503);
      assert.equal(refused.headers.get('retry-after'), '1');
      assert.equal((refused.body.error as { code: string }).code, 'unavailable');
      assert.equal(rowCount(t.stores.db, 'jobs'), 0);
      assert.equal((await get(`${t.url}/health`)).status, 200);
      lock.release();
      const taken = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'fix it' }), bearer);
      assert.equal(taken.status, 202);
      assert.equal(rowCount(t.stores.db, 'jobs'), 1);
    } finally {
      lock.release();
      await t.cleanup();
    }
  });

  it('records a job\'s launch the lock refused once it goes, and runs the job to its end', async () => {
    const home = tempDir('svc-home-');
    const dbPath = join(home, 'trigger.db');
    let lock: { release: () => void } | undefined;
    const lines: LogLine[] = [];
    // Taken as the job starts: after its claim, before its launch is recorded.
    const log = keptLog(lines, (line) => {
      if (line.msg === 'job started') lock ??= holdLock(dbPath);
    });
    const t = await startTestTrigger({}, { executor, home, db: dbPath, log });
    try {
      const id = (await post(`${t.url}/jobs`, JSON.stringify({ brief: 'fix it' }), bearer)).body.job_id as string;
      await waitFor(() => lines.some((l) => l.msg === 'could not record the job\'s launch; trying again'),
        'the launch refused');
      // Its retries back off too: a lock held for seconds stalls the server 100 ms a second, not 100 ms a request.
      await waitFor(() => busyTimeout(t) === 0, 'the launch\'s retries to back off');
      assert.equal((await get(`${t.url}/health`)).status, 200);
      lock!.release();
      await waitFor(async () => (await jobStatus(t, id)) === 'succeeded', 'the job to succeed');
    } finally {
      lock?.release();
      await t.cleanup();
    }
  });

  it('starts while locked and finishes recovering its running jobs once the lock goes', async () => {
    const repo = makeRepo();
    const home = tempDir('svc-home-');
    const dbPath = join(home, 'trigger.db');
    const db = openDatabase(dbPath, triggerMigrations);
    const stores = createTriggerStores(db);
    stores.jobs.countOrigins(SOURCE_NAMES);
    const id = 'j0000000000bbbbbbbbbbbbbbbb';
    const now = Date.now();
    insertJob(stores, { id, origin: 'jobs', repo: 'acme/api', brief: 'x', args: ['x'], created_at: now });
    stores.jobs.claim(id, now);
    // It reached its launch with no run recorded (a row from before migration 13): recovery marks it interrupted.
    db.prepare('UPDATE jobs SET workdir = ? WHERE id = ?').run(repo, id);
    db.close();
    const lock = holdLock(dbPath);
    const lines: LogLine[] = [];
    const t = await startTestTrigger({}, { repo, home, db: dbPath, log: keptLog(lines) });
    try {
      await waitFor(() => lines.some((l) => l.msg === 'could not recover or start jobs; trying again'),
        'the recovery refused');
      await waitFor(() => busyTimeout(t) === 0, 'the recovery\'s retries to back off');
      assert.equal((await get(`${t.url}/health`)).status, 200);
      assert.equal(await jobStatus(t, id), 'running');
      lock.release();
      await waitFor(async () => (await jobStatus(t, id)) === 'interrupted', 'the job marked interrupted');
    } finally {
      lock.release();
      await t.cleanup();
      rmSync(repo, { recursive: true, force: true });
    }
  });

  it('waits at start for a lock until it goes, then gives an origin with no queued count its row', async () => {
    const home = tempDir('svc-home-');
    const dbPath = join(home, 'trigger.db');
    const db = openDatabase(dbPath, triggerMigrations);
    createTriggerStores(db).jobs.countOrigins(SOURCE_NAMES);
    // As a source added after the last start: its row is written before the server serves.
    db.exec("DELETE FROM queued_by_origin WHERE origin = 'trackerb'");
    db.close();
    // Another process, as node:sqlite's wait for the lock blocks this one's event loop. It lets go only once this
    // process has slept 15 times in SQLite's wait for the lock (seen asleep there, its /proc wchan a nanosleep, then
    // its main thread's voluntary switches counted): that wait sleeps 1, 2, 5 … 100 ms between tries, so it spends
    // BUSY_TIMEOUT_MS in under 10. Counted, not timed: however late the machine lets the start begin, it must wait.
    // It says `released` once it let go; past 30 s (well past the start-up wait) it ends saying what it saw instead.
    const hold = `const { readFileSync } = require('node:fs');
      const db = new (require('node:sqlite').DatabaseSync)(process.argv[1]); db.exec('BEGIN IMMEDIATE');
      const proc = (file) => readFileSync('/proc/' + process.ppid + '/' + file, 'utf8');
      const switches = () => Number(/voluntary_ctxt_switches:\\s*(\\d+)/.exec(proc('status'))[1]);
      let first, wchan = '';
      const poll = setInterval(() => {
        wchan = proc('wchan');
        if (first === undefined && wchan.includes('nanosleep')) first = switches();
        if (first === undefined || switches() - first < 15) return;
        db.exec('ROLLBACK'); clearInterval(poll); clearTimeout(cap); console.log('released');
      }, 5);
      const cap = setTimeout(() => {
        console.error(first === undefined ? 'never saw the start asleep (wchan ' + wchan + ')'
          : 'the start did not sleep 15 times in 30 s (' + (switches() - first) + ')');
        process.exit(1);
      }, 30_000);
      console.log('locked');`;
    const holder = spawn(process.execPath, ['-e', hold, dbPath], { stdio: ['ignore', 'pipe', 'inherit'] });
    let said = '';
    holder.stdout.setEncoding('utf8').on('data', (text: string) => { said += text; });
    const closed = once(holder, 'close') as Promise<[number | null, NodeJS.Signals | null]>;
    // A holder that dies before it holds the lock fails the test rather than leaving it waiting for ever.
    await Promise.race([once(holder.stdout, 'data'), closed.then(([code, signal]) => {
      throw new Error(`the lock holder ended (${code ?? signal}) before it held the lock`);
    })]);
    let t: Awaited<ReturnType<typeof startTestTrigger>> | undefined;
    try {
      // Without the start-up wait the start fails as busy after BUSY_TIMEOUT_MS: a backup's moment kept it down.
      t = await startTestTrigger({}, { home, db: dbPath });
      assert.equal((t.stores.db.prepare("SELECT n FROM queued_by_origin WHERE origin = 'trackerb'").get() as
        { n: number }).n, 0);
      // The holder let go because it saw the start wait: one that died (its /proc unreadable) left no lock to wait on.
      assert.deepEqual(await closed, [0, null]);
      assert.deepEqual(said.split('\n'), ['locked', 'released', '']);
    } finally {
      holder.kill();
      await closed;
      await t?.cleanup();
    }
  });

  it('rides out a lock on the claim of an answer handed to its run as on any answer\'s claim', async () => {
    const dir = tempDir('svc-busy-claim-');
    const stores = createTriggerStores(openDatabase(join(dir, 'trigger.db'), triggerMigrations));
    try {
      const thread = 'github:acme/api#12';
      const reply = { channel: 'webhook', target: { repo: 'acme/api', issue: 12, thread, comment_id: 1200 } };
      insertJob(stores,
        { id: 'j1', origin: 'webhook', brief: 'b', args: ['b'], created_at: 0, repo: 'acme/api', reply });
      stores.jobs.claim('j1', 0);
      stores.jobs.setLaunch('j1', dir, 'r1');
      stores.jobs.setRun('j1', 'local', 'r1', null);
      // The claim after the hand-over meets the lock ten times (about a second), well within BUSY_TRIES.
      const claim = stores.dedupe.claim.bind(stores.dedupe);
      let refused = 0;
      stores.dedupe.claim = (...args) => {
        if (refused++ < 10) throw Object.assign(new Error('locked'), { code: 'ERR_SQLITE_ERROR', errcode: 5 });
        return claim(...args);
      };
      const desk = createAnswerDesk({
        stores, log: createLogger('trigger-test', () => {}), clock: () => 1, progress: async () => {},
        note: async () => true, writeStamps: () => {}, executor: { answer: async () => ({ ok: true }) },
      });
      const outcome = await desk.answer({
        origin: 'webhook', thread, who: 'ada', text: 'yes', refusal: () => null,
        place: 'github acme/api#12 comment 1', keys: ['webhook:comment:1'],
      } as AnswerRequest);
      assert.equal(outcome.kind, 'answered');
      // Before, five tries 200 ms apart, then the keys were held in memory only: a redelivery after a restart could
      // be handed over again.
      assert.equal(stores.dedupe.holder(['webhook:comment:1']), 'j1');
    } finally {
      stores.db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps a question\'s stamp the lock refused and writes it before any answer is matched or the question posted',
    async () => {
      const dir = tempDir('svc-busy-stamp-');
      const dbPath = join(dir, 'trigger.db');
      const stores = createTriggerStores(openDatabase(dbPath, triggerMigrations));
      const lock = { release: () => {} };
      try {
        const at = (seconds: number) => Date.parse('2026-11-29T10:00:00Z') + seconds * 1000;
        let now = at(0);
        const thread = 'github:acme/api#12';
        const reply = { channel: 'webhook', target: { repo: 'acme/api', issue: 12, thread, comment_id: 1200 } };
        insertJob(stores,
          { id: 'j1', origin: 'webhook', brief: 'b', args: ['b'], created_at: now, repo: 'acme/api', reply });
        stores.jobs.claim('j1', now);
        stores.jobs.setLaunch('j1', dir, 'r1');
        stores.jobs.setRun('j1', 'local', 'r1', null);
        const silent = createLogger('trigger-test', () => {});
        const posts: string[] = [];
        const posted = (): string[] => posts;
        const notifier = createNotifier({
          stores, log: silent, clock: () => now, backoffMs: 1, report: async () => {},
          post: async (_url, _headers, body) => {
            posts.push(body);
            return { status: 200, text: '{}' };
          },
          replies: { webhook: githubReply },
          config: { chataHooksPrefix: '', trackeraApiUrl: '', trackeraApiKey: undefined, trackerb: undefined,
            github: { apiUrl: 'https://api.github.invalid', token: 'gh-token' } },
        });
        const answered: string[] = [];
        const desk = createAnswerDesk({
          stores, log: silent, clock: () => now, progress: async () => {}, note: async () => true,
          writeStamps: notifier.writeStamps,
          executor: { answer: async (_run, text) => { answered.push(text); return { ok: true }; } },
        });
        const answer = (text: string, writtenAt: number, key: string) => desk.answer({
          origin: 'webhook', thread, who: 'ada', text, writtenAt, refusal: () => null,
          place: `github acme/api#12 comment ${key}`, keys: [`webhook:comment:${key}`],
        } as AnswerRequest);

        now = at(60);
        Object.assign(lock, holdLock(dbPath));
        const asked = notifier.progress('j1', { step: 'waiting', question: 'Q1: drop the old table?' });
        // The stamp waits, and so does everything it must come before: an answer waits (past about two seconds it is
        // refused as busy, a 503, nothing handed over), the question is not posted.
        await assert.rejects(answer('yes', at(30), '1'), (err: unknown) => isDatabaseBusy(err));
        assert.deepEqual(answered, []);
        assert.deepEqual(posts, []);
        // A brief lock is ridden out: the answer's first try was refused; it is taken once the lock goes.
        now = at(70);
        const waiting = answer('no, keep it', at(65), '3');
        assert.deepEqual(answered, []);
        lock.release();
        assert.equal((await waiting).kind, 'answered');
        await asked;
        assert.equal(posted().filter((p) => p.includes('Q1: drop the old table?')).length, 1);
        assert.equal(stores.replies.get('j1')!.target.asked_at, at(60));
        assert.deepEqual(answered, ['no, keep it']);
        // Written before the question was asked: never its answer. Its refusal's claim waits out a brief lock with
        // its keys marked, so a copy delivered meanwhile is a duplicate.
        Object.assign(lock, holdLock(dbPath));
        const refusing = answer('yes', at(30), '2');
        assert.equal((await answer('yes', at(30), '2')).kind, 'duplicate');
        lock.release();
        assert.equal((await refusing).kind, 'refused');
        assert.equal(stores.dedupe.holder(['webhook:comment:2']), 'j1');
      } finally {
        lock.release();
        stores.db.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
});
