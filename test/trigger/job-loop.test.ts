import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, rmSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { openDatabase } from '../../src/db/open.ts';
import { triggerMigrations } from '../../src/db/trigger-migrations.ts';
import { createTriggerStores } from '../../src/db/trigger-stores.ts';
import { isLauncherName } from '../../src/spawn/start.ts';
import { SECRETS, post, get, startTestTrigger, makeRepo, tempDir, insertJob, type TestTrigger } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { DatabaseSync } from 'node:sqlite';
import type { JobExecutor } from '../../src/trigger/executor.ts';
import { UNLAUNCHED } from '../../src/trigger/run-follow.ts';
import { createJobLoop } from '../../src/trigger/job-loop.ts';
import type { TriggerStores } from '../../src/db/trigger-stores.ts';
import { createLogger } from '../../src/log.ts';

const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };

/**
 * The job as GET /jobs/:id shows it, each time on a connection of its own: the server runs in this process, and a
 * write that waits for the lock blocks its event loop; a pooled connection reused right after one stall could be
 * closed under the request ("fetch failed", ECONNRESET, seen under load when the wait was 5 s).
 */
async function job(t: TestTrigger, id: string): Promise<Record<string, unknown>> {
  return (await get(`${t.url}/jobs/${id}`, { ...bearer, connection: 'close' })).body;
}

describe('the job loop', () => {
  it('gives `svc start` an allowlisted environment: no secret, key or token reaches it', async () => {
    const outbound = {
      TRACKERA_API_KEY: 'k-trackera-1',
      TRACKERB_API_TOKEN: 'k-trackerb-2',
      TRACKERB_EMAIL: 'bot@example.test',
      TRACKERB_BASE_URL: 'https://x.example.test',
      ERRTRACK_AUTH_TOKEN: 'k-errtrack-3',
      ERRTRACK_CLIENT_SECRET: 'k-errtrack-4',
      SVC_CONTROL_TOKEN: 'k-control-5',
      AWS_SECRET_ACCESS_KEY: 'k-aws-6',
      NODE_OPTIONS: '--require /tmp/evil.js',
      LC_ALL: 'C.UTF-8',
      TZ: 'UTC',
      SVC_SOURCE: 'box',
      SVC_CONTROL_URL: 'http://127.0.0.1:1',
      SVC_CONTROL_ANSWER_DIR: '/var/lib/svc/control/answers',
    };
    const t = await startTestTrigger(outbound);
    try {
      const res = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'dump env' }), bearer);
      await waitFor(async () => ((await job(t, res.body.job_id as string)).status === 'succeeded' ? true : null), 'the job');
      const call = t.calls()[0]!;
      // The one extra name: the descriptor of the pipe that carries what the run uses itself; the
      // launcher reads it at start. Nothing is written to disk on the way.
      assert.equal(call.env.SVC_HANDOFF_FD, '3');
      // Not ERRTRACK_AUTH_TOKEN: a /jobs brief is never an issue URL (--brief).
      assert.deepEqual(call.handed, { secrets: { SVC_CONTROL_TOKEN: 'k-control-5' } });
      assert.equal(existsSync(join(t.home, '.svc', 'handoff')), false, 'no handoff file was written');
      for (const name of Object.keys(call.env)) {
        if (name !== 'SVC_HANDOFF_FD') assert.ok(isLauncherName(name), `unexpected ${name} in the child env`);
      }
      const values = Object.values(call.env).join('\n');
      for (const secret of [...Object.values(SECRETS), 'k-trackera-1', 'k-trackerb-2', 'k-errtrack-3', 'k-errtrack-4', 'k-control-5', 'k-aws-6', '/tmp/evil.js']) {
        assert.ok(!values.includes(secret), `secret ${secret.slice(0, 6)}… reached the child`);
      }
      assert.equal(call.env.LC_ALL, 'C.UTF-8');
      assert.equal(call.env.SVC_SOURCE, 'box');
      assert.equal(call.env.SVC_CONTROL_ANSWER_DIR, '/var/lib/svc/control/answers', 'the run waits for answers where the Control Plane writes them');
      assert.equal(call.env.SVC_ORIGIN, 'jobs', 'the run records where the job came from');
      assert.equal(call.env.HOME, t.home);
    } finally {
      await t.cleanup();
    }
  });

  it('counts the automatic infra retries of a job\'s run on the job, apart from the job, and shows them in its JSON', async () => {
    const t = await startTestTrigger();
    try {
      const retried = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'infra-retried once' }), bearer);
      const plain = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'an ordinary job' }), bearer);
      const done = (id: string) => waitFor(async () => {
        const j = await job(t, id);
        return j.status === 'succeeded' ? j : null;
      }, 'the job');
      const a = await done(retried.body.job_id as string);
      const b = await done(plain.body.job_id as string);
      assert.equal(a.infra_retries, 1);
      assert.equal(b.infra_retries, 0);
      // One launch per job: the retry was the run's own, never a second `svc start` by the trigger server.
      assert.equal(t.calls().length, 2);
    } finally {
      await t.cleanup();
    }
  });

  it('leaves queued jobs queued on shutdown and re-attaches running jobs to their runs on restart', async () => {
    const repo = makeRepo();
    const home = tempDir('svc-home-');
    const db = join(home, 'trigger.db');
    const first = await startTestTrigger({ SVC_TRIGGER_CONCURRENCY: '1' }, { repo, home, db });
    const a = (await post(`${first.url}/jobs`, JSON.stringify({ brief: 'stay-running A' }), bearer)).body.job_id as string;
    const b = (await post(`${first.url}/jobs`, JSON.stringify({ brief: 'second B' }), bearer)).body.job_id as string;
    const runA = await waitFor(async () => (await job(first, a)).run as { run: string } | null, 'job A to record its run');
    assert.equal((await job(first, b)).status, 'queued');
    await first.close();

    const second = await startTestTrigger({ SVC_TRIGGER_CONCURRENCY: '1' }, { repo, home, db });
    try {
      assert.equal((await job(second, a)).status, 'running');
      const statePath = join(repo, '.svc', 'runs', runA.run, 'state.json');
      const state = JSON.parse(readFileSync(statePath, 'utf8')) as Record<string, unknown>;
      writeFileSync(statePath, JSON.stringify({ ...state, status: 'succeeded', verdict: 'verified', ended_at: new Date().toISOString() }));
      const doneA = await waitFor(async () => ((await job(second, a)).status === 'succeeded' ? job(second, a) : null), 'job A to end with its run');
      assert.deepEqual(doneA.run, { source: 'local', run: runA.run });
      await waitFor(async () => ((await job(second, b)).status === 'succeeded' ? true : null), 'job B to run after restart');
      assert.equal(second.calls().filter((c) => c.args.includes('second B')).length, 1);
    } finally {
      await second.cleanup();
      rmSync(repo, { recursive: true, force: true });
    }
  });

  it('marks running jobs interrupted on restart when their run is unknown or gone', async () => {
    const repo = makeRepo();
    const home = tempDir('svc-home-');
    const dbPath = join(home, 'trigger.db');
    const db = openDatabase(dbPath, triggerMigrations);
    const stores = createTriggerStores(db);
    const now = Date.now();
    for (const [id, run] of [['j0000000000aaaaaaaaaaaaaaaa', null], ['j0000000000bbbbbbbbbbbbbbbb', 'rgone']] as const) {
      insertJob(stores, { id, origin: 'jobs', repo: 'acme/api', brief: 'x', args: ['start', '--brief', 'x', '--detach'], created_at: now });
      stores.jobs.claim(id, now);
      // Both reached their launch (the checkout is recorded just before it): either may have started a run. The
      // first's row is from before migration 13 (no run id chosen before its launch).
      if (run) {
        stores.jobs.setLaunch(id, repo, run);
        stores.jobs.setRun(id, 'local', run, 0);
      } else {
        db.prepare('UPDATE jobs SET workdir = ? WHERE id = ?').run(repo, id);
      }
    }
    db.close();
    const t = await startTestTrigger({}, { repo, home, db: dbPath });
    try {
      for (const id of ['j0000000000aaaaaaaaaaaaaaaa', 'j0000000000bbbbbbbbbbbbbbbb']) {
        const j = await waitFor(async () => ((await job(t, id)).status === 'interrupted' ? job(t, id) : null), `job ${id} interrupted`);
        assert.ok(j.error);
        assert.ok(j.finished_at);
      }
      assert.equal(t.calls().length, 0);
    } finally {
      await t.cleanup();
      rmSync(repo, { recursive: true, force: true });
    }
  });

  it('queues again on restart a running job that never reached its launch (a managed checkout\'s fetch)', async () => {
    const repo = makeRepo();
    const home = tempDir('svc-home-');
    const dbPath = join(home, 'trigger.db');
    const db = openDatabase(dbPath, triggerMigrations);
    const stores = createTriggerStores(db);
    const id = 'j0000000000dddddddddddddddd';
    insertJob(stores, { id, origin: 'jobs', repo: 'acme/api', brief: 'x', args: ['start', '--brief', 'x', '--detach'], created_at: Date.now() });
    stores.jobs.claim(id, Date.now()); // claimed, then the server was killed before any checkout was recorded
    db.close();
    const t = await startTestTrigger({}, { repo, home, db: dbPath });
    try {
      const j = await waitFor(async () => ((await job(t, id)).status === 'succeeded' ? job(t, id) : null), `job ${id} to run`);
      assert.equal(j.error, null);
      assert.equal(t.calls().length, 1);
    } finally {
      await t.cleanup();
      rmSync(repo, { recursive: true, force: true });
    }
  });

  it('fails a queued job whose repository is no longer served, and launches nothing for it', async () => {
    const repo = makeRepo();
    const home = tempDir('svc-home-');
    const dbPath = join(home, 'trigger.db');
    const db = openDatabase(dbPath, triggerMigrations);
    const id = 'j0000000000cccccccccccccccc';
    insertJob(createTriggerStores(db), { id, origin: 'jobs', repo: 'acme/gone', brief: 'x', args: ['start', '--brief', 'x', '--detach'], created_at: Date.now() });
    db.close();
    const t = await startTestTrigger({}, { repo, home, db: dbPath });
    try {
      const j = await waitFor(async () => ((await job(t, id)).status === 'failed' ? job(t, id) : null), 'the job to fail');
      assert.equal(j.error, 'The job has no repository to run in: "acme/gone" is no longer served');
      assert.equal(t.calls().length, 0);
    } finally {
      await t.cleanup();
      rmSync(repo, { recursive: true, force: true });
    }
  });

  it('ends a job failed when running it throws, and still runs the next one', async () => {
    let launches = 0;
    const executor: JobExecutor = {
      source: 'local',
      async launch() {
        launches++;
        if (launches === 1) throw new Error('the executor broke');
        return { exitCode: 0, run: null, error: 'second launch refused' };
      },
      async follow() {
        return null;
      },
    };
    const t = await startTestTrigger({ SVC_TRIGGER_CONCURRENCY: '1' }, { executor });
    try {
      const first = (await post(`${t.url}/jobs`, JSON.stringify({ brief: 'first' }), bearer)).body.job_id as string;
      const second = (await post(`${t.url}/jobs`, JSON.stringify({ brief: 'second' }), bearer)).body.job_id as string;
      const ended = (id: string) => waitFor(async () => ((await job(t, id)).status === 'failed' ? job(t, id) : null), `job ${id}`);
      assert.equal((await ended(first)).error, 'internal error while running the job');
      assert.equal((await ended(second)).error, 'second launch refused');
      assert.ok(t.logs.some((l) => l.msg === 'job crashed' && l.error === 'the executor broke'));
      // A job that never got a run says why in the log (a Sentry or /jobs job sends its summary nowhere).
      const ends = t.logs.filter((l) => l.msg === 'job finished' && l.job_id === second);
      assert.deepEqual(ends.map((l) => [l.level, l.status, l.error]), [['warn', 'failed', 'second launch refused']]);
    } finally {
      await t.cleanup();
    }
  });

  it('queues again the same job whose launch reached no agent, up to 3 times, then ends it interrupted', async () => {
    const runs: string[] = [];
    const executor: JobExecutor = {
      source: 'local',
      async launch(job) {
        runs.push(job.run);
        return { exitCode: 0, run: { source: 'local', run: job.run }, error: null };
      },
      // As the local executor says of a lost launch whose launcher is gone and whose run never had a worker.
      async follow() {
        return UNLAUNCHED;
      },
    };
    const t = await startTestTrigger({ SVC_TRIGGER_CONCURRENCY: '1' }, { executor });
    try {
      const id = (await post(`${t.url}/jobs`, JSON.stringify({ brief: 'lost' }), bearer)).body.job_id as string;
      const j = await waitFor(async () => ((await job(t, id)).status === 'interrupted' ? job(t, id) : null), 'the job');
      assert.equal(j.requeues, 3);
      assert.equal(new Set(runs).size, 4, 'each launch a new run id');
      assert.equal(j.error, `the server stopped during its launch 4 times; its run local/${runs[3]} reached no agent`);
      const requeued = t.logs.filter((l) => l.msg.startsWith('job queued again') && l.job_id === id);
      assert.deepEqual(requeued.map((l) => [l.level, l.run, l.requeues]),
        runs.slice(0, 3).map((run, i) => ['warn', `local/${run}`, i + 1]));
    } finally {
      await t.cleanup();
    }
  });

  it('outlasts a database another process holds locked: a job\'s end and the next claim are tried again', async () => {
    const home = tempDir('svc-home-');
    const dbPath = join(home, 'trigger.db');
    // A second connection holds the write lock (an operator's sqlite3 shell) from inside a run's follow.
    let holder: DatabaseSync | null = null;
    const lock = () => {
      holder = new DatabaseSync(dbPath);
      holder.exec('BEGIN IMMEDIATE');
    };
    const release = async (msg: string) => {
      await waitFor(() => t.logs.some((l) => l.msg === msg), `"${msg}" logged`);
      holder!.exec('ROLLBACK');
      holder!.close();
    };
    const done = { status: 'succeeded', verdict: 'verified', pr_url: null, cost_usd: 0.5, started_at: null,
      ended_at: null, error: null } as const;
    let posted!: () => void;
    const allPosted = new Promise<void>((resolve) => (posted = resolve));
    const executor: JobExecutor = {
      source: 'local',
      async launch(job) {
        return { exitCode: 0, run: { source: 'local', run: `r${job.id}` }, error: null };
      },
      async follow(run) {
        await allPosted;
        if (run.run === `r${third}`) return done;
        lock();
        // The first run ends; the second is let go (as on shutdown), which frees its slot for the third.
        return run.run === `r${first}` ? done : 'aborted';
      },
    };
    const t = await startTestTrigger({ SVC_TRIGGER_CONCURRENCY: '1' }, { executor, home, db: dbPath });
    const queue = async (brief: string) => (await post(`${t.url}/jobs`, JSON.stringify({ brief }), bearer)).body.job_id as string;
    let first = '';
    let second = '';
    let third = '';
    try {
      first = await queue('first');
      second = await queue('second');
      third = await queue('third');
      posted();
      await release('could not record the job\'s end; trying again');
      const a = await waitFor(async () => ((await job(t, first)).status === 'succeeded' ? job(t, first) : null), 'job 1');
      assert.equal(a.error, null);
      await release('could not recover or start jobs; trying again');
      await waitFor(async () => ((await job(t, third)).status === 'succeeded' ? true : null), 'job 3 after the lock');
      assert.equal((await job(t, second)).status, 'running');
    } finally {
      await t.cleanup();
    }
  });

  it('frees a job\'s slot before its summary is sent: a vendor\'s Retry-After does not stall the queue', async () => {
    const stores = createTriggerStores(openDatabase(join(tempDir('svc-home-'), 'trigger.db'), triggerMigrations));
    // Each job's repository is no longer served: it ends failed at once, then its summary is sent (held here).
    for (const id of ['j1', 'j2']) {
      insertJob(stores, { id, origin: 'jobs', brief: 'b', args: ['b'], created_at: Date.now(), repo: 'gone' });
    }
    let letGo = (): void => {};
    const held = new Promise<void>((resolve) => { letGo = resolve; });
    const told: string[] = [];
    const loop = createJobLoop({
      stores, executor: {} as JobExecutor, managed: {} as never, clock: Date.now, tracer: {} as never,
      log: createLogger('job-loop-test', () => {}),
      settings: {
        concurrency: 1, repoConcurrency: 1, publicUrl: undefined,
        repos: { entries: [], byName: () => undefined } as never,
      },
      notify: Object.assign(async (jobId: string) => {
        told.push(jobId);
        await held;
      }, { progress: async () => {} }) as never,
    });
    try {
      loop.kick();
      await waitFor(() => stores.jobs.get('j2')?.status === 'failed', 'job 2 while job 1\'s summary waits');
      assert.deepEqual(told, ['j1'], 'job 2\'s summary waits its turn (concurrency 1)');
      let idle = false;
      const idled = loop.idle().then(() => { idle = true; });
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(idle, false, 'idle waits for the summaries being sent');
      letGo();
      await idled;
      assert.deepEqual(told, ['j1', 'j2']);
    } finally {
      letGo();
      await loop.close();
    }
  });

  it('sends at most `concurrency` summaries at once; close leaves the ones waiting their turn pending', async () => {
    const stores = createTriggerStores(openDatabase(join(tempDir('svc-home-'), 'trigger.db'), triggerMigrations));
    // Five jobs whose repository is no longer served end failed at once: a burst of summaries to one vendor.
    const ids = ['j1', 'j2', 'j3', 'j4', 'j5'];
    for (const id of ids) {
      const reply = { channel: 'jobs', target: {} };
      insertJob(stores, { id, origin: 'jobs', brief: 'b', args: ['b'], created_at: Date.now(), repo: 'gone', reply });
    }
    let letGo = (): void => {};
    let held = new Promise<void>((resolve) => { letGo = resolve; });
    const told: string[] = [];
    let inFlight = 0;
    let most = 0;
    const loop = () => createJobLoop({
      stores, executor: {} as JobExecutor, managed: {} as never, clock: Date.now, tracer: {} as never,
      log: createLogger('job-loop-test', () => {}),
      settings: {
        concurrency: 2, repoConcurrency: 2, publicUrl: undefined,
        repos: { entries: [], byName: () => undefined } as never,
      },
      notify: Object.assign(async (jobId: string) => {
        told.push(jobId);
        most = Math.max(most, ++inFlight);
        await held;
        inFlight--;
      }, { progress: async () => {} }) as never,
    });
    const first = loop();
    try {
      first.kick();
      await waitFor(() => ids.every((id) => stores.jobs.get(id)?.status === 'failed'), 'the five jobs\' ends');
      assert.equal(told.length, 2);
      letGo();
      await first.idle();
      assert.deepEqual([told.length, most], [5, 2]);
    } finally {
      letGo();
      await first.close();
    }
    // After a restart the pending summaries (never marked sent here) go two at a time too; close waits only for the
    // two being sent.
    told.length = 0;
    most = 0;
    held = new Promise<void>((resolve) => { letGo = resolve; });
    const second = loop();
    second.recover();
    assert.equal(told.length, 2);
    const closed = second.close();
    letGo();
    await closed;
    assert.deepEqual([told.length, most], [2, 2]);
  });

  it('close waits for the summary of a job whose launch fails while it closes (no summary sent twice)', async () => {
    const stores = createTriggerStores(openDatabase(join(tempDir('svc-home-'), 'trigger.db'), triggerMigrations));
    insertJob(stores, { id: 'j1', origin: 'jobs', brief: 'b', args: ['b'], created_at: Date.now(), repo: 'r' });
    let endLaunch = (): void => {};
    let launching = false;
    const executor = {
      launch: () => {
        launching = true;
        return new Promise((resolve) => { endLaunch = () => resolve({ run: null, error: 'boom', exitCode: 1 }); });
      },
    } as unknown as JobExecutor;
    // The summary is sent only once the test lets it go: a close that did not wait for it would end before that.
    let sending = false;
    let sent = false;
    let letGo = (): void => {};
    const held = new Promise<void>((resolve) => (letGo = resolve));
    const loop = createJobLoop({
      stores, executor, managed: {} as never, clock: Date.now, tracer: { startSpan: () => null } as never,
      log: createLogger('job-loop-test', () => {}),
      settings: {
        concurrency: 1, repoConcurrency: 1, publicUrl: undefined,
        repos: { entries: [], byName: () => ({ name: 'r', checkout: tempDir('svc-repo-'), clone: null }) } as never,
      },
      notify: Object.assign(async () => {
        sending = true;
        await held;
        sent = true;
      }, { progress: async () => {} }) as never,
    });
    loop.kick();
    await waitFor(() => launching, 'the launch');
    let closedYet = false;
    const closed = loop.close().then(() => (closedYet = true));
    endLaunch();
    await waitFor(() => sending, 'the summary to be sent');
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(closedYet, false, 'close returned while the summary was still being sent');
    letGo();
    await closed;
    assert.equal(sent, true);
  });

  it('after a restart tells the start of the run a lost launch made once it sees that run, and follows it',
    async () => {
    const home = tempDir('svc-home-');
    const stores = createTriggerStores(openDatabase(join(home, 'trigger.db'), triggerMigrations));
    insertJob(stores, { id: 'j1', origin: 'jobs', brief: 'b', args: ['b'], created_at: Date.now(), repo: 'api' });
    stores.jobs.claim('j1', Date.now());
    stores.jobs.setLaunch('j1', home, 'r1');
    const followed: unknown[] = [];
    const executor: JobExecutor = {
      source: 'local',
      launch: async () => assert.fail('a job caught mid-launch is never launched again'),
      follow: async (run, _signal, f) => {
        followed.push(run, f.launching);
        f.onQuestion?.(null);
        return {
          status: 'succeeded', verdict: 'verified', pr_url: null, cost_usd: null, started_at: null, ended_at: null,
          error: null,
        };
      },
    };
    const told: unknown[] = [];
    const loop = createJobLoop({
      stores, executor, managed: {} as never, clock: Date.now, tracer: {} as never,
      log: createLogger('job-loop-test', () => {}),
      settings: {
        concurrency: 1, repoConcurrency: 1, publicUrl: undefined,
        repos: { entries: [], byName: () => ({ name: 'api', checkout: home }) } as never,
      },
      notify: Object.assign(async () => {}, {
        progress: async (_id: string, p: { step: string }) => void told.push(p.step),
      }) as never,
    });
    try {
      loop.recover();
      await loop.idle();
      const row = stores.jobs.get('j1')!;
      assert.deepEqual([row.status, row.run_source, row.run_id], ['succeeded', 'local', 'r1']);
      assert.deepEqual(followed, [{ source: 'local', run: 'r1' }, { launcher: null }]);
      assert.deepEqual(told, ['started', 'resumed']);
    } finally {
      await loop.close();
    }
  });

  it('tries again only what the database may take later; a failed disk is logged once a minute', async () => {
    const stores = createTriggerStores(openDatabase(join(tempDir('svc-home-'), 'trigger.db'), triggerMigrations));
    const lines: { msg: string }[] = [];
    const loop = (s: TriggerStores) => createJobLoop({
      stores: s, executor: {} as JobExecutor, managed: {} as never, clock: Date.now, tracer: {} as never,
      log: createLogger('job-loop-test', (line) => lines.push(JSON.parse(line) as { msg: string })),
      settings: {
        concurrency: 1, repoConcurrency: 1, publicUrl: undefined,
        repos: { entries: [], byName: () => undefined } as never,
      },
      notify: Object.assign(async () => {}, { progress: async () => {} }) as never,
    });
    const bug = new TypeError('a bug');
    const broken = loop({ ...stores, jobs: { ...stores.jobs, queuedGroups: () => { throw bug; } } });
    try {
      assert.throws(() => broken.kick(), bug);
    } finally {
      await broken.close();
    }
    // A job whose repository is no longer served ends failed at once; a disk fails that write twice (IOERR_WRITE).
    insertJob(stores, { id: 'j1', origin: 'jobs', brief: 'b', args: ['b'], created_at: Date.now(), repo: 'gone' });
    const ioerr = Object.assign(new Error('disk I/O error'), { code: 'ERR_SQLITE_ERROR', errcode: 778 });
    let refusals = 0;
    const failing = loop({ ...stores, jobs: { ...stores.jobs, finish: (id, end) => {
      if (refusals++ < 2) throw ioerr;
      return stores.jobs.finish(id, end);
    } } });
    failing.kick();
    await waitFor(() => stores.jobs.get('j1')?.status === 'failed', 'the job\'s end');
    await failing.close();
    assert.equal(lines.filter((l) => l.msg === 'could not record the job\'s end; trying again').length, 1);
  });

  it('records a launched run the full disk refused once, then follows it, never failing the job beside it', async () => {
    const home = tempDir('svc-home-');
    const stores = createTriggerStores(openDatabase(join(home, 'trigger.db'), triggerMigrations));
    insertJob(stores, { id: 'j1', origin: 'jobs', brief: 'b', args: ['b'], created_at: Date.now(), repo: 'api' });
    const lines: { msg: string }[] = [];
    const full = Object.assign(new Error('database or disk is full'), { code: 'ERR_SQLITE_ERROR', errcode: 13 });
    let refusals = 0;
    const jobs = { ...stores.jobs, setRun: (...args: Parameters<TriggerStores['jobs']['setRun']>) => {
      if (refusals++ === 0) throw full;
      return stores.jobs.setRun(...args);
    } };
    const run = { source: 'local', run: 'r1' };
    const executor: JobExecutor = {
      source: 'local',
      launch: async () => ({ exitCode: 0, run, error: null }),
      follow: async () => ({
        status: 'succeeded', verdict: 'verified', pr_url: null, cost_usd: null, started_at: null, ended_at: null,
        error: null,
      }),
    };
    const loop = createJobLoop({
      stores: { ...stores, jobs }, executor, managed: {} as never, clock: Date.now, tracer: {} as never,
      log: createLogger('job-loop-test', (line) => lines.push(JSON.parse(line) as { msg: string })),
      settings: {
        concurrency: 1, repoConcurrency: 1, publicUrl: undefined,
        repos: { entries: [], byName: () => ({ name: 'api', checkout: home }) } as never,
      },
      notify: Object.assign(async () => {}, { progress: async () => {} }) as never,
    });
    try {
      loop.kick();
      await waitFor(() => stores.jobs.get('j1')?.status !== 'running' ? stores.jobs.get('j1') : null, 'the job\'s end');
      const row = stores.jobs.get('j1')!;
      assert.deepEqual({ status: row.status, error: row.error, run: [row.run_source, row.run_id] },
        { status: 'succeeded', error: null, run: ['local', 'r1'] });
      assert.deepEqual(lines.filter((l) => l.msg.startsWith('could not record')).map((l) => l.msg),
        ['could not record the job\'s run; trying again']);
    } finally {
      await loop.close();
    }
  });
  it('a held launch that throws fails its job, the server going on; one whose launch write throws is withdrawn, and '
    + 'neither leaves its launcher\'s identity in the row', async () => {
    const home = tempDir('svc-home-');
    const stores = createTriggerStores(openDatabase(join(home, 'trigger.db'), triggerMigrations));
    for (const id of ['j1', 'j2']) {
      insertJob(stores, { id, origin: 'jobs', brief: 'b', args: ['b'], created_at: Date.now(), repo: 'api' });
    }
    const broken = new Error('the disk went read-only mid-write');
    const jobs = { ...stores.jobs, setLaunch: (...args: Parameters<TriggerStores['jobs']['setLaunch']>) => {
      if (args[0] === 'j2') throw broken;
      return stores.jobs.setLaunch(...args);
    } };
    const words = new Map<string, boolean>();
    const executor: JobExecutor = {
      source: 'local',
      async launch(job) {
        // j1: its spawn throws while it is held (ENOMEM); j2 waits for a word its failed write must still give.
        if (job.id === 'j1') throw new Error('spawn ENOMEM');
        job.onLauncher?.({ pid: 1, start: '1' } as never);
        words.set(job.id, await job.word!);
        return { exitCode: null, run: null, error: 'withdrawn before its word' };
      },
      follow: async () => null,
    };
    const managed = {
      prepare: async (_r: unknown, job: { id: string }, _s: unknown, early: (dir: string) => unknown) => {
        early(join(home, job.id));
        await new Promise((resolve) => setImmediate(resolve)); // the origin's answer comes later
        return join(home, job.id);
      },
    };
    const loop = createJobLoop({
      stores: { ...stores, jobs }, executor, managed: managed as never, clock: Date.now, tracer: {} as never,
      log: createLogger('job-loop-test', () => {}),
      settings: {
        concurrency: 2, repoConcurrency: 2, publicUrl: undefined,
        repos: { entries: [], byName: () => ({ name: 'api', checkout: null, clone: 'file:///nowhere' }) } as never,
      },
      notify: Object.assign(async () => {}, { progress: async () => {} }) as never,
    });
    try {
      loop.kick();
      await waitFor(() => words.has('j2'), 'j2\'s held launch told its word');
      assert.equal(words.get('j2'), false);
      await waitFor(() => ['j1', 'j2'].every((id) => stores.jobs.get(id)!.status === 'failed'), 'both jobs ended');
      for (const id of ['j1', 'j2']) {
        const row = stores.jobs.get(id)!;
        assert.deepEqual([row.error, row.launcher], ['internal error while running the job', null], id);
      }
    } finally {
      await loop.close();
    }
  });
});
