// Hostile traffic against a real trigger server: a flood on one route, duplicate floods,
// reply URLs that try to leave their prefix, run text that tries to become vendor markup, a relabelled event.
// Everything is sent to 127.0.0.1 only; real SQLite, real git repos, real child processes.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { sign } from './helpers.ts';
import { createHttpsPoster } from '../../src/trigger/https-post.ts';
import { isAllowedChataUrl } from '../../src/trigger/sources/chata.ts';
import { queueShares } from '../../src/trigger/queue.ts';
import {
  SECRETS, fixture, get, nowSeconds, post, rowCount, startTestTrigger, tempDir, withJson, type Res, type TestTrigger,
} from './helpers.ts';
import { makeCert, startStandIn, type Cert, type StandIn } from './standins.ts';
import { waitFor } from '../helpers/wait-for.ts';

const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };
/** The assignee of jira-issue-created.json, so that fixture queues a job. */
const ASSIGNEE = { TRACKERB_ASSIGNEES: '712020:f1ad7cfd-7f82-4dc0-85e4-8bc47bcc08e4' };

/** A signed chata slash command; without responseUrl the fixture's response_url is removed. */
function chata(url: string, text: string, responseUrl?: string): Promise<Res> {
  let form = fixture('slack-slash-command.txt').toString().replace('text=', `text=${encodeURIComponent(text)}`);
  form = responseUrl === undefined
    ? form.replace(/&response_url=[^&]+/, '')
    : form.replace(/response_url=[^&]+/, `response_url=${encodeURIComponent(responseUrl)}`);
  const raw = Buffer.from(form);
  const ts = String(nowSeconds());
  return post(`${url}/chata`, raw, {
    'content-type': 'application/x-www-form-urlencoded',
    'x-chata-request-timestamp': ts,
    'x-chata-signature': sign.chata(SECRETS.CHATA_SIGNING_SECRET, raw, ts),
  });
}

function chataJobId(res: Res): string {
  const match = /(j\w{26})/.exec(String(res.body.text));
  assert.ok(match, `a job id in ${JSON.stringify(res.body)}`);
  return match[1]!;
}

function jobsPost(url: string, brief: string): Promise<Res> {
  return post(`${url}/jobs`, JSON.stringify({ brief }), bearer);
}

function trackerb(url: string, raw: Buffer): Promise<Res> {
  const signature = `sha256=${sign.hex(SECRETS.TRACKERB_WEBHOOK_SECRET, raw)}`;
  return post(`${url}/trackerb`, raw, { 'x-hub-signature': signature });
}

async function jobStatus(url: string, id: string): Promise<string> {
  return String((await get(`${url}/jobs/${id}`, bearer)).body.status);
}

describe('hostile traffic: one route cannot fill the queue for the others', () => {
  let t: TestTrigger;
  // 7 configured routes, 14 waiting jobs: each route keeps 1, the other 7 are shared (queue-shares.ts).
  const shares = queueShares(14, 7);
  before(async () => {
    t = await startTestTrigger({ ...ASSIGNEE, SVC_TRIGGER_QUEUE_MAX: '14', SVC_TRIGGER_CONCURRENCY: '1' });
  });
  after(() => t.cleanup());

  it('splits 14 waiting jobs over 7 routes as a reserve of 1 each and a pool of 7', () => {
    assert.deepEqual(shares, { reserve: 1, pool: 7 });
  });

  it('answers a /jobs flood 429 past its reserve plus the pool, yet queues a signed chat delivery from another route',
    async () => {
      // A long run takes the only slot, so every later job waits in the queue.
      const first = await jobsPost(t.url, 'stay-running long job 0');
      assert.equal(first.status, 202);
      const firstId = String(first.body.job_id);
      // Running, with its run recorded (the launcher printed it).
      const run = await waitFor(
        async () => (await get(`${t.url}/jobs/${firstId}`, bearer)).body.run as { run: string } | null,
        'the first job to run',
      );

      const flood: number[] = [];
      for (let i = 1; i <= 20; i++) flood.push((await jobsPost(t.url, `stay-running long job ${i}`)).status);
      assert.equal(flood.filter((s) => s === 202).length, shares.reserve + shares.pool);
      assert.equal(flood.filter((s) => s === 429).length, 20 - shares.reserve - shares.pool);

      const chat = await chata(t.url, 'stay-running fix the login page');
      assert.equal(chat.status, 200, JSON.stringify(chat.body));
      const chatId = chataJobId(chat);
      const issue = await trackerb(t.url, fixture('jira-issue-created.json'));
      assert.equal(issue.status, 202, JSON.stringify(issue.body));

      // chata's own share (its reserve, the pool being full) is now used up: only now does chata get 429.
      const again = await chata(t.url, 'stay-running another ask');
      assert.equal(again.status, 429);
      assert.equal((again.body.error as { code: string }).code, 'too_many_requests');
      assert.deepEqual(t.queue.depth(), { queued: 10, running: 1 });

      // When the long run ends, the next job comes from a route that had none running: the chat job, not the flood.
      const state = join(t.repo, '.svc', 'runs', run.run, 'state.json');
      const running = JSON.parse(readFileSync(state, 'utf8')) as Record<string, unknown>;
      writeFileSync(state, JSON.stringify({ ...running, status: 'succeeded', ended_at: new Date().toISOString() }));
      await waitFor(async () => (await jobStatus(t.url, chatId)) === 'running', 'the chat job to run next');
      assert.equal(await jobStatus(t.url, firstId), 'succeeded');
      assert.deepEqual(t.queue.depth(), { queued: 9, running: 1 });
    });
});

describe('hostile traffic: duplicates do no work', () => {
  let t: TestTrigger;
  let bin: string;
  let count: string;
  const path = process.env.PATH;
  before(async () => {
    // A `git` first on PATH that records every invocation, then runs the real one.
    bin = tempDir('svc-gitwrap-');
    count = join(bin, 'invocations');
    writeFileSync(count, '');
    const realGit = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
    writeFileSync(join(bin, 'git'), `#!/bin/sh\nprintf '%s\\n' "$*" >> '${count}'\nexec '${realGit}' "$@"\n`);
    chmodSync(join(bin, 'git'), 0o755);
    process.env.PATH = `${bin}:${path}`;
    t = await startTestTrigger();
  });
  after(async () => {
    process.env.PATH = path;
    await t.cleanup();
    rmSync(bin, { recursive: true, force: true });
  });

  function gitLogs(): number {
    return readFileSync(count, 'utf8').split('\n').filter((line) => /(^| )log( |$)/.test(line)).length;
  }

  it('answers 51 concurrent copies of one signed errtrack delivery with 1 job and runs `git log` once', async () => {
    const raw = withJson('sentry-event-alert-triggered.json', (v) => {
      ((v.data as { event: { metadata: Record<string, unknown> } }).event.metadata).filename = 'src/app.js';
    });
    const headers = {
      'errtrack-hook-signature': sign.hex(SECRETS.SVC_ERRTRACK_WEBHOOK_SECRET, raw),
      'errtrack-hook-resource': 'event_alert',
    };
    const answers = await Promise.all(Array.from({ length: 51 }, () => post(`${t.url}/errtrack`, raw, headers)));
    const queued = answers.filter((a) => a.status === 202);
    assert.equal(queued.length, 1);
    assert.equal(answers.filter((a) => a.status === 200 && a.body.status === 'duplicate').length, 50);
    const job = (await get(`${t.url}/jobs/${String(queued[0]!.body.job_id)}`, bearer)).body;
    assert.match(String(job.brief), /last commit to src\/app\.js by Ada Lovelace/);
    assert.equal(gitLogs(), 1);

    // A later copy is answered from the dedupe index alone.
    const late = await post(`${t.url}/errtrack`, raw, headers);
    assert.equal(late.body.status, 'duplicate');
    assert.equal(gitLogs(), 1);
  });
});

describe('hostile traffic: reply URLs cannot leave CHATA_HOOKS_PREFIX by path', () => {
  it('refuses every URL that parsing would change, and encoded dots and slashes', () => {
    const prefix = 'https://host/hooks/';
    for (const url of [
      'https://host/hooks/../admin/x', 'https://host/hooks/%2e%2e/admin/x', 'https://host/hooks/%2E%2e/admin/x',
      'https://host/hooks/..\\admin/x', 'https://host/hooks/.\t./admin/x', 'https://host/hooks/x/..%2fadmin',
      'https://host/hooks/x%5C..%5Cadmin', 'https://host/hooks/./x', 'https://host/hooks/\u0001x',
      'https://host/hooks/x\n',
      ' https://host/hooks/x', 'https://HOST/hooks/x', 'https://host:443/hooks/x', 'https://user@host/hooks/x',
      'https://host/hooks', 'https://host/hooksx/y', 'http://host/hooks/x',
    ]) assert.equal(isAllowedChataUrl(url, prefix), false, JSON.stringify(url));
    assert.equal(isAllowedChataUrl('https://host/hooks/T1/397700885554/96rGlfmibIGlgcZRskXaIFfN', prefix), true);
    assert.equal(isAllowedChataUrl('https://host/hooksx/y', 'https://host/hooks'), false);
    assert.equal(isAllowedChataUrl('https://host/hooks/y', 'https://host/hooks'), true);
  });

  let dir: string;
  let cert: Cert;
  let hooks: StandIn;
  let t: TestTrigger;
  before(async () => {
    dir = tempDir('svc-cert-');
    cert = makeCert(dir);
    hooks = await startStandIn(cert);
    const poster = createHttpsPoster({ ca: cert.cert });
    t = await startTestTrigger({ CHATA_HOOKS_PREFIX: `${hooks.url}/hooks/` }, { post: poster });
  });
  after(async () => {
    await t.cleanup();
    await hooks.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('queues the command but stores no reply target and sends nothing for a response_url that escapes', async () => {
    const base = `${hooks.url}/hooks`;
    const hostile = [`${base}/../admin/x`, `${base}/%2e%2e/admin/x`, `${base}/..\\admin/x`, `${base}/.\t./admin/x`,
      `${base}/x/..%2fadmin`, `${base}/\u0001/../admin`];
    const ids: string[] = [];
    for (const [i, url] of hostile.entries()) {
      const res = await chata(t.url, `escape attempt ${i}`, url);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      ids.push(chataJobId(res));
    }
    for (const id of ids) assert.equal(t.stores.replies.get(id), undefined, `no reply target for ${id}`);
    // Said for each queued job, and not for a command that queues nothing (the usage reply to an empty text).
    const ignored = () => t.logs.filter((l) => l.msg === 'chata response_url ignored: not under CHATA_HOOKS_PREFIX');
    assert.deepEqual(ignored().map((l) => l.job_id), ids);
    assert.equal((await chata(t.url, '', hostile[0]!)).status, 200);
    assert.equal(ignored().length, ids.length);
    // The same server does deliver to a URL under the prefix, after the hostile jobs ended.
    for (const id of ids) await waitFor(async () => (await jobStatus(t.url, id)) === 'succeeded', `job ${id}`);
    const good = chataJobId(await chata(t.url, 'a normal ask', `${base}/T1/1/ok`));
    await waitFor(() => hooks.requests.find((r) => r.body.includes(good)), 'the summary under the prefix');
    assert.deepEqual(hooks.requests.map((r) => r.path), ['/hooks/T1/1/ok']);
  });
});

describe('hostile traffic: run text never becomes vendor markup or a mention', () => {
  const HOSTILE =
    '[Approve the release](https:/evil.example/login) @everyone <!here> <!channel> <@U024BE7LH> `x` *bold*';
  let dir: string;
  let cert: Cert;
  let hooks: StandIn;
  let trackeraApi: StandIn;
  let trackerbApi: StandIn;
  let t: TestTrigger;
  before(async () => {
    dir = tempDir('svc-cert-');
    cert = makeCert(dir);
    [hooks, trackeraApi, trackerbApi] = await Promise.all([startStandIn(cert), startStandIn(cert), startStandIn(cert)]);
    trackeraApi.respond = () => ({ status: 200, body: '{"data":{"commentCreate":{"success":true}}}' });
    t = await startTestTrigger({
      ...ASSIGNEE,
      CHATA_HOOKS_PREFIX: `${hooks.url}/hooks/`,
      TRACKERA_API_URL: `${trackeraApi.url}/graphql`,
      TRACKERA_API_KEY: 'lin_api_key_8',
      TRACKERB_BASE_URL: trackerbApi.url,
      TRACKERB_EMAIL: 'bot@example.test',
      TRACKERB_API_TOKEN: 'jira-token-9',
    }, { post: createHttpsPoster({ ca: cert.cert }) });
    // Every run in this project fails with the hostile text as its error (fake-svc.mjs).
    writeFileSync(join(t.repo, '.svc', 'fake-run-error.txt'), HOSTILE);
  });
  after(async () => {
    await t.cleanup();
    await Promise.all([hooks.close(), trackeraApi.close(), trackerbApi.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  /** Text outside CommonMark/mrkdwn code spans (a run of n backticks up to the next run of exactly n). */
  function outsideCode(text: string): string {
    return text.replace(/(`+)[\s\S]*?(?<!`)\1(?!`)/g, ' ');
  }

  function assertNoMarkup(text: string): void {
    for (const bad of ['](', 'evil.example', '@everyone', '<!', '<@', '*bold*']) {
      assert.ok(!text.includes(bad), `${JSON.stringify(bad)} outside code in ${JSON.stringify(text)}`);
    }
  }

  it('fences the error in the chata (Slack-like mrkdwn) summary and escapes its angle brackets', async () => {
    const id = chataJobId(await chata(t.url, 'any ask', `${hooks.url}/hooks/T1/2/x`));
    const sent = await waitFor(() => hooks.requests.find((r) => r.body.includes(id)), 'the chata summary');
    const text = (JSON.parse(sent.body) as { text: string }).text;
    assert.ok(text.includes('evil.example'), 'the error is shown');
    assert.ok(!text.includes('<!') && !text.includes('<@'), `no mention syntax anywhere: ${text}`);
    assertNoMarkup(outsideCode(text));
  });

  it('fences the error in the trackera (Linear-like markdown) comment', async () => {
    const raw = withJson('linear-issue-update.json', (v) => (v.webhookTimestamp = Date.now()));
    const signature = sign.hex(SECRETS.TRACKERA_WEBHOOK_SECRET, raw);
    const res = await post(`${t.url}/trackera`, raw, { 'trackera-signature': signature });
    const id = String(res.body.job_id);
    const sent = await waitFor(() => trackeraApi.requests.find((r) => r.body.includes(id)), 'the trackera comment');
    const body = (JSON.parse(sent.body) as { variables: { input: { body: string } } }).variables.input.body;
    assert.ok(body.includes(HOSTILE), `the error is shown whole, in a code span: ${body}`);
    assertNoMarkup(outsideCode(body));
  });

  it('gives the error only the code mark in the trackerb (Jira-like ADF) comment', async () => {
    const id = String((await trackerb(t.url, fixture('jira-issue-created.json'))).body.job_id);
    const sent = await waitFor(() => trackerbApi.requests.find((r) => r.body.includes(id)), 'the trackerb comment');
    type Mark = { type: string; attrs?: { href?: string } };
    type Node = { type: string; text?: string; marks?: Mark[]; content?: Node[] };
    const doc = (JSON.parse(sent.body) as { body: Node }).body;
    const texts: Node[] = [];
    const walk = (n: Node): void => {
      assert.ok(['doc', 'paragraph', 'text'].includes(n.type), `only text, never a ${n.type} node`);
      if (n.type === 'text') texts.push(n);
      for (const c of n.content ?? []) walk(c);
    };
    walk(doc);
    const error = texts.filter((n) => n.text?.includes('evil.example'));
    assert.deepEqual(error.map((n) => [n.text, n.marks]), [[HOSTILE, [{ type: 'code' }]]]);
    for (const n of texts) {
      for (const m of n.marks ?? []) {
        if (m.type === 'link') assert.ok(!m.attrs?.href?.includes('evil'), 'no link to the error text');
      }
    }
  });
});

describe('hostile traffic: the unsigned event header must match the signed body', () => {
  let t: TestTrigger;
  before(async () => {
    t = await startTestTrigger();
  });
  after(() => t.cleanup());

  function webhook(body: unknown, event: string): Promise<Res> {
    const raw = Buffer.from(JSON.stringify(body));
    const signature = `sha256=${sign.hex(SECRETS.GITHUB_WEBHOOK_SECRET, raw)}`;
    return post(`${t.url}/webhook`, raw, { 'x-hub-signature-256': signature, 'x-github-event': event });
  }

  const repository = { full_name: 'acme/api' };
  const pullRequest = { number: 5, title: 'Bump deps' };
  const prLabeled = { action: 'labeled', number: 5, label: { name: 'svc' }, pull_request: pullRequest, repository };

  it('refuses a pull_request.labeled body sent as `issues` with 400 invalid_param and queues nothing', async () => {
    const jobRows = rowCount(t.stores.db, 'jobs');
    const res = await webhook(prLabeled, 'issues');
    assert.equal(res.status, 400);
    assert.equal((res.body.error as { code: string }).code, 'invalid_param');
    assert.equal(rowCount(t.stores.db, 'jobs'), jobRows);
    assert.equal((await webhook(prLabeled, 'pull_request')).body.status, 'skipped');
  });

  it('skips a /svc comment without GITHUB_TOKEN, saying the server has none (not GitHub\'s failure)', async () => {
    const issue = { number: 9, title: 'Crash', author_association: 'OWNER', labels: [] };
    const comment = { id: 77, body: '/svc fix', author_association: 'OWNER', user: { login: 'octocat' } };
    const res = await webhook({ action: 'created', comment, issue, repository }, 'issue_comment');
    const reason = 'comment author may not start jobs: svc has no GITHUB_TOKEN (or GH_TOKEN) to ask GitHub whether '
      + 'the author may write to this repository';
    assert.deepEqual(res.body, { status: 'skipped', reason });
  });

  it('without GITHUB_TOKEN, starts nothing for a svc label by anyone but the issue\'s OWNER author', async () => {
    // Without a token the labeller's write permission cannot be asked: fail closed, as for a /svc comment.
    const jobRows = rowCount(t.stores.db, 'jobs');
    const issue = { number: 10, title: 'Crash', author_association: 'OWNER', labels: [{ name: 'svc' }],
      user: { login: 'octocat' } };
    const labeled = { action: 'labeled', label: { name: 'svc' }, issue, repository };
    const res = await webhook({ ...labeled, sender: { login: 'triager' } }, 'issues');
    const reason = 'label sender may not start jobs: svc has no GITHUB_TOKEN (or GH_TOKEN) to ask GitHub whether '
      + 'the label\'s sender may write to this repository';
    assert.deepEqual(res.body, { status: 'skipped', reason });
    assert.equal(rowCount(t.stores.db, 'jobs'), jobRows);
    // The author's own label keeps the association rule.
    assert.equal((await webhook({ ...labeled, sender: { login: 'octocat' } }, 'issues')).status, 202);
  });

  it('refuses an issue_comment body sent as `issues`, and an issues body sent as `issue_comment`', async () => {
    const issue = { number: 9, title: 'Crash', author_association: 'OWNER', labels: [{ name: 'svc' }] };
    const by = { body: '/svc fix', author_association: 'OWNER' };
    const comment = { action: 'created', comment: by, issue, repository };
    assert.equal((await webhook({ ...comment, action: 'labeled', label: { name: 'svc' } }, 'issues')).status, 400);
    const opened = { action: 'opened', issue, repository };
    assert.equal((await webhook(opened, 'issue_comment')).status, 400);
    assert.equal((await webhook(opened, 'issues')).status, 202);
  });
});
