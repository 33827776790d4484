// Trigger DB retention: dedupe keys expire after their window, finished jobs after their age,
// queued and running jobs never; across a long soak the DB file stops growing once the window has passed.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { statSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { openDatabase, type Db } from '../../src/db/open.ts';
import { triggerMigrations } from '../../src/db/trigger-migrations.ts';
import { createTriggerStores, type TriggerStores } from '../../src/db/trigger-stores.ts';
import { createJobQueue, type JobQueue } from '../../src/trigger/queue.ts';
import { type EnqueueRequest } from '../../src/trigger/queue.ts';
import { DAY_MS } from '../../src/iso-time.ts';
import { startTriggerRetention } from '../../src/trigger/retention.ts';
import { createLogger } from '../../src/log.ts';
import { SECRETS, post, get, pruneAll, startTestTrigger, tempDir } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';

const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };

function delivery(key: string): EnqueueRequest {
  return { origin: 'jobs', repo: 'acme/api', brief: `brief ${key} ${'x'.repeat(400)}`, args: ['start', '--brief', key, '--detach'], dedupeKeys: [`jobs:${key}`, `id:${key}`] };
}

interface Soak {
  db: Db;
  stores: TriggerStores;
  queue: JobQueue;
  now: { t: number };
  path: string;
}

function openSoak(dir: string): Soak {
  const path = join(dir, 'trigger.db');
  const db = openDatabase(path, triggerMigrations);
  const stores = createTriggerStores(db);
  const now = { t: Date.UTC(2026, 0, 1) };
  const queue = createJobQueue({ stores, clock: () => now.t, maxQueued: 1_000_000, onEnqueued() {} });
  return { db, stores, queue, now, path };
}

/** What the runner does when a job's run ends. */
function finish(s: Soak, id: string): void {
  assert.equal(s.stores.jobs.claim(id, s.now.t), true);
  assert.equal(s.stores.jobs.finish(id, { status: 'succeeded', finished_at: s.now.t, exit_code: 0, summary: 'ok', summary_parts: null, error: null }), true);
}

function fileBytes(s: Soak): number {
  s.db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  return statSync(s.path).size + statSync(`${s.path}-wal`, { throwIfNoEntry: false })?.size!;
}

describe('trigger DB retention', () => {
  it('keeps the DB size flat across 20,000 deliveries once the (1-day) window has passed', async () => {
    const dir = tempDir('svc-retention-');
    const s = openSoak(dir);
    const retention = { dedupeDays: 1, jobDays: 1 };
    const sizes: number[] = [];
    const counts: number[] = [];
    try {
      // 2 minutes between deliveries: 720 a day, so the window holds ~720 and 20,000 span ~28 days.
      for (let i = 0; i < 20_000; i += 100) {
        const results = await Promise.all(
          Array.from({ length: 100 }, (_, j) => {
            s.now.t += 2 * 60_000;
            return s.queue.enqueue(delivery(`d${i + j}`));
          }),
        );
        for (const r of results) {
          assert.equal(r.kind, 'queued');
          if (r.kind === 'queued') finish(s, r.jobId);
        }
        if ((i + 100) % 1000 === 0) {
          pruneAll(s.stores, retention, s.now.t);
          sizes.push(fileBytes(s));
          counts.push((s.db.prepare('SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM dedupe_keys) AS n').get() as { n: number }).n);
        }
      }
      // The window passes after ~720 deliveries; from 4,000 on (index 3) the file must not grow.
      const steady = sizes.slice(3);
      const first = steady[0]!;
      for (const [k, size] of steady.entries()) {
        assert.ok(size <= first * 1.05, `after ${(k + 4) * 1000} deliveries the DB is ${size} bytes, at 4,000 it was ${first}`);
      }
      // What is kept is bounded by the window: ~720 jobs and their 2 keys each, plus one sweep interval's worth.
      for (const n of counts.slice(3)) assert.ok(n <= 3 * (720 + 500), `${n} rows kept`);
      assert.equal(s.stores.jobs.countByStatus('succeeded'), (s.db.prepare('SELECT count(*) AS n FROM jobs').get() as { n: number }).n);
    } finally {
      s.db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('dedupes inside the window, accepts a replay once the key expired, and never prunes queued or running jobs', async () => {
    const dir = tempDir('svc-retention-');
    const s = openSoak(dir);
    try {
      const old = await s.queue.enqueue(delivery('old'));
      const running = await s.queue.enqueue(delivery('running'));
      const done = await s.queue.enqueue(delivery('done'));
      assert.ok(old.kind === 'queued' && running.kind === 'queued' && done.kind === 'queued');
      assert.equal(s.stores.jobs.claim(running.jobId, s.now.t), true);
      finish(s, done.jobId);

      s.now.t += 29 * DAY_MS;
      assert.deepEqual(pruneAll(s.stores, { dedupeDays: 30, jobDays: 30 }, s.now.t), { dedupeKeys: 0, jobs: 0 });
      assert.equal((await s.queue.enqueue(delivery('done'))).kind, 'duplicate', 'a replay inside the window is a duplicate');

      s.now.t += 2 * DAY_MS;
      const pruned = pruneAll(s.stores, { dedupeDays: 30, jobDays: 30 }, s.now.t);
      assert.deepEqual(pruned, { dedupeKeys: 6, jobs: 1 }, 'the keys of all three old jobs went, and the finished job');
      assert.equal(s.stores.jobs.get(done.jobId), undefined);
      assert.equal(s.stores.jobs.get(old.jobId)?.status, 'queued', 'a queued job is never pruned');
      assert.equal(s.stores.jobs.get(running.jobId)?.status, 'running', 'a running job is never pruned');
      assert.equal((await s.queue.enqueue(delivery('done'))).kind, 'queued', 'past the window a replay is a new delivery');
    } finally {
      s.db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('sweeps from its timer in batches of 500, one per turn, every claim through the dedupe store before its job goes', async () => {
    const dir = tempDir('svc-retention-');
    const s = openSoak(dir);
    const lines: Array<Record<string, unknown>> = [];
    const log = createLogger('retention-test', (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
    try {
      const results = await Promise.all(Array.from({ length: 600 }, (_, i) => s.queue.enqueue(delivery(`b${i}`))));
      for (const r of results) if (r.kind === 'queued') finish(s, r.jobId);
      s.now.t += 2 * DAY_MS;
      const stop = startTriggerRetention({ stores: s.stores, retention: { dedupeDays: 1, jobDays: 1 }, clock: () => s.now.t, log });
      try {
        const swept = await waitFor(() => lines.find((l) => l.msg === 'trigger retention sweep'), 'the sweep');
        // 1,200 keys: none left to a job's cascade, which would leave them in the store's in-memory index.
        assert.deepEqual([swept.jobs, swept.dedupe_keys], [600, 1200]);
      } finally {
        stop();
      }
      assert.equal(lines.length, 1);
      assert.equal((s.db.prepare('SELECT count(*) AS n FROM jobs').get() as { n: number }).n, 0);
    } finally {
      s.db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps a finished job at least as long as the dedupe window, whatever SVC_TRIGGER_JOB_DAYS says', async () => {
    const dir = tempDir('svc-retention-');
    const s = openSoak(dir);
    try {
      const r = await s.queue.enqueue(delivery('a'));
      assert.ok(r.kind === 'queued');
      finish(s, r.jobId);
      s.now.t += 5 * DAY_MS;
      assert.deepEqual(pruneAll(s.stores, { dedupeDays: 7, jobDays: 1 }, s.now.t), { dedupeKeys: 0, jobs: 0 });
      s.now.t += 3 * DAY_MS;
      assert.deepEqual(pruneAll(s.stores, { dedupeDays: 7, jobDays: 1 }, s.now.t), { dedupeKeys: 2, jobs: 1 });
    } finally {
      s.db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('svc trigger serve sweeps on its own: a job finished longer ago than SVC_TRIGGER_JOB_DAYS is gone after a restart', async () => {
    const home = tempDir('svc-home-');
    const first = await startTestTrigger({}, { home });
    let id = '';
    try {
      id = (await post(`${first.url}/jobs`, JSON.stringify({ brief: 'retention' }), bearer)).body.job_id as string;
      await waitFor(async () => ((await get(`${first.url}/jobs/${id}`, bearer)).body.status === 'succeeded' ? true : null), 'the job');
    } finally {
      await first.close();
    }
    const later = Date.now() + 3 * DAY_MS;
    const second = await startTestTrigger({ SVC_TRIGGER_DEDUPE_DAYS: '1', SVC_TRIGGER_JOB_DAYS: '2' }, { home, clock: () => later });
    try {
      await waitFor(async () => ((await get(`${second.url}/jobs/${id}`, bearer)).status === 404 ? true : null), 'the sweep');
      assert.ok(second.logs.some((l) => l.msg === 'trigger retention sweep' && l.jobs === 1));
    } finally {
      await second.cleanup();
    }
  });
});
