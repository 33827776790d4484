import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { sign } from './helpers.ts';
import { createHttpsPoster, httpsRequest } from '../../src/trigger/https-post.ts';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { errorMessage } from '../../src/errors.ts';
import { SECRETS, fixture, withJson, post, get, nowSeconds, startTestTrigger, tempDir, type TestTrigger } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { makeCert, startStandIn, type StandIn, type Cert } from './standins.ts';

const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };

describe('completion summaries', () => {
  let dir: string;
  let cert: Cert;
  let hooks: StandIn;
  let foreign: StandIn;
  let trackera: StandIn;
  let trackerb: StandIn;
  let control: StandIn;
  let t: TestTrigger;

  before(async () => {
    dir = tempDir('svc-cert-');
    cert = makeCert(dir);
    [hooks, foreign, trackera, trackerb, control] = await Promise.all([startStandIn(cert), startStandIn(cert), startStandIn(cert), startStandIn(cert), startStandIn(null)]);
    trackera.respond = () => ({ status: 200, body: '{"data":{"commentCreate":{"success":true}}}' });
    t = await startTestTrigger(
      {
        CHATA_HOOKS_PREFIX: `${hooks.url}/commands/`,
        TRACKERA_API_URL: `${trackera.url}/graphql`,
        TRACKERA_API_KEY: 'lin_api_key_8',
        TRACKERB_BASE_URL: trackerb.url,
        TRACKERB_EMAIL: 'bot@example.test',
        TRACKERB_API_TOKEN: 'jira-token-9',
        TRACKERB_LABELS: 'svc',
        TRACKERB_ASSIGNEES: '712020:f1ad7cfd-7f82-4dc0-85e4-8bc47bcc08e4',
        SVC_CONTROL_URL: control.url,
        SVC_PUBLIC_URL: 'https://svc.example.test/',
        SVC_CONTROL_TOKEN: 'control-token-10',
        SVC_SOURCE: 'build-host',
      },
      { post: createHttpsPoster({ ca: cert.cert }) },
    );
  });
  after(async () => {
    await t.cleanup();
    await Promise.all([hooks, foreign, trackera, trackerb, control].map((s) => s.close()));
    rmSync(dir, { recursive: true, force: true });
  });

  function chata(responseUrl: string, text: string): ReturnType<typeof post> {
    const raw = Buffer.from(
      fixture('slack-slash-command.txt').toString().replace('text=', `text=${text}`).replace(/response_url=[^&]+/, `response_url=${encodeURIComponent(responseUrl)}`),
    );
    const ts = String(nowSeconds());
    return post(`${t.url}/chata`, raw, { 'content-type': 'application/x-www-form-urlencoded', 'x-chata-request-timestamp': ts, 'x-chata-signature': sign.chata(SECRETS.CHATA_SIGNING_SECRET, raw, ts) });
  }

  function ingested(jobId: string): Record<string, unknown> | undefined {
    for (const r of control.requests) {
      const body = JSON.parse(r.body) as { notifications?: Array<Record<string, unknown>> };
      const n = body.notifications?.find((x) => x.job_id === jobId);
      if (n) return { ...n, _auth: r.headers.authorization, _source: (JSON.parse(r.body) as { source: string }).source };
    }
    return undefined;
  }

  it('posts the chata summary to a response_url under CHATA_HOOKS_PREFIX and reports it to the Control Plane', async () => {
    const res = await chata(`${hooks.url}/commands/T1/123/abc`, 'fix+it');
    const id = /(j\w{26})/.exec(res.body.text as string)![1]!;
    const sent = await waitFor(() => hooks.requests.find((r) => r.body.includes(id)), 'the chata summary');
    assert.equal(sent.path, '/commands/T1/123/abc');
    const body = JSON.parse(sent.body) as { text: string; response_type: string };
    assert.equal(body.response_type, 'ephemeral');
    // Slack-like mrkdwn: svc's own links in explicit <…> (summary-render.ts).
    assert.match(body.text, /succeeded · run build-host\/r\w+ · verdict verified · PR <https:\/\/git\.example\.test\/acme\/api\/pull\/7> · cost \$0\.42 · took \d+s · <https:\/\/svc\.example\.test\/#\/runs\/build-host\//);
    const report = await waitFor(() => ingested(id), 'the Control Plane report');
    assert.equal(report.status, 'sent');
    assert.equal(report.channel, 'chata');
    assert.equal(report.target, new URL(hooks.url).host);
    assert.equal(report.attempts, 1);
    assert.equal(report._auth, 'Bearer control-token-10');
    assert.equal(report._source, 'build-host');
    assert.ok(!JSON.stringify(report).includes('/commands/T1'));
  });

  it('never contacts a response_url on another host, or over http', async () => {
    const ids: string[] = [];
    for (const url of [`${foreign.url}/commands/T1/1/x`, `${hooks.url.replace('https:', 'http:')}/commands/T1/1/x`, `${hooks.url}.evil/commands/x`]) {
      const res = await chata(url, `other+${foreign.requests.length}+${Math.random().toString(36).slice(2)}`);
      const id = /(j\w{26})/.exec(res.body.text as string)![1]!;
      ids.push(id);
      await waitFor(async () => ((await get(`${t.url}/jobs/${id}`, bearer)).body.status === 'succeeded' ? true : null), 'the job');
    }
    await t.jobLoop.idle();
    assert.equal(foreign.requests.length, 0);
    for (const id of ids) {
      assert.equal(t.stores.replies.get(id), undefined, `no reply target stored for ${id}`);
      assert.equal(hooks.requests.some((r) => r.body.includes(id)), false, `no summary for ${id} reached the hooks host`);
    }
  });

  it('comments on the trackera issue through GraphQL with the API key', async () => {
    const raw = withJson('linear-issue-update.json', (v) => (v.webhookTimestamp = Date.now()));
    const res = await post(`${t.url}/trackera`, raw, { 'trackera-signature': sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw) });
    const id = res.body.job_id as string;
    const sent = await waitFor(() => trackera.requests.find((r) => r.body.includes(id)), 'the trackera comment');
    assert.equal(sent.path, '/graphql');
    assert.equal(sent.headers.authorization, 'lin_api_key_8');
    const body = JSON.parse(sent.body) as { query: string; variables: { input: { issueId: string; body: string } } };
    assert.match(body.query, /commentCreate/);
    assert.equal(body.variables.input.issueId, '7f2cba4d-6244-415c-ac09-63eb071755a8');
  });

  it('comments on the trackerb issue with an ADF body and basic auth', async () => {
    const raw = fixture('jira-issue-created.json');
    const res = await post(`${t.url}/trackerb`, raw, { 'x-hub-signature': `sha256=${sign.hex(SECRETS.TRACKERB_WEBHOOK_SECRET, raw)}` });
    const id = res.body.job_id as string;
    const sent = await waitFor(() => trackerb.requests.find((r) => r.body.includes(id)), 'the trackerb comment');
    assert.equal(sent.path, '/rest/api/3/issue/KAN-22/comment');
    assert.equal(sent.headers.authorization, `Basic ${Buffer.from('bot@example.test:jira-token-9').toString('base64')}`);
    const body = JSON.parse(sent.body) as { body: { type: string; version: number; content: Array<{ type: string }> } };
    assert.equal(body.body.type, 'doc');
    assert.equal(body.body.content[0]!.type, 'paragraph');
  });

  it('retries a failing origin, then gives up without failing the job, and logs the job id', async () => {
    trackerb.respond = () => ({ status: 503, body: '{}' });
    try {
      const raw = withJson('jira-issue-created.json', (v) => ((v.issue as { fields: Record<string, unknown> }).fields.summary = 'retry me'));
      const res = await post(`${t.url}/trackerb`, raw, { 'x-hub-signature': `sha256=${sign.hex(SECRETS.TRACKERB_WEBHOOK_SECRET, raw)}` });
      const id = res.body.job_id as string;
      const report = await waitFor(() => ingested(id), 'the failure report');
      assert.equal(report.status, 'failed');
      assert.equal(report.attempts, 4);
      assert.match(report.error as string, /HTTP 503/);
      assert.equal(trackerb.requests.filter((r) => r.body.includes(id)).length, 4);
      assert.equal((await get(`${t.url}/jobs/${id}`, bearer)).body.status, 'succeeded');
      assert.ok(t.logs.some((l) => l.msg === 'completion summary gave up' && l.job_id === id));
    } finally {
      trackerb.respond = () => ({ status: 200, body: '{}' });
    }
  });

  it('sends nothing for /jobs and chatb jobs (they have no later reply channel)', async () => {
    const before = hooks.requests.length + trackera.requests.length + trackerb.requests.length;
    const res = await post(`${t.url}/jobs`, JSON.stringify({ brief: 'nothing to notify' }), bearer);
    await waitFor(async () => ((await get(`${t.url}/jobs/${res.body.job_id as string}`, bearer)).body.status === 'succeeded' ? true : null), 'the job');
    await t.jobLoop.idle();
    assert.equal(hooks.requests.length + trackera.requests.length + trackerb.requests.length, before);
  });
});

describe('createHttpsPoster', () => {
  it('refuses to send anything over plain http', async () => {
    const control = await startStandIn(null);
    try {
      await assert.rejects(createHttpsPoster()(new URL(`${control.url}/x`), {}, '{}'), /non-https/);
      assert.equal(control.requests.length, 0);
    } finally {
      await control.close();
    }
  });

  it('gives up on an answer that never ends, however steadily it trickles, and keeps no more than its cap', async () => {
    const dir = tempDir('svc-trickle-');
    const cert = makeCert(dir);
    // A server that answers 200 and then writes a kilobyte every 50 ms, for ever: never idle, never done (`/whole`:
    // 100 kB at once, then done).
    const server = createServer({ key: cert.key, cert: cert.cert }, (req, res) => {
      res.writeHead(200);
      if (req.url === '/whole') {
        res.end('y'.repeat(100 * 1024));
        return;
      }
      if (req.url === '/emoji') {
        res.end('y'.repeat(9) + '😀'.repeat(10));
        return;
      }
      const drip = setInterval(() => res.write('x'.repeat(1024)), 50);
      res.on('close', () => clearInterval(drip));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/x`;
    try {
      // The answer drips for ever: only the whole-exchange limit ends it, and its error says so (a request that
      // read on would never settle, and the test's own time limit would fail it).
      const outcome = await httpsRequest(url, { method: 'GET', headers: {}, ca: cert.cert, timeoutMs: 400, cap: 10 })
        .then((r) => `answered ${r.text.length} characters`, (err: unknown) => errorMessage(err));
      assert.equal(outcome, 'no answer within 400 ms');
      const whole = await httpsRequest(url.replace(/\/x$/, '/whole'),
        { method: 'GET', headers: {}, ca: cert.cert, timeoutMs: 30_000, cap: 10 });
      assert.equal(whole.text, 'y'.repeat(10));
      // The cap is bytes: it never leaves half of a surrogate pair (an emoji is 4 bytes, 2 UTF-16 code units).
      const emoji = await httpsRequest(url.replace(/\/x$/, '/emoji'),
        { method: 'GET', headers: {}, ca: cert.cert, timeoutMs: 30_000, cap: 10 });
      assert.ok(emoji.text.isWellFormed(), JSON.stringify(emoji.text));
      assert.ok(Buffer.byteLength(emoji.text) <= 12);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
