// Regression tests for hostile deliveries once found to break the trigger server, sent signed to a real server.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sign } from './helpers.ts';
import { SECRETS, fixture, post, rowCount, startTestTrigger, type TestTrigger } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';

const POISON = '{"toString":1,"valueOf":null,"__proto__":{"x":1}}';

/** A fixture's JSON text with one field's value replaced by raw JSON text (so `__proto__` stays an own key). */
function withRaw(name: string, edit: (v: Record<string, unknown>) => void, hole: string): Buffer {
  const value = JSON.parse(fixture(name).toString('utf8')) as Record<string, unknown>;
  edit(value);
  return Buffer.from(JSON.stringify(value).replace('"__HOLE__"', () => hole));
}

describe('hostile signed deliveries', () => {
  let t: TestTrigger;
  before(async () => {
    t = await startTestTrigger({ TRACKERB_ASSIGNEES: '712020:f1ad7cfd-7f82-4dc0-85e4-8bc47bcc08e4' });
  });
  after(() => t.cleanup());

  async function trackera(raw: Buffer) {
    return post(`${t.url}/trackera`, raw, { 'trackera-signature': sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw) });
  }

  it('skips a trackera delivery whose type or action is an object carrying its own toString', async () => {
    for (const field of ['type', 'action'] as const) {
      const raw = withRaw('linear-issue-update.json', (v) => {
        v.webhookTimestamp = Date.now();
        v[field] = '__HOLE__';
      }, POISON);
      const res = await trackera(raw);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.status, 'skipped');
    }
  });

  it('skips a trackerb delivery whose type, action or changelog field is an object carrying its own toString', async () => {
    const edits: Array<(v: Record<string, unknown>) => void> = [
      (v) => (v.webhookEvent = '__HOLE__'),
      (v) => (v.changelog = { items: [{ field: '__HOLE__', fieldId: 'x' }] }),
    ];
    for (const edit of edits) {
      const raw = withRaw('jira-issue-updated-assignee.json', edit, POISON);
      const res = await post(`${t.url}/trackerb`, raw, { 'x-hub-signature': `sha256=${sign.hex(SECRETS.TRACKERB_WEBHOOK_SECRET, raw)}` });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.status, 'skipped');
    }
  });

  it('answers a signed body nested 10,000 deep with 400 invalid_json and queues nothing', async () => {
    const raw = withRaw('linear-issue-update.json', (v) => {
      v.webhookTimestamp = Date.now();
      v.data = '__HOLE__';
    }, `${'['.repeat(10_000)}${']'.repeat(10_000)}`);
    const jobRows = rowCount(t.stores.db, 'jobs');
    const res = await trackera(raw);
    assert.equal(res.status, 400);
    assert.equal((res.body.error as { code: string }).code, 'invalid_json');
    assert.equal(rowCount(t.stores.db, 'jobs'), jobRows);
  });
});

describe('50 concurrent trackera deliveries for one issue', () => {
  let t: TestTrigger;
  before(async () => {
    t = await startTestTrigger({ SVC_TRIGGER_QUEUE_MAX: '1000' });
  });
  after(() => t.cleanup());

  it('all get 2xx with a job each, and the saved snapshot is one of the delivered bodies, whole', async () => {
    const now = Date.now();
    const bodies = Array.from({ length: 50 }, (_, i) =>
      Buffer.from(JSON.stringify({ ...JSON.parse(fixture('linear-issue-update.json').toString('utf8')), webhookTimestamp: now, delivery: i, pad: 'x'.repeat(2000 + i) })),
    );
    const answers = await Promise.all(bodies.map((raw) => post(`${t.url}/trackera`, raw, { 'trackera-signature': sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw) })));
    assert.deepEqual(answers.map((a) => a.status), bodies.map(() => 202));
    assert.equal(new Set(answers.map((a) => a.body.job_id)).size, 50);
    for (const a of answers) assert.deepEqual(t.queue.get(a.body.job_id as string)?.args, ['start', 'trackera:LIN-34', '--detach']);
    const dir = join(t.repo, '.svc', 'inbox', 'trackera');
    const stored = readFileSync(join(dir, 'LIN-34.json'));
    assert.ok(bodies.some((b) => b.equals(stored)), 'the newest snapshot is one delivered body, whole');
    // Each job's own snapshot is exactly the delivery it came from (its run reads it through SVC_JOB_ID).
    answers.forEach((a, i) => assert.deepEqual(readFileSync(join(dir, 'jobs', `${a.body.job_id as string}.json`)), bodies[i], `job of delivery ${i}`));
    assert.deepEqual([...readdirSync(dir), ...readdirSync(join(dir, 'jobs'))].filter((n) => n.endsWith('.tmp')), []);
    await t.jobLoop.idle();
    const launched = t.calls().filter((c) => c.args.includes('trackera:LIN-34'));
    assert.equal(launched.length, 50);
    assert.deepEqual(new Set(launched.map((c) => c.env.SVC_JOB_ID)), new Set(answers.map((a) => a.body.job_id)));
  });

  it('keeps no snapshot for a delivery refused because the queue is full', async (tc) => {
    let release = (): void => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const held = { source: 'local', launch: () => gate.then(() => ({ exitCode: 1, run: null, error: 'released' })), follow: async () => null };
    const full = await startTestTrigger({ SVC_TRIGGER_QUEUE_MAX: '1', SVC_TRIGGER_CONCURRENCY: '1' }, { executor: held });
    tc.after(async () => {
      release();
      await full.cleanup();
    });
    const send = (i: number) => {
      const raw = Buffer.from(JSON.stringify({ ...JSON.parse(fixture('linear-issue-update.json').toString('utf8')), webhookTimestamp: Date.now(), delivery: i }));
      return post(`${full.url}/trackera`, raw, { 'trackera-signature': sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw) });
    };
    // One job is launching (held), one waits in the queue, the third finds the queue full.
    assert.equal((await send(0)).status, 202);
    await waitFor(() => full.queue.depth().running === 1, 'the first job to be running');
    assert.equal((await send(1)).status, 202);
    assert.equal((await send(2)).status, 429);
    const dir = join(full.repo, '.svc', 'inbox', 'trackera');
    assert.equal(JSON.parse(readFileSync(join(dir, 'LIN-34.json'), 'utf8')).delivery, 1, 'the refused delivery did not replace the snapshot');
    assert.equal(readdirSync(join(dir, 'jobs')).length, 2);
  });
});
