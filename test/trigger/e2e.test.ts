import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sign } from './helpers.ts';
import { SECRETS, post, get, startTestTrigger, makeRepo } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };

describe('trigger → real svc start', () => {
  it('runs a chatb delivery through dist/cli.js start with a command provider and follows the run to its end', async () => {
    const repo = makeRepo();
    mkdirSync(join(repo, '.svc'), { recursive: true });
    writeFileSync(join(repo, '.svc', 'config.json'), JSON.stringify({ provider: 'fake', providers: { fake: { command: ['sh', '-c', 'echo fixed > fixed.txt'] } } }));
    const t = await startTestTrigger({}, { repo, cliPath: CLI });
    try {
      const res = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'write fixed.txt' }), bearer);
      assert.equal(res.status, 202);
      const id = res.body.job_id as string;
      const job = await waitFor(async () => {
        const j = (await get(`${t.url}/jobs/${id}`, bearer)).body;
        return j.status !== 'queued' && j.status !== 'running' ? j : null;
      }, 'the real run to end', 60_000);
      assert.equal(job.status, 'succeeded', String(job.error));
      const run = job.run as { source: string; run: string };
      const state = JSON.parse(readFileSync(join(repo, '.svc', 'runs', run.run, 'state.json'), 'utf8')) as Record<string, unknown>;
      assert.equal(state.status, 'succeeded');
      assert.equal(state.brief, 'write fixed.txt');
      assert.match(job.summary as string, new RegExp(`verdict ${String(state.verdict)}`));
      // A signed chatb delivery reaches the same engine; --pr is always passed for chatb.
      const raw = Buffer.from(JSON.stringify({ type: 'message', id: 'e2e-1', timestamp: new Date().toISOString(), text: '<at>svc</at> write fixed.txt' }));
      const reply = await post(`${t.url}/chatb`, raw, { authorization: sign.chatb(SECRETS.CHATB_SECURITY_TOKEN, raw) });
      const chatbId = /^Queued svc job (j\w{26})$/.exec(reply.body.text as string)?.[1];
      assert.ok(chatbId, String(reply.body.text));
      const chatbJob = await waitFor(async () => {
        const j = (await get(`${t.url}/jobs/${chatbId}`, bearer)).body;
        return j.status !== 'queued' && j.status !== 'running' ? j : null;
      }, 'the chatb run to end', 60_000);
      assert.equal(chatbJob.origin, 'chatb');
      assert.deepEqual(chatbJob.args, ['start', '--brief', 'write fixed.txt', '--pr', '--detach']);
      assert.ok(['succeeded', 'failed', 'interrupted'].includes(chatbJob.status as string), String(chatbJob.status));
      assert.ok(chatbJob.finished_at, 'a finished job has finished_at');
    } finally {
      await t.jobLoop.idle();
      await t.cleanup();
      rmSync(repo, { recursive: true, force: true });
    }
  });
});
