import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { OWN, sign } from './helpers.ts';
import {
  SECRETS, fixture, withJson, post, get, nowSeconds, rowCount, startTestTrigger, type TestTrigger,
} from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';

const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };
const posted: Array<{ url: string; body: string }> = [];

async function jobOf(t: TestTrigger, id: string): Promise<Record<string, unknown>> {
  return (await get(`${t.url}/jobs/${id}`, bearer)).body;
}

async function finished(t: TestTrigger, id: string): Promise<Record<string, unknown>> {
  return waitFor(async () => {
    const job = await jobOf(t, id);
    return job.status !== 'queued' && job.status !== 'running' ? job : null;
  }, `job ${id} to finish`);
}

describe('trigger routes with real payloads', () => {
  let t: TestTrigger;
  before(async () => {
    t = await startTestTrigger(
      { TRACKERB_ASSIGNEES: '712020:f1ad7cfd-7f82-4dc0-85e4-8bc47bcc08e4', CHATA_HOOKS_PREFIX: 'https://hooks.chata.test/' },
      { post: async (url, _h, body) => (posted.push({ url: url.href, body }), { status: 200, text: '{}' }) },
    );
  });
  after(() => t.cleanup());

  describe('POST /errtrack', () => {
    it('queues the alert fixture as `start "<brief>" --pr --detach` and the job ends with its run', async () => {
      const raw = fixture('sentry-event-alert-triggered.json');
      const res = await post(`${t.url}/errtrack`, raw, { 'errtrack-hook-signature': sign.hex(SECRETS.SVC_ERRTRACK_WEBHOOK_SECRET, raw), 'errtrack-hook-resource': 'event_alert' });
      assert.equal(res.status, 202);
      assert.equal(res.body.status, 'queued');
      const job = await finished(t, res.body.job_id as string);
      assert.equal(job.status, 'succeeded');
      assert.equal(job.origin, 'errtrack');
      const brief = job.brief as string;
      assert.match(brief, /ReferenceError: heck is not defined/);
      assert.ok(brief.includes('last deploy abcdef1'));
      assert.deepEqual(job.args, ['start', brief, '--pr', '--detach']);
      const call = t.calls().find((c) => c.args.includes(brief))!;
      // The run id the server chose, which the job's run has.
      const run = (job.run as { run: string }).run;
      assert.deepEqual(call.args, ['start', brief, '--pr', '--detach', '--run-id', run]);
      assert.equal(call.cwd, t.repo);
      assert.match(job.summary as string, /succeeded · run local\/r\w+ · verdict verified · PR https:\/\/git\.example\.test\/acme\/api\/pull\/7 · cost \$0\.42/);
    });
    it('starts one job for a new issue sent as issue.created and as an event_alert, in either order', async () => {
      const send = (name: string, resource: string, edit: (data: Record<string, Record<string, unknown>>) => void) => {
        const raw = withJson(name, (v) => edit(v.data as Record<string, Record<string, unknown>>));
        const signature = sign.hex(SECRETS.SVC_ERRTRACK_WEBHOOK_SECRET, raw);
        return post(`${t.url}/errtrack`, raw, { 'sentry-hook-signature': signature, 'sentry-hook-resource': resource });
      };
      const created = (id: string) => send('sentry-issue-created.json', 'issue', (d) => (d.issue!.id = id));
      const alert = (id: string, eventId: string, rule = 'Very Important Alert Rule!') => send(
        'sentry-event-alert-triggered.json', 'event_alert',
        (d) => Object.assign(d, { triggered_rule: rule }, { event: { ...d.event, issue_id: id, event_id: eventId } }),
      );
      const before = rowCount(t.stores.db, 'jobs');
      assert.equal((await created('5550001')).status, 202);
      assert.equal((await alert('5550001', 'e0001')).body.status, 'duplicate');
      assert.equal((await alert('5550002', 'e0002')).status, 202);
      assert.equal((await created('5550002')).body.status, 'duplicate');
      // A later alert for the same issue (another rule, a regression) is the same issue's job within the window.
      assert.equal((await alert('5550002', 'e0003', 'Regressions')).body.status, 'duplicate');
      assert.equal((await alert('5550003', 'e0004')).status, 202);
      assert.equal(rowCount(t.stores.db, 'jobs'), before + 3);
    });
    it('skips resources that do not start work', async () => {
      const raw = Buffer.from('{"action":"created","data":{"installation":{}}}');
      const res = await post(`${t.url}/errtrack`, raw, { 'errtrack-hook-signature': sign.hex(SECRETS.SVC_ERRTRACK_WEBHOOK_SECRET, raw), 'errtrack-hook-resource': 'installation' });
      assert.equal(res.status, 200);
      assert.equal(res.body.status, 'skipped');
    });
    it('answers a signed form body with 415, as every source that reads no forms does', async () => {
      const raw = Buffer.from('payload=%7B%7D');
      const res = await post(`${t.url}/errtrack`, raw, { 'content-type': 'application/x-www-form-urlencoded', 'errtrack-hook-signature': sign.hex(SECRETS.SVC_ERRTRACK_WEBHOOK_SECRET, raw), 'errtrack-hook-resource': 'event_alert' });
      assert.equal(res.status, 415);
      assert.equal((res.body.error as { code: string }).code, 'unsupported_media_type');
    });
  });

  describe('POST /chata', () => {
    function signed(raw: Buffer, type = 'application/x-www-form-urlencoded'): Record<string, string> {
      const ts = String(nowSeconds());
      return { 'content-type': type, 'x-chata-request-timestamp': ts, 'x-chata-signature': sign.chata(SECRETS.CHATA_SIGNING_SECRET, raw, ts) };
    }
    const slash = fixture('slack-slash-command.txt').toString();

    it('answers the real slash command with empty text with a usage reply and queues nothing', async () => {
      const jobRows = rowCount(t.stores.db, 'jobs');
      const res = await post(`${t.url}/chata`, Buffer.from(slash), signed(Buffer.from(slash)));
      assert.equal(res.status, 200);
      assert.equal(res.body.response_type, 'ephemeral');
      assert.match(res.body.text as string, /^Usage/);
      assert.equal(rowCount(t.stores.db, 'jobs'), jobRows);
    });
    it('queues slash text as one argv element with leading hyphens stripped and replies ephemerally with the job id', async () => {
      const raw = Buffer.from(slash.replace('text=', 'text=--pr+--deploy+fix+the+login+bug'));
      const res = await post(`${t.url}/chata`, raw, signed(raw));
      assert.equal(res.status, 200);
      assert.equal(res.body.response_type, 'ephemeral');
      const id = /Queued job (j\w{26})/.exec(res.body.text as string)![1]!;
      const job = await finished(t, id);
      assert.deepEqual(job.args, ['start', 'pr --deploy fix the login bug', '--detach']);
      // hooks.slack.com is not under the configured prefix: no reply target, never contacted (checked once the notifier is done).
      await t.jobLoop.idle();
      assert.equal(t.stores.replies.get(id), undefined);
      assert.ok(!posted.some((p) => p.url.includes('hooks.slack.com')));
    });
    it('queues the words a person typed, not Slack\'s escapes of them, and shows a bad repo= back escaped', async () => {
      const typed = 'fix a &lt; b &amp;&amp; Vec&lt;u8&gt; &amp;lt;';
      const raw = Buffer.from(slash.replace('text=', `text=${encodeURIComponent(typed)}`));
      const res = await post(`${t.url}/chata`, raw, signed(raw));
      const id = /Queued job (j\w{26})/.exec(res.body.text as string)![1]!;
      assert.deepEqual((await jobOf(t, id)).args, ['start', 'fix a < b && Vec<u8> &lt;', '--detach']);
      const bad = Buffer.from(slash.replace('text=', `text=${encodeURIComponent('fix it repo=&lt;!here&gt;')}`));
      const refused = await post(`${t.url}/chata`, bad, signed(bad));
      assert.equal(refused.body.text, 'repo=&lt;!here&gt; is not an owner/name. Nothing was queued.');
    });
    it('refuses a slash command that names no workspace, to start work or to answer, like a thread reply', async () => {
      const jobRows = rowCount(t.stores.db, 'jobs');
      for (const text of ['fix+the+login+bug', 'answer+use+prod']) {
        for (const team of ['', 'team_id=&']) {
          const raw = Buffer.from(slash.replace('team_id=T1DC2JH3J&', team).replace('text=', `text=${text}`));
          const res = await post(`${t.url}/chata`, raw, signed(raw));
          assert.equal(res.status, 200);
          assert.deepEqual(res.body, {
            response_type: 'ephemeral', text: 'Not queued or answered: a delivery that names no workspace.',
            status: 'skipped', reason: 'a delivery that names no workspace',
          });
        }
      }
      assert.equal(rowCount(t.stores.db, 'jobs'), jobRows);
    });
    it('answers url_verification with the challenge', async () => {
      const raw = fixture('slack-events-url-verification.json');
      const res = await post(`${t.url}/chata`, raw, signed(raw, 'application/json'));
      assert.deepEqual(res.body, { challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P' });
    });
  });

  describe('POST /trackera', () => {
    it('queues the issue fixture as `start trackera:LIN-34 --detach` and saves the verified payload', async () => {
      const raw = withJson('linear-issue-update.json', (v) => (v.webhookTimestamp = Date.now()));
      const res = await post(`${t.url}/trackera`, raw, { 'trackera-signature': sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw) });
      assert.equal(res.status, 202);
      const job = await finished(t, res.body.job_id as string);
      assert.deepEqual(job.args, ['start', 'trackera:LIN-34', '--detach']);
      assert.deepEqual(readFileSync(join(t.repo, '.svc', 'inbox', 'trackera', 'LIN-34.json')), raw);
    });
    it('skips comment events', async () => {
      const raw = withJson('linear-comment-create.json', (v) => (v.webhookTimestamp = Date.now()));
      const res = await post(`${t.url}/trackera`, raw, { 'trackera-signature': sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw) });
      assert.equal(res.status, 200);
      assert.equal(res.body.status, 'skipped');
    });
  });

  describe('POST /trackerb', () => {
    it('queues the real issue_created payload for the configured assignee', async () => {
      const raw = fixture('jira-issue-created.json');
      const res = await post(`${t.url}/trackerb`, raw, { 'x-hub-signature': `sha256=${sign.hex(SECRETS.TRACKERB_WEBHOOK_SECRET, raw)}`, 'x-vendorb-webhook-identifier': 'd-1' });
      assert.equal(res.status, 202);
      const job = await finished(t, res.body.job_id as string);
      const brief = job.brief as string;
      assert.match(brief, /^KAN-22: Add back button to pages — /);
      assert.deepEqual(job.args, ['start', '--brief', brief, '--pr', '--detach']);
    });
    it('skips an update that touches only the description', async () => {
      const raw = fixture('jira-issue-updated-description.json');
      const res = await post(`${t.url}/trackerb`, raw, { 'x-hub-signature': `sha256=${sign.hex(SECRETS.TRACKERB_WEBHOOK_SECRET, raw)}` });
      assert.equal(res.status, 200);
      assert.equal(res.body.status, 'skipped');
    });
  });

  describe('POST /chatb', () => {
    it('queues the mention fixture with mentions removed and replies "Queued … <job id>"', async () => {
      const raw = withJson('teams-outgoing-webhook-message-mention.json', (v) => (v.timestamp = new Date().toISOString()));
      const res = await post(`${t.url}/chatb`, raw, { authorization: sign.chatb(SECRETS.CHATB_SECURITY_TOKEN, raw) });
      assert.equal(res.status, 200);
      assert.equal(res.body.type, 'message');
      const text = res.body.text as string;
      assert.match(text, /^Queued/);
      const id = /(j\w{26})$/.exec(text)![1]!;
      const job = await finished(t, id);
      assert.deepEqual(job.args, ['start', '--brief', 'Hello', '--pr', '--detach']);
    });
  });

  describe('POST /webhook', () => {
    /** An `issues` event on acme/api, signed as GitHub signs it. */
    async function send(payload: Record<string, unknown>, delivery: string) {
      const raw = Buffer.from(JSON.stringify({ ...payload, repository: { full_name: 'acme/api' } }));
      const signature = `sha256=${sign.hex(SECRETS.GITHUB_WEBHOOK_SECRET, raw)}`;
      const headers = { 'x-hub-signature-256': signature, 'x-github-event': 'issues', 'x-github-delivery': delivery };
      return post(`${t.url}/webhook`, raw, headers);
    }
    it('queues an issue labelled svc', async () => {
      const raw = Buffer.from(JSON.stringify({ action: 'labeled', label: { name: 'svc' }, issue: { number: 3, title: 'Crash', body: 'on save', ...OWN }, sender: OWN.user, repository: { full_name: 'acme/api' } }));
      const res = await post(`${t.url}/webhook`, raw, { 'x-hub-signature-256': `sha256=${sign.hex(SECRETS.GITHUB_WEBHOOK_SECRET, raw)}`, 'x-github-event': 'issues', 'x-github-delivery': 'g-1' });
      assert.equal(res.status, 202);
      const job = await finished(t, res.body.job_id as string);
      assert.deepEqual(job.args, ['start', '--brief', 'acme/api#3 Crash — on save', '--pr', '--detach']);
    });
    it('skips an issue event with its true reason: a closed issue with the label is not "without" it', async () => {
      const jobRows = rowCount(t.stores.db, 'jobs');
      const issue = { number: 4, title: 'Crash', labels: [{ name: 'svc' }], author_association: 'OWNER' };
      const closed = await send({ action: 'closed', issue }, 'g-closed');
      assert.equal(closed.status, 200);
      assert.equal(closed.body.status, 'skipped');
      assert.equal(closed.body.reason, 'issues.closed does not start a job (the issue has the "svc" label): ' +
        'only issues.opened with the "svc" label or issues.labeled "svc" do');
      const other = await send({ action: 'labeled', label: { name: 'bug' }, issue }, 'g-bug');
      assert.equal(other.body.reason, 'issues.labeled adds "bug", not the "svc" label');
      const bare = await send({ action: 'opened', issue: { ...issue, labels: [] } }, 'g-bare');
      assert.equal(bare.body.reason, 'issues.opened without the "svc" label');
      assert.equal(rowCount(t.stores.db, 'jobs'), jobRows);
    });
    it('queues one job for an issue opened with the svc label, whichever of its two deliveries is first', async () => {
      // GitHub sends issues.opened (labels include svc) and issues.labeled svc by the author, each its own delivery.
      const at = '2026-11-29T09:00:00Z';
      const issue = (number: number, updated = at, id = 9000 + number) => ({
        id, number, title: 'Crash on login', user: { login: 'maintainer' }, author_association: 'MEMBER',
        labels: [{ name: 'svc' }], created_at: at, updated_at: updated,
      });
      const sender = { login: 'maintainer' };
      const opened = (number: number) => ({ action: 'opened', issue: issue(number), sender });
      const labeled = (number: number, updated = at) => ({
        action: 'labeled', label: { name: 'svc' }, issue: issue(number, updated), sender,
      });
      const first = await send(opened(41), 'g-opened-41');
      assert.equal(first.status, 202);
      const second = await send(labeled(41, '2026-11-29T09:00:01Z'), 'g-labeled-41');
      assert.deepEqual([second.status, second.body], [200, { status: 'duplicate' }]);
      // The other order: the label's delivery first.
      assert.equal((await send(labeled(42), 'g-labeled-42')).status, 202);
      assert.deepEqual((await send(opened(42), 'g-opened-42')).body, { status: 'duplicate' });
      // svc removed and added again two days later asks again: a job of its own.
      const again = await send(labeled(41, '2026-12-01T10:00:00Z'), 'g-labeled-41-again');
      assert.equal(again.status, 202);
      assert.notEqual(again.body.job_id, first.body.job_id);
      // A repository renamed or deleted, and a new one of its name: its issue 41 is another issue, with its own id.
      const recreated = await send({ action: 'opened', issue: issue(41, at, 7041), sender }, 'g-opened-41-new-repo');
      assert.equal(recreated.status, 202);
      // Both deliveries sent at once (so often claimed in one COMMIT), in either order: one job, one duplicate.
      for (const [number, pair] of [[43, [opened, labeled]], [44, [labeled, opened]]] as const) {
        const answers = await Promise.all(pair.map((make, i) => send(make(number), `g-together-${number}-${i}`)));
        const queued = answers.filter((a) => a.status === 202);
        assert.equal(queued.length, 1);
        assert.deepEqual(answers.filter((a) => a.status === 200).map((a) => a.body), [{ status: 'duplicate' }]);
        assert.ok(t.queue.get(queued[0]!.body.job_id as string));
      }
      // GitHub's retry of a delivery (the same body and X-GitHub-Delivery) is its duplicate, also of an opened one.
      assert.deepEqual((await send(opened(41), 'g-opened-41')).body, { status: 'duplicate' });
    });
    it('skips a ping', async () => {
      const raw = Buffer.from('{"zen":"hi"}');
      const res = await post(`${t.url}/webhook`, raw, { 'x-hub-signature-256': `sha256=${sign.hex(SECRETS.GITHUB_WEBHOOK_SECRET, raw)}`, 'x-github-event': 'ping' });
      assert.equal(res.body.status, 'skipped');
    });
    it('answers GitHub\'s default form content type with 415 naming the setting, after the signature', async () => {
      const ping = { zen: 'z', hook_id: 1, hook: { config: { content_type: 'form' } } };
      const raw = Buffer.from(`payload=${encodeURIComponent(JSON.stringify(ping))}`);
      const form = { 'content-type': 'application/x-www-form-urlencoded', 'x-github-event': 'ping' };
      const signed = (body: Buffer) => ({
        ...form, 'x-hub-signature-256': `sha256=${sign.hex(SECRETS.GITHUB_WEBHOOK_SECRET, body)}`,
      });
      const res = await post(`${t.url}/webhook`, raw, signed(raw));
      assert.equal(res.status, 415);
      const error = res.body.error as { code: string; message: string };
      assert.equal(error.code, 'unsupported_media_type');
      assert.match(error.message, /set the webhook's Content type to application\/json/);
      const forged = { ...form, 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` };
      assert.equal((await post(`${t.url}/webhook`, raw, forged)).status, 401);
      // JSON under the form type (curl -d) is still read as JSON.
      const json = Buffer.from('{"zen":"hi"}');
      assert.equal((await post(`${t.url}/webhook`, json, signed(json))).body.status, 'skipped');
    });
  });

  describe('POST /jobs and GET /jobs/<id>', () => {
    it('queues a brief, with and without --pr, and returns the job JSON of DESIGN §5', async () => {
      const res = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'tidy the README', pr: true }), bearer);
      assert.equal(res.status, 202);
      assert.deepEqual(Object.keys(res.body).sort(), ['job_id', 'status']);
      const job = await finished(t, res.body.job_id as string);
      assert.deepEqual(Object.keys(job).sort(), ['answers', 'args', 'brief', 'created_at', 'error', 'exit_code', 'finished_at', 'id', 'infra_retries', 'origin', 'repo', 'requeues', 'run', 'started_at', 'status', 'summary'].sort());
      assert.deepEqual(job.args, ['start', '--brief', 'tidy the README', '--pr', '--detach']);
      assert.equal(job.exit_code, 0);
      assert.equal((job.run as { source: string }).source, 'local');
      const plain = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'tidy the README' }), bearer);
      assert.deepEqual((await finished(t, plain.body.job_id as string)).args, ['start', '--brief', 'tidy the README', '--detach']);
    });
    it('keeps the job running until its run ends, not when the launcher exits', async () => {
      const res = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'stay-running please' }), bearer);
      const id = res.body.job_id as string;
      const running = await waitFor(async () => {
        const job = await jobOf(t, id);
        return job.run ? job : null;
      }, 'the run to be recorded');
      assert.equal(running.status, 'running');
      const run = (running.run as { run: string }).run;
      const statePath = join(t.repo, '.svc', 'runs', run, 'state.json');
      const state = JSON.parse(readFileSync(statePath, 'utf8')) as Record<string, unknown>;
      assert.equal((await jobOf(t, id)).status, 'running');
      writeFileSync(statePath, JSON.stringify({ ...state, status: 'failed', verdict: 'not_verified', error: 'checks failed', ended_at: new Date().toISOString() }));
      const job = await finished(t, id);
      assert.equal(job.status, 'failed');
      assert.equal(job.error, 'checks failed');
    });
    it('fails the job when the launcher fails, with its last stderr line naming svc start once', async () => {
      const res = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'launch-fail now' }), bearer);
      const job = await finished(t, res.body.job_id as string);
      assert.equal(job.status, 'failed');
      assert.equal(job.exit_code, 3);
      assert.equal(job.error, 'svc start exited with 3: provider not found');
    });
    it('refuses briefs that are empty, too long, multi-line or an option', async () => {
      for (const brief of ['', ' ', 'x'.repeat(4097), 'a\nb', '--deploy', 42]) {
        const res = await post(`${t.url}/jobs`, JSON.stringify({ brief }), bearer);
        assert.equal(res.status, 400, String(brief).slice(0, 20));
        assert.equal((res.body.error as { code: string }).code, 'invalid_param');
      }
      assert.equal((await post(`${t.url}/jobs`, JSON.stringify({ brief: 'x', deploy: true }), bearer)).status, 400);
      assert.equal((await post(`${t.url}/jobs`, 'brief=x', { ...bearer, 'content-type': 'text/plain' })).status, 415);
    });
    it('answers 404 for an unknown job and 400 for a malformed id', async () => {
      assert.equal((await get(`${t.url}/jobs/j${'0'.repeat(26)}`, bearer)).status, 404);
      assert.equal((await get(`${t.url}/jobs/..%2Fetc`, bearer)).status, 400);
    });
  });

  describe('GET /health and GET /status', () => {
    it('reports liveness and which routes are configured, as booleans only', async () => {
      assert.deepEqual((await get(`${t.url}/health`)).body, { status: 'ok' });
      const status = await get(`${t.url}/status`);
      const routes = status.body.routes as Record<string, { configured: boolean; enabled: boolean }>;
      assert.deepEqual(routes['/chatb'], { configured: true, enabled: true });
      // Each reply channel is reported by whether its settings are there: only CHATA_HOOKS_PREFIX is set here.
      assert.deepEqual(status.body.notifiers, { chata: true, trackera: false, trackerb: false, webhook: false });
      const text = JSON.stringify(status.body);
      for (const secret of Object.values(SECRETS)) assert.ok(!text.includes(secret));
    });
  });
});

describe('trigger configuration', () => {
  it('lets this machine look up a webhook-started job without SVC_API_TOKEN on a loopback-bound server', async () => {
    const t = await startTestTrigger({ SVC_API_TOKEN: undefined });
    try {
      const raw = Buffer.from(JSON.stringify({ action: 'labeled', label: { name: 'svc' },
        issue: { number: 4, title: 'Crash', body: 'on load', ...OWN }, sender: OWN.user, repository: { full_name: 'acme/api' } }));
      const signature = `sha256=${sign.hex(SECRETS.GITHUB_WEBHOOK_SECRET, raw)}`;
      const queued = await post(`${t.url}/webhook`, raw, { 'x-hub-signature-256': signature, 'x-github-event': 'issues',
        'x-github-delivery': 'g-no-token' });
      assert.equal(queued.status, 202);
      const job = await get(`${t.url}/jobs/${queued.body.job_id as string}`);
      assert.equal(job.status, 200);
      assert.equal(job.body.id, queued.body.job_id);
      // A reverse proxy on this machine connects from loopback too: what it relays is not this machine's caller.
      for (const path of [`/jobs/${queued.body.job_id as string}`, '/metrics']) {
        const proxies: Record<string, string>[] = [{ 'x-forwarded-for': '203.0.113.9' }, { forwarded: 'for=x' }, { via: '1.1 p' }];
        for (const relayed of proxies) {
          const proxied = await get(`${t.url}${path}`, relayed);
          assert.equal(proxied.status, 503, `${path} with ${JSON.stringify(relayed)}`);
          assert.equal((proxied.body.error as { code: string }).code, 'not_configured');
        }
      }
      assert.equal((await fetch(`${t.url}/metrics`)).status, 200);
      // Creating a job still needs the token: without one the route is not configured.
      const created = await post(`${t.url}/jobs`, '{"brief":"x"}', { 'content-type': 'application/json' });
      assert.equal(created.status, 503);
    } finally {
      await t.cleanup();
    }
  });

  it('answers 503 not_configured naming the variable when a route secret is missing', async () => {
    const t = await startTestTrigger({ TRACKERA_WEBHOOK_SECRET: undefined });
    try {
      const res = await post(`${t.url}/trackera`, '{}', { 'trackera-signature': 'x' });
      assert.equal(res.status, 503);
      assert.equal((res.body.error as { code: string }).code, 'not_configured');
      assert.match((res.body.error as { message: string }).message, /TRACKERA_WEBHOOK_SECRET/);
      assert.ok(t.logs.some((l) => l.level === 'warn' && l.msg.includes('TRACKERA_WEBHOOK_SECRET')));
      assert.equal((await get(`${t.url}/status`)).body.routes && ((await get(`${t.url}/status`)).body.routes as Record<string, { configured: boolean }>)['/trackera']!.configured, false);
    } finally {
      await t.cleanup();
    }
  });
  it('disables both routes at startup when two secrets are equal, and logs an error', async () => {
    const t = await startTestTrigger({ TRACKERB_WEBHOOK_SECRET: SECRETS.GITHUB_WEBHOOK_SECRET });
    try {
      const raw = fixture('jira-issue-created.json');
      const res = await post(`${t.url}/trackerb`, raw, { 'x-hub-signature': `sha256=${sign.hex(SECRETS.GITHUB_WEBHOOK_SECRET, raw)}` });
      assert.equal(res.status, 503);
      assert.match((res.body.error as { message: string }).message, /TRACKERB_WEBHOOK_SECRET and GITHUB_WEBHOOK_SECRET are equal/);
      const gh = await post(`${t.url}/webhook`, raw, { 'x-hub-signature-256': `sha256=${sign.hex(SECRETS.GITHUB_WEBHOOK_SECRET, raw)}` });
      assert.equal(gh.status, 503);
      assert.ok(t.logs.some((l) => l.level === 'error' && l.msg.includes('Disabled /trackerb and /webhook')));
      assert.equal(rowCount(t.stores.db, 'jobs'), 0);
    } finally {
      await t.cleanup();
    }
  });
  it('answers 429 with Retry-After and no job id when the queue is full', async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const t = await startTestTrigger(
      { SVC_TRIGGER_QUEUE_MAX: '1', SVC_TRIGGER_CONCURRENCY: '1' },
      {
        executor: {
          source: 'local',
          launch: async () => (await gate, { exitCode: 1, run: null, error: 'gated' }),
          follow: async () => null,
        },
      },
    );
    try {
      assert.equal((await post(`${t.url}/jobs`, JSON.stringify({ brief: 'one' }), bearer)).status, 202);
      await waitFor(() => t.queue.depth().running === 1, 'the first job to run');
      assert.equal((await post(`${t.url}/jobs`, JSON.stringify({ brief: 'two' }), bearer)).status, 202);
      const full = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'three' }), bearer);
      assert.equal(full.status, 429);
      assert.equal(full.headers.get('retry-after'), '30');
      assert.equal((full.body.error as { code: string }).code, 'too_many_requests');
      assert.ok(!('job_id' in full.body));
    } finally {
      release();
      await t.cleanup();
    }
  });
  it('does not create the inbox file for skipped trackera events', async () => {
    const t = await startTestTrigger();
    try {
      const raw = withJson('linear-comment-create.json', (v) => (v.webhookTimestamp = Date.now()));
      await post(`${t.url}/trackera`, raw, { 'trackera-signature': sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw) });
      assert.equal(existsSync(join(t.repo, '.svc', 'inbox')), false);
    } finally {
      await t.cleanup();
    }
  });
});
