// A served repository's own files never widen what the server does (DESIGN §7a): links and special files a checkout=
// repository holds under .svc/inbox and .svc/deploys are never followed or opened while a webhook is answered.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SECRETS, get, post, sign, fixture, makeRepo, startTestTrigger, tempDir, withJson } from './helpers.ts';
import { DEPLOY_RECORDS_READ, latestDeployLine, recordDeploy } from '../../src/engine/deploys.ts';

const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };

describe('security: a checkout= repository\'s links under .svc', () => {

  async function deliverTrackera(
    repo: string,
  ): Promise<{ status: number; body: Record<string, unknown>; logs: Array<Record<string, unknown>> }> {
    const t = await startTestTrigger({}, { repo });
    try {
      const raw = withJson('linear-issue-update.json', (v) => (v.webhookTimestamp = Date.now()));
      const headers = { 'trackera-signature': sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw) };
      return { ...await post(`${t.url}/trackera`, raw, headers), logs: t.logs };
    } finally {
      await t.cleanup();
    }
  }

  for (const linked of [['.svc', 'inbox'], ['.svc', 'inbox', 'trackera'], ['.svc', 'inbox', 'trackera', 'jobs']]) {
    it(`writes no trackera snapshot through a link at ${linked.join('/')}: the job is queued without it, the log ` +
      'says why under its id, and nothing lands there', async () => {
      const repo = makeRepo();
      const outside = tempDir('svc-outside-');
      mkdirSync(join(repo, ...linked.slice(0, -1)), { recursive: true });
      symlinkSync(outside, join(repo, ...linked));
      const res = await deliverTrackera(repo);
      // 202, not a 500: trackera delivers again on any answer but 200, and would meet the same committed link.
      assert.equal(res.status, 202, JSON.stringify(res.body));
      const warned = res.logs.find((l) => l.msg === 'trackera snapshot not staged');
      assert.equal(warned?.job_id, res.body.job_id);
      assert.match(String(warned?.error), new RegExp(`${linked.at(-1)}": it is a symbolic link, not a plain directory`));
      assert.deepEqual(readdirSync(outside, { recursive: true }), []);
    });
  }

  it('answers 500 when the checkout itself is missing (unmounted), so trackera delivers again, and queues no job',
    async () => {
      const repo = makeRepo();
      const t = await startTestTrigger({}, { repo });
      try {
        rmSync(repo, { recursive: true, force: true });
        const raw = withJson('linear-issue-update.json', (v) => (v.webhookTimestamp = Date.now()));
        const headers = { 'trackera-signature': sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw) };
        const res = await post(`${t.url}/trackera`, raw, headers);
        assert.equal(res.status, 500, JSON.stringify(res.body));
        assert.equal(res.body.job_id, undefined);
        assert.equal(t.logs.some((l) => l.msg === 'trackera snapshot not staged'), false);
      } finally {
        await t.cleanup();
      }
    });

  it('replaces a link at .svc/inbox/trackera/<id>.json with the snapshot and leaves the host file it named alone',
    async () => {
      const repo = makeRepo();
      const outside = tempDir('svc-outside-');
      const victim = join(outside, 'victim.txt');
      writeFileSync(victim, 'operator data\n');
      mkdirSync(join(repo, '.svc', 'inbox', 'trackera'), { recursive: true });
      symlinkSync(victim, join(repo, '.svc', 'inbox', 'trackera', 'LIN-34.json'));
      const res = await deliverTrackera(repo);
      assert.equal(res.status, 202, JSON.stringify(res.body));
      assert.equal(readFileSync(victim, 'utf8'), 'operator data\n');
      assert.equal(JSON.parse(readFileSync(join(repo, '.svc', 'inbox', 'trackera', 'LIN-34.json'), 'utf8')).type,
        'Issue');
    });

  it('answers an errtrack alert at once past a deploy record linked to /dev/zero and one that is a FIFO', async () => {
    const repo = makeRepo();
    symlinkSync('/dev/zero', join(repo, '.svc', 'deploys', 'y.json'));
    execFileSync('mkfifo', [join(repo, '.svc', 'deploys', 'z.json')]);
    const t = await startTestTrigger({}, { repo });
    try {
      const raw = fixture('sentry-event-alert-triggered.json');
      const res = await post(`${t.url}/errtrack`, raw, {
        'errtrack-hook-signature': sign.hex(SECRETS.SVC_ERRTRACK_WEBHOOK_SECRET, raw),
        'errtrack-hook-resource': 'event_alert',
      });
      assert.equal(res.status, 202, JSON.stringify(res.body));
      const job = (await get(`${t.url}/jobs/${res.body.job_id as string}`, bearer)).body;
      // The plain records still tell the story.
      assert.match(job.brief as string, /last deploy abcdef1 2026-01-02T03:04:05\.000Z health=ok/);
    } finally {
      await t.cleanup();
    }
  });

  it('names each record by its ISO time, so the newest is read whatever form --finished-at took', async () => {
    const repo = makeRepo();
    const deploys = join(repo, '.svc', 'deploys');
    for (const name of readdirSync(deploys)) rmSync(join(deploys, name));
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    // RFC 2822 dates named as typed sort by weekday ("Thu…" after "2026…"), crowding the newest out of the cap.
    for (let i = 0; i < DEPLOY_RECORDS_READ; i++) {
      recordDeploy(repo, { sha: 'aaaaaaa', health: 'ok', finished_at: new Date(t0 + i * 3600e3).toUTCString() });
    }
    recordDeploy(repo, { sha: 'bbbbbbb', health: 'ok', finished_at: '2026-03-01T00:00:00Z' });
    assert.ok(readdirSync(deploys).includes('20260101T000000000Z-aaaaaaa.json'));
    assert.equal(await latestDeployLine(repo), 'last deploy bbbbbbb 2026-03-01T00:00:00.000Z health=ok');
  });

  it('reads only the last DEPLOY_RECORDS_READ deploy records by name, however many a repository commits', async () => {
    const repo = makeRepo();
    const deploys = join(repo, '.svc', 'deploys');
    for (const name of readdirSync(deploys)) rmSync(join(deploys, name));
    const record = (sha: string, at: string) => JSON.stringify({ sha, finished_at: at, health: 'ok' });
    // Named before every other record, yet the newest by its time: past the cap, so never read.
    writeFileSync(join(deploys, '0-planted.json'), record('fedcba9', '2030-01-01T00:00:00.000Z'));
    for (let i = 0; i < DEPLOY_RECORDS_READ; i++) {
      const name = `2026${String(i).padStart(4, '0')}.json`;
      writeFileSync(join(deploys, name), record('1234567', '2026-03-01T00:00:00.000Z'));
    }
    assert.equal(await latestDeployLine(repo), 'last deploy 1234567 2026-03-01T00:00:00.000Z health=ok');
    // One fewer record after it: it is within the last ones read, and the newest.
    rmSync(join(deploys, '20260000.json'));
    assert.equal(await latestDeployLine(repo), 'last deploy fedcba9 2030-01-01T00:00:00.000Z health=ok');
  });
});
