// Follow-ups on svc's pull requests through the real trigger server (port 0, temp DB), a loopback HTTPS stand-in for
// the GitHub API and the fake svc on the job side. The attacks first: a forged event, an unauthorized commenter, a PR
// that is not svc's, a follow-up while one is still working; then what gets queued (brief, argv, the run before it),
// dedupe of a redelivery and of a review's own comment events.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, renameSync, writeFileSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { SECRETS, get, post, sign, startTestTrigger, tempDir, type TestTrigger } from './helpers.ts';
import { makeCert, startStandIn, type StandIn, type Recorded } from './standins.ts';
import { createGithubApi } from '../../src/trigger/github-api.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { makeRepo as makeEngineRepo, startGithubStandIn, CLI } from '../engine/fixtures.ts';

const bearer = { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` };
const REPO = { full_name: 'acme/api' };
const PR_URL = 'https://github.example/acme/api/pull/12';

let deliveries = 0;
function send(t: TestTrigger, event: string, payload: unknown, o: { delivery?: string; secret?: string } = {}) {
  const raw = Buffer.from(JSON.stringify(payload));
  const signature = `sha256=${sign.hex(o.secret ?? SECRETS.GITHUB_WEBHOOK_SECRET, raw)}`;
  deliveries += 1;
  return post(`${t.url}/webhook`, raw, {
    'x-hub-signature-256': signature, 'x-github-event': event, 'x-github-delivery': o.delivery ?? `fu-${deliveries}`,
  });
}

function prComment(number: number, body: string, association = 'OWNER', login = 'ada') {
  return {
    action: 'created', repository: REPO,
    issue: { number, title: 'svc: append fixed', pull_request: { url: `https://api.github.example/pulls/${number}` } },
    comment: { id: 1000 + deliveries, body, author_association: association, user: { login } },
  };
}

function pullJson(number: number, ref: string, headRepo = 'acme/api') {
  return { number, html_url: `https://github.example/acme/api/pull/${number}`, state: 'open',
    head: { ref, sha: 'a'.repeat(40), repo: { full_name: headRepo } }, base: { ref: 'main', repo: REPO } };
}

async function jobOf(t: TestTrigger, id: string) {
  return (await get(`${t.url}/jobs/${id}`, bearer)).body;
}

/** The job's reply target: its channel and where on GitHub (what a reply learns later, left out). */
function replyTarget(t: TestTrigger, id: string) {
  const row = t.stores.replies.get(id);
  if (row === undefined) return undefined;
  const { repo, issue, thread } = row.target;
  return { channel: row.channel, repo, issue, thread };
}

async function ended(t: TestTrigger, id: string) {
  return waitFor(async () => {
    const j = await jobOf(t, id);
    return j.status !== 'queued' && j.status !== 'running' ? j : null;
  }, `job ${id} to end`);
}

describe('/svc follow-ups on svc\'s pull requests', () => {
  let github: StandIn;
  let t: TestTrigger;
  let first: string;
  const pulls = new Map<string, unknown>();
  const reviewComments = new Map<string, unknown>();
  const jobCount = () => t.calls().length;
  const replies = () => github.requests.filter((r) => r.method === 'POST');

  before(async () => {
    const cert = makeCert(tempDir('svc-cert-'));
    github = await startStandIn(cert);
    github.respond = (req: Recorded) => {
      if (req.headers.authorization !== 'Bearer gh-token') return { status: 401, body: '{}' };
      if (req.method === 'POST') return { status: 201, body: '{"id":1}' };
      // Everyone asked about may write to acme/api but `reader` (a collaborator with read access only).
      const asked = /^\/repos\/acme\/api\/collaborators\/([^/]+)\/permission$/.exec(req.path)?.[1];
      if (asked) return { status: 200, body: JSON.stringify({ permission: asked === 'reader' ? 'read' : 'admin' }) };
      const found = pulls.get(req.path) ?? reviewComments.get(req.path);
      return found === undefined ? { status: 404, body: '{"message":"Not Found"}' } : { status: 200, body: JSON.stringify(found) };
    };
    t = await startTestTrigger({}, { github: createGithubApi({ apiUrl: github.url, token: 'gh-token' }, cert.cert) });
    // The run that opened the PR: a job of this server, started by a labelled issue.
    const opened = await send(t, 'issues', { action: 'labeled', label: { name: 'svc' }, repository: REPO,
      sender: { login: 'maintainer' }, issue: { number: 5, title: 'append fixed', labels: [{ name: 'svc' }] } });
    assert.equal(opened.status, 202);
    const job = await ended(t, opened.body.job_id as string);
    first = (job.run as { run: string }).run;
    // Its receipt, where the run's folder keeps it: the follow-up names its integrity.
    mkdirSync(join(t.repo, '.svc', 'runs', first, 'artifacts'), { recursive: true });
    writeFileSync(join(t.repo, '.svc', 'runs', first, 'artifacts', 'receipt.json'), JSON.stringify({ integrity: 'c'.repeat(64) }));
    pulls.set('/repos/acme/api/pulls/12', pullJson(12, `svc/${first}`));
    pulls.set('/repos/acme/api/pulls/13', pullJson(13, 'feature/by-hand'));
    // Named like svc's, but no run of this server made it; and one from a fork.
    pulls.set('/repos/acme/api/pulls/14', pullJson(14, `svc/r${'0'.repeat(26)}`));
    pulls.set('/repos/acme/api/pulls/15', pullJson(15, `svc/${first}`, 'mallory/api'));
    pulls.set('/repos/acme/api/pulls/16', { ...pullJson(16, `svc/${first}`), state: 'closed' });
  });
  after(async () => {
    await t.jobLoop.idle();
    await t.cleanup();
    await github.close();
  });

  it('a forged comment event (bad signature) is 401: no job, no GitHub call', async () => {
    const before = github.requests.length;
    const res = await send(t, 'issue_comment', prComment(12, '/svc fix it'), { secret: 'not-the-secret' });
    assert.equal(res.status, 401);
    assert.equal((res.body.error as { code: string }).code, 'invalid_signature');
    const forgedHeader = await send(t, 'pull_request_review', prComment(12, '/svc fix it'));
    assert.equal(forgedHeader.status, 400, 'a comment body sent as a review event');
    assert.equal(github.requests.length, before);
    assert.equal(jobCount(), 1);
  });

  it('an unauthorized commenter is refused with a reply on the PR and audited; no job', async () => {
    const res = await send(t, 'issue_comment', prComment(12, '/svc delete the tests', 'CONTRIBUTOR', 'mallory'));
    assert.equal(res.status, 200);
    assert.equal(res.body.status, 'refused');
    const reply = await waitFor(() => replies().find((r) => r.path === '/repos/acme/api/issues/12/comments'), 'the refusal reply');
    const text = (JSON.parse(reply.body) as { body: string }).body;
    assert.match(text, /only a repository owner, member or collaborator may ask svc/);
    assert.match(text, /CONTRIBUTOR/);
    assert.doesNotMatch(text, /mallory|delete the tests/, 'the reply carries none of the commenter\'s text');
    const audit = t.logs.find((l) => l.msg === 'audit: follow-up refused');
    assert.ok(audit, 'an audit line');
    assert.equal(audit.actor, 'mallory');
    assert.equal(audit.association, 'CONTRIBUTOR');
    assert.equal(audit.pr, 12);
    assert.equal(jobCount(), 1);
  });

  it('a COLLABORATOR who may only read (GitHub\'s API says) is refused with a reply and audited; no job', async () => {
    const res = await send(t, 'issue_comment', prComment(12, '/svc push my change', 'COLLABORATOR', 'reader'));
    assert.equal(res.body.status, 'refused');
    assert.equal(res.body.reason, 'the author may not write to this repository');
    assert.ok(github.requests.some((r) => r.path === '/repos/acme/api/collaborators/reader/permission'));
    const reply = await waitFor(() => replies().find((r) => r.body.includes('may write to the repository')),
      'the reply');
    assert.doesNotMatch(reply.body, /reader|push my change/);
    const audit = t.logs.find((l) => l.msg === 'audit: follow-up refused' && l.actor === 'reader');
    assert.equal(audit?.association, 'COLLABORATOR');
    assert.equal(jobCount(), 1);
  });

  it('a stranger\'s many /svc comments on svc\'s PR get one refusal reply, each still audited', async () => {
    const onPr = () => replies().filter((r) => r.path === '/repos/acme/api/issues/12/comments');
    const before = onPr().length;
    for (let i = 0; i < 3; i++) {
      const res = await send(t, 'issue_comment', prComment(12, `/svc spam ${i}`, 'NONE', 'spammer'));
      assert.equal(res.body.status, 'refused');
    }
    // Another person's refusal after: replies go out in the order they were decided, so once it is there a second
    // reply to the spammer would be too.
    await send(t, 'issue_comment', prComment(12, '/svc passing by', 'FIRST_TIMER', 'passer'));
    await waitFor(() => onPr().find((r) => r.body.includes('FIRST_TIMER')), 'the refusal to passer');
    assert.equal(onPr().length - before, 2, 'one reply to spammer, one to passer');
    assert.equal(t.logs.filter((l) => l.msg === 'audit: follow-up refused' && l.actor === 'spammer').length, 3);
    assert.equal(jobCount(), 1);
  });

  it('a /svc comment on a PR that is not svc\'s starts nothing and posts nothing', async () => {
    const posted = replies().length;
    for (const number of [13, 14, 15]) {
      const res = await send(t, 'issue_comment', prComment(number, '/svc fix it'));
      assert.equal(res.status, 200);
      assert.equal(res.body.status, 'skipped');
      assert.match(res.body.reason as string, new RegExp(`pull request #${number} is not svc's`));
    }
    const missing = await send(t, 'issue_comment', prComment(99, '/svc fix it'));
    assert.equal(missing.body.status, 'skipped', 'a PR the API does not know');
    const unserved = await send(t, 'issue_comment', { ...prComment(12, '/svc fix it'), repository: { full_name: 'acme/other' } });
    assert.equal(unserved.body.status, 'skipped');
    assert.equal(replies().length, posted);
    assert.equal(jobCount(), 1);
  });

  it('a follow-up on svc\'s PR once it is closed is refused with a reply; no job', async () => {
    const res = await send(t, 'issue_comment', prComment(16, '/svc one more thing'));
    assert.equal(res.body.status, 'refused');
    const reply = await waitFor(() => replies().find((r) => r.path === '/repos/acme/api/issues/16/comments'), 'the closed reply');
    assert.match((JSON.parse(reply.body) as { body: string }).body, /this pull request is closed/);
    assert.equal(jobCount(), 1);
  });

  let followUp: string;

  it('queues a follow-up on the PR branch naming the run before it; a redelivery is a duplicate', async () => {
    const payload = prComment(12, '/svc fix the review comments stay-running');
    const res = await send(t, 'issue_comment', payload, { delivery: 'fu-happy' });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    followUp = res.body.job_id as string;
    // Its progress comment goes to the PR's thread, where an answer on the PR finds the job.
    assert.deepEqual(replyTarget(t, followUp),
      { channel: 'webhook', repo: 'acme/api', issue: 12, thread: 'github:acme/api#12' });
    const again = await send(t, 'issue_comment', payload, { delivery: 'fu-happy' });
    assert.equal(again.body.status, 'duplicate');
    const job = await waitFor(async () => {
      const j = await jobOf(t, followUp);
      return j.run ? j : null;
    }, 'the follow-up to be launched');
    const brief = 'Follow-up on pull request acme/api#12: fix the review comments stay-running';
    assert.deepEqual(job.args, ['start', '--brief', brief, '--follow-up', `svc/${first}`, '--pr-url', PR_URL,
      '--previous', `local/${first}`, '--previous-receipt', 'c'.repeat(64), '--detach']);
    assert.equal(jobCount(), 2);
  });

  it('a follow-up while one is still working on the PR is refused with a reply; none is queued', async () => {
    const posted = replies().length;
    const res = await send(t, 'issue_comment', prComment(12, '/svc and another thing'));
    assert.equal(res.body.status, 'refused');
    assert.match(res.body.reason as string, /still working on this pull request/);
    const reply = await waitFor(() => replies().slice(posted).find((r) => r.path === '/repos/acme/api/issues/12/comments'), 'the busy reply');
    assert.match((JSON.parse(reply.body) as { body: string }).body, new RegExp(`job ${followUp}`));
    assert.equal(jobCount(), 2);
  });

  it('a submitted review\'s comments (file, line, text) go into the next follow-up, after the follow-up that ended', async () => {
    // The follow-up's run ends.
    const run = ((await jobOf(t, followUp)).run as { run: string }).run;
    const stateFile = join(t.repo, '.svc', 'runs', run, 'state.json');
    const state = JSON.parse(readFileSync(stateFile, 'utf8')) as Record<string, unknown>;
    writeFileSync(`${stateFile}.tmp`, JSON.stringify({ ...state, status: 'succeeded', ended_at: new Date().toISOString() }));
    renameSync(`${stateFile}.tmp`, stateFile);
    await ended(t, followUp);
    reviewComments.set('/repos/acme/api/pulls/12/reviews/77/comments?per_page=100', [
      { path: 'src/app.js', line: 3, body: 'rename x to total' },
      { path: 'README.md', line: null, original_line: 9, body: 'say why\nin one line' },
    ]);
    const pull = pullJson(12, `svc/${first}`);
    const approved = await send(t, 'pull_request_review', { action: 'submitted', repository: REPO, pull_request: pull,
      review: { id: 76, state: 'approved', body: 'LGTM', author_association: 'MEMBER', user: { login: 'bo' } } });
    assert.equal(approved.body.status, 'skipped');
    const res = await send(t, 'pull_request_review', { action: 'submitted', repository: REPO, pull_request: pull,
      review: { id: 77, state: 'changes_requested', body: '', author_association: 'MEMBER', user: { login: 'bo' } } });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    assert.deepEqual(replyTarget(t, res.body.job_id as string),
      { channel: 'webhook', repo: 'acme/api', issue: 12, thread: 'github:acme/api#12' });
    // GitHub also sends each of the review's comments as its own event: the same request, a duplicate.
    const comment = await send(t, 'pull_request_review_comment', { action: 'created', repository: REPO, pull_request: pull,
      comment: { id: 5, pull_request_review_id: 77, path: 'src/app.js', line: 3, body: '/svc rename x to total',
        author_association: 'MEMBER', user: { login: 'bo' } } });
    assert.equal(comment.body.status, 'duplicate');
    const job = await jobOf(t, res.body.job_id as string);
    const args = job.args as string[];
    assert.equal(args[2], 'Follow-up on pull request acme/api#12: Address the review comments. — review comments: ' +
      'src/app.js:3: rename x to total | README.md:9: say why in one line');
    assert.deepEqual(args.slice(3, 9), ['--follow-up', `svc/${first}`, '--pr-url', PR_URL, '--previous', `local/${run}`]);
    assert.ok(!args.includes('--previous-receipt'), 'the fake run left no receipt: none is named');
  });
});

describe('a /svc follow-up through dist/cli.js start: new commits on the same pull request', () => {
  it('pushes a fast forward to the PR branch (on top of a person\'s commit), and its receipt links back to the first run', async () => {
    const engineGithub = await startGithubStandIn();
    const repo = makeEngineRepo({ policy: { checks: [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'] }] } });
    writeFileSync(join(repo.repo, '.svc', 'config.json'), JSON.stringify({ provider: 'fake', providers: { fake: { command: [join(repo.bin, 'fake.sh')] } } }));
    const cert = makeCert(tempDir('svc-cert-'));
    const api = await startStandIn(cert);
    const t = await startTestTrigger({ GITHUB_TOKEN: 'gh-token', GITHUB_API_URL: engineGithub.url },
      { repo: repo.repo, home: repo.home, cliPath: CLI, github: createGithubApi({ apiUrl: api.url, token: 'gh-token' }, cert.cert) });
    const git = (...args: string[]) => execFileSync('git', args, { cwd: repo.origin, encoding: 'utf8' }).trim();
    const runFile = (run: string, ...path: string[]) => JSON.parse(readFileSync(join(repo.repo, '.svc', 'runs', run, ...path), 'utf8'));
    try {
      // The maintainer who labels the issue may write.
      api.respond = (req) => (req.path.endsWith('/permission') ? { status: 200, body: '{"permission":"write"}' }
        : { status: 404, body: '{}' });
      const opened = await send(t, 'issues', { action: 'labeled', label: { name: 'svc' }, repository: REPO,
        sender: { login: 'maintainer' }, issue: { number: 5, title: 'append fixed', labels: [{ name: 'svc' }] } });
      assert.equal(opened.status, 202, JSON.stringify(opened.body));
      const firstJob = await ended(t, opened.body.job_id as string);
      assert.equal(firstJob.status, 'succeeded', String(firstJob.error));
      const first = (firstJob.run as { run: string }).run;
      const branch = `svc/${first}`;
      const firstHead = git('rev-parse', `refs/heads/${branch}`);
      assert.equal(firstHead, runFile(first, 'state.json').head_sha);
      const pull = engineGithub.requests.filter((r) => r.method === 'POST');
      assert.equal(pull.length, 1);
      assert.equal(pull[0]!.body.head, branch);
      api.respond = (req) => (req.method === 'GET' && req.path === '/repos/acme/api/pulls/1'
        ? { status: 200, body: JSON.stringify(pullJson(1, branch)) }
        : req.path.endsWith('/permission') ? { status: 200, body: '{"permission":"write"}' }
        : { status: 404, body: '{}' });

      // A person pushes to the PR's branch before asking: the follow-up builds on their commit, never over it.
      const clone = tempDir('svc-human-');
      const inClone = (...args: string[]) => execFileSync('git', args, { cwd: clone, encoding: 'utf8' }).trim();
      inClone('clone', '-q', '--branch', branch, repo.origin, '.');
      writeFileSync(join(clone, 'human.txt'), 'by hand\n');
      inClone('add', '.');
      inClone('-c', 'user.name=Grace', '-c', 'user.email=grace@example.test', 'commit', '-qm', 'by hand');
      inClone('push', '-q', 'origin', branch);
      const humanHead = inClone('rev-parse', 'HEAD');

      const res = await send(t, 'issue_comment', prComment(1, '/svc fix the review comments'));
      assert.equal(res.status, 202, JSON.stringify(res.body));
      const job = await ended(t, res.body.job_id as string);
      assert.equal(job.status, 'succeeded', String(job.error));
      const run = (job.run as { run: string }).run;
      const state = runFile(run, 'state.json');
      const receipt = runFile(run, 'artifacts', 'receipt.json');
      // The same branch moved forward by the follow-up's commit, on top of the person's, on top of the first run's.
      const head = git('rev-parse', `refs/heads/${branch}`);
      assert.equal(head, state.head_sha);
      assert.equal(git('rev-parse', `${head}^`), humanHead);
      assert.equal(git('rev-parse', `${head}^^`), firstHead);
      assert.equal(state.base_sha, humanHead);
      assert.equal(state.pr_url, 'https://github.example/acme/api/pull/1');
      const posts = engineGithub.requests.filter((r) => r.method === 'POST').map((r) => r.path);
      assert.deepEqual(posts, ['/repos/acme/api/pulls', '/repos/acme/api/issues/1/comments'],
        'no second pull request; the follow-up\'s receipt as a comment on the first');
      assert.deepEqual(receipt.follows, { branch, source: 'local', run: first,
        receipt: runFile(first, 'artifacts', 'receipt.json').integrity });
    } finally {
      await t.jobLoop.idle();
      await t.cleanup();
      await api.close();
      await engineGithub.close();
      repo.cleanup();
    }
  });
});
