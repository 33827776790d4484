// Fair queueing across repositories: 50 jobs queued for A, then one for B; B starts within one slot, and
// still does after a restart. The fake svc's "stay-running" runs hold their slot until the test ends them.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SECRETS, post, get, startTestTrigger, makeRepo, tempDir, type TestTrigger } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';

const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };

interface Org {
  a: string;
  b: string;
  file: string;
}

function org(): Org {
  const a = makeRepo('acme/a');
  const b = makeRepo('acme/b');
  const file = join(tempDir('svc-repos-file-'), 'repos.conf');
  writeFileSync(file, `acme/a checkout=${a}\nacme/b checkout=${b}\n`);
  return { a, b, file };
}

async function queue(t: TestTrigger, repo: string, brief: string): Promise<string> {
  const res = await post(`${t.url}/jobs`, JSON.stringify({ brief: `stay-running ${brief}`, repo }), bearer);
  assert.equal(res.status, 202, JSON.stringify(res.body));
  return res.body.job_id as string;
}

async function job(t: TestTrigger, id: string): Promise<Record<string, unknown>> {
  return (await get(`${t.url}/jobs/${id}`, bearer)).body;
}

/** Waits until the job's run is recorded (it holds a slot), and returns the run id. */
async function running(t: TestTrigger, id: string): Promise<string> {
  const run = await waitFor(async () => (await job(t, id)).run as { run: string } | null, `job ${id} to run`);
  return run.run;
}

/** Ends a "stay-running" run as the engine would: its state.json turns succeeded. */
function endRun(dir: string, run: string): void {
  const path = join(dir, '.svc', 'runs', run, 'state.json');
  const state = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  writeFileSync(path, JSON.stringify({ ...state, status: 'succeeded', ended_at: new Date().toISOString() }));
}

async function burst(t: TestTrigger, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push(await queue(t, 'acme/a', `job ${i} for a`));
  return ids;
}

describe('fair queueing across repositories', () => {
  it('starts B\'s job at once behind 50 queued for A: one slot is always left for another repository', async () => {
    const { a, file } = org();
    const t = await startTestTrigger({ SVC_TRIGGER_CONCURRENCY: '2' }, { repo: a, reposFile: file });
    try {
      assert.equal(t.settings.repoConcurrency, 1);
      const ids = await burst(t, 50);
      await running(t, ids[0]!);
      const b = await queue(t, 'acme/b', 'the one for b');
      await running(t, b);
      assert.deepEqual(t.queue.depth(), { queued: 49, running: 2 });
      assert.equal((await job(t, ids[1]!)).status, 'queued');
    } finally {
      await t.cleanup();
    }
  });

  it('with every slot held by A, starts B\'s job in the first slot that frees', async () => {
    const { a, file } = org();
    const t = await startTestTrigger(
      { SVC_TRIGGER_CONCURRENCY: '2', SVC_TRIGGER_REPO_CONCURRENCY: '2' }, { repo: a, reposFile: file },
    );
    try {
      const ids = await burst(t, 50);
      const first = await running(t, ids[0]!);
      await running(t, ids[1]!);
      const b = await queue(t, 'acme/b', 'the one for b');
      assert.equal((await job(t, b)).status, 'queued');
      endRun(a, first);
      await running(t, b);
      assert.equal((await job(t, ids[2]!)).status, 'queued');
      assert.deepEqual(t.queue.depth(), { queued: 48, running: 2 });
    } finally {
      await t.cleanup();
    }
  });

  it('keeps that order across a restart: the job still running from before had its turn', async () => {
    const { a, file } = org();
    const home = tempDir('svc-home-');
    const env = { SVC_TRIGGER_CONCURRENCY: '1' };
    const first = await startTestTrigger(env, { repo: a, reposFile: file, home });
    const ids = await burst(first, 3);
    const run = await running(first, ids[0]!);
    const b = await queue(first, 'acme/b', 'the one for b');
    await first.close();

    const again = await startTestTrigger(env, { repo: a, reposFile: file, home });
    try {
      assert.equal((await job(again, ids[0]!)).status, 'running');
      endRun(a, run);
      await running(again, b);
      assert.equal((await job(again, ids[1]!)).status, 'queued');
    } finally {
      await again.cleanup();
    }
  });
});
