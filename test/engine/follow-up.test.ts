// Follow-up runs on a pull request svc opened: the real CLI, a real bare origin, a command provider, and the GitHub
// REST stand-in. Hostile first: a person's commit pushed to the PR branch while the follow-up works is never
// overwritten; then a follow-up builds on a person's earlier commit and fast-forwards the branch, and its receipt
// names the run before it.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, startGithubStandIn, readJson, CLI, ASK_SCRIPT, EDIT_SCRIPT, GIT_ENV, type StandIn, type TestRepo } from './fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { followUpRequest, followUpSession } from '../../src/engine/follow-up.ts';

/** Appends one line naming the pass to a.txt, so every follow-up has a diff of its own. */
const MORE_SCRIPT = `#!/bin/sh
cat > /dev/null
echo "follow-up fixed $SVC_RUN_ID" >> a.txt
`;

describe('svc start --follow-up', () => {
  let github: StandIn;
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    github = await startGithubStandIn();
    repo = makeRepo({
      policy: { checks: [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'] }], max_usd: 5 },
      providers: { fake: EDIT_SCRIPT, more: MORE_SCRIPT, ask: ASK_SCRIPT, idle: '#!/bin/sh\ncat > /dev/null\n' },
    });
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, GITHUB_API_URL: github.url, GITHUB_TOKEN: 'gh-test-token',
      SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0', SVC_CONTROL_ANSWER_DIR: join(repo.root, 'answers') };
  });
  after(async () => {
    await github.close();
    repo.cleanup();
  });

  function svc(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: repo.repo, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    return new Promise((resolve) => child.on('close', (status) => resolve({ status, stdout, stderr })));
  }
  const state = (run: string) => readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
  const receipt = (run: string) => readJson(join(repo.repo, '.svc', 'runs', run, 'artifacts', 'receipt.json'));
  const originHead = (branch: string) => execFileSync('git', ['rev-parse', `refs/heads/${branch}`], { cwd: repo.origin, encoding: 'utf8' }).trim();
  const firstLine = (out: string) => JSON.parse(out.split('\n')[0]!) as { source: string; run: string };

  /** A person's commit on the PR branch, pushed to the origin from a clone of their own. */
  function humanPush(branch: string, line: string): string {
    const clone = mkdtempSync(join(repo.root, 'human-'));
    const git = (...args: string[]) => execFileSync('git', args, { cwd: clone, encoding: 'utf8', env: { ...process.env, ...GIT_ENV } });
    git('clone', '-q', '--branch', branch, repo.origin, '.');
    writeFileSync(join(clone, 'human.txt'), `${line}\n`);
    git('add', '.');
    git('-c', 'user.name=Grace', '-c', 'user.email=grace@example.test', 'commit', '-qm', line);
    git('push', '-q', 'origin', branch);
    return git('rev-parse', 'HEAD').trim();
  }

  let first: string;
  let branch: string;

  it('a first --pr run opens the pull request on svc/<run>', async () => {
    const res = await svc(['start', '--brief', 'append fixed', '--pr', '--provider', 'fake']);
    assert.equal(res.status, 0, res.stderr);
    first = firstLine(res.stdout).run;
    branch = `svc/${first}`;
    assert.equal(state(first).status, 'succeeded');
    assert.equal(originHead(branch), state(first).head_sha);
  });

  it('refuses a branch svc did not make, and one the origin does not have, before anything is written', async () => {
    const main = await svc(['start', '--brief', 'x', '--follow-up', 'main', '--provider', 'more']);
    assert.equal(main.status, 2, main.stderr);
    assert.match(main.stderr, /--follow-up needs a branch svc made/);
    const missing = await svc(['start', '--brief', 'x', '--follow-up', 'svc/rnothere', '--provider', 'more']);
    assert.notEqual(missing.status, 0);
    assert.match(missing.stderr, /cannot be fetched/);
  });

  it('refuses a follow-up the policy could not push (pr.open "never"), before anything is written', async () => {
    const policy = join(repo.repo, '.svc', 'policy.json');
    const saved = readFileSync(policy, 'utf8');
    writeFileSync(policy, JSON.stringify({ ...JSON.parse(saved), pr: { open: 'never' } }));
    try {
      const never = await svc(['start', '--brief', 'x', '--follow-up', branch, '--provider', 'more']);
      assert.notEqual(never.status, 0);
      assert.match(never.stderr, /Refusing to start a follow-up: the policy says pr\.open = "never"/);
      assert.equal(JSON.parse(never.stdout).failure.class, 'policy');
    } finally {
      writeFileSync(policy, saved);
    }
  });

  it('never pushes over a commit a person pushed to the branch while the follow-up worked: it fails and says why', async () => {
    const before = originHead(branch);
    const res = await svc(['start', '--brief', 'ask first', '--follow-up', branch, '--provider', 'ask', '--detach']);
    assert.equal(res.status, 0, res.stderr);
    const run = firstLine(res.stdout).run;
    await waitFor(() => (state(run).status === 'blocked' ? true : null), 'the follow-up to ask');
    assert.equal(state(run).base_sha, before, 'it started from the head the branch had on the origin');
    const human = humanPush(branch, 'a person fixes it by hand');
    const answered = await svc(['answer', `local/${run}`, 'fixed by the agent']);
    assert.equal(answered.status, 0, answered.stderr);
    const done = await waitFor(() => (['succeeded', 'failed'].includes(state(run).status) ? state(run) : null), 'the follow-up to end');
    assert.equal(done.status, 'failed');
    assert.match(done.error, /Follow-up not pushed: the branch "svc\/\S+" moved on the origin .*nothing was pushed/);
    assert.equal(originHead(branch), human, "the person's commit is still the branch's head");
    assert.equal(done.pr_url, null);
  });

  it('builds on the branch as the origin has it (a person\'s commit included), fast-forwards it, and its receipt names the run before', async () => {
    const human = originHead(branch);
    const pullsBefore = github.requests.filter((r) => r.method === 'POST').length;
    const res = await svc(['start', '--brief', 'fix the review comments', '--follow-up', branch, '--provider', 'more',
      '--pr-url', 'https://github.example/acme/api/pull/1', '--previous', `local/${first}`,
      '--previous-receipt', receipt(first).integrity]);
    assert.equal(res.status, 0, res.stderr);
    const run = firstLine(res.stdout).run;
    const done = state(run);
    assert.equal(done.status, 'succeeded', done.error);
    assert.equal(done.base_sha, human);
    assert.equal(done.branch, `svc/${run}`, 'its own local branch; the origin branch is the PR\'s');
    assert.equal(done.pr_url, 'https://github.example/acme/api/pull/1');
    const head = originHead(branch);
    assert.equal(head, done.head_sha);
    // A fast forward: the person's commit is an ancestor of the new head, which is one commit on top of it.
    execFileSync('git', ['merge-base', '--is-ancestor', human, head], { cwd: repo.origin });
    assert.equal(execFileSync('git', ['rev-parse', `${head}^`], { cwd: repo.origin, encoding: 'utf8' }).trim(), human);
    const posts = github.requests.filter((r) => r.method === 'POST').slice(pullsBefore);
    assert.deepEqual(posts.map((p) => p.path), ['/repos/acme/api/issues/1/comments'], 'no second pull request: a comment');
    // The comment carries the follow-up's receipt, which verifies from the comment's text as from a PR body.
    const comment = join(repo.root, 'comment.md');
    writeFileSync(comment, posts[0]!.body.body);
    assert.match(posts[0]!.body.body, new RegExp(`It follows \`local/${first}\``));
    const fromComment = await svc(['receipt', 'verify', comment]);
    assert.equal(fromComment.status, 0, fromComment.stderr + fromComment.stdout);
    assert.match(fromComment.stdout, new RegExp(`run local/${run}`));
    const r = receipt(run);
    assert.deepEqual(r.follows, { branch, source: 'local', run: first, receipt: receipt(first).integrity });
    assert.deepEqual(r.diff.paths, ['a.txt'], 'the receipt covers only this run\'s changes');
    for (const id of [first, run]) {
      const verify = await svc(['receipt', 'verify', join(repo.repo, '.svc', 'runs', id, 'artifacts', 'receipt.json')]);
      assert.equal(verify.status, 0, verify.stderr + verify.stdout);
    }
    assert.equal(receipt(first).follows, undefined, 'the first receipt has no link and still verifies');
  });

  it('without --previous, links to the newest ended run on the branch in this checkout', async () => {
    const res = await svc(['start', '--brief', 'one more', '--follow-up', branch, '--provider', 'more']);
    assert.equal(res.status, 0, res.stderr);
    const run = firstLine(res.stdout).run;
    const last = (readJson(join(repo.repo, '.svc', 'runs', run, 'state.json')).follow_up.previous);
    assert.equal(state(run).status, 'succeeded', state(run).error);
    assert.notEqual(last.run, first);
    assert.equal(state(last.run).status, 'succeeded');
    assert.deepEqual(receipt(run).follows, { branch, source: 'local', run: last.run, receipt: receipt(last.run).integrity });
    assert.equal(originHead(branch), state(run).head_sha);
  });

  it('a follow-up whose agent changes nothing (the work was already done) succeeds and pushes nothing', async () => {
    const before = originHead(branch);
    const res = await svc(['start', '--brief', 'already done?', '--follow-up', branch, '--provider', 'idle']);
    assert.equal(res.status, 0, res.stderr);
    const run = firstLine(res.stdout).run;
    assert.equal(state(run).status, 'succeeded', state(run).error);
    assert.equal(state(run).failure, null);
    assert.equal(state(run).verdict, 'verified_with_gaps');
    assert.ok(receipt(run).gaps.includes('the diff is empty'));
    assert.equal(originHead(branch), before);
  });
});

describe('the --follow-up request', () => {
  it('names the flag that is malformed: --pr-url, --previous, --previous-receipt (which needs --previous)', () => {
    const ask = (more: object) => () => followUpRequest({ branch: 'svc/r1', ...more });
    assert.throws(ask({ prUrl: 'ftp://example.test/pull/1' }), { code: 'bad_input', message: '--pr-url must be an http(s) URL' });
    assert.throws(ask({ previous: 'local' }), { code: 'bad_input', message: '--previous must be SOURCE/RUN' });
    assert.throws(ask({ previous: 'local/../x' }), { code: 'bad_input', message: '--previous must be SOURCE/RUN' });
    const receipt = /--previous-receipt must be a receipt integrity \(64 hex digits\), with --previous/;
    assert.throws(ask({ previous: 'local/r0', previousReceipt: 'abc' }), receipt);
    assert.throws(ask({ previousReceipt: 'a'.repeat(64) }), receipt);
    assert.deepEqual(followUpRequest({ branch: 'svc/r1', prUrl: 'https://example.test/o/r/pull/7', previous: 'local/r0',
      previousReceipt: 'a'.repeat(64) }),
    { branch: 'svc/r1', pr_url: 'https://example.test/o/r/pull/7', previous: { source: 'local', run: 'r0', receipt: 'a'.repeat(64) } });
  });
});

describe('the session a follow-up inherits', () => {
  it('comes from a run folder svc made, never from one the repository commits', () => {
    const repo = makeRepo();
    try {
      const dir = join(repo.repo, '.svc', 'runs', 'rprev');
      mkdirSync(dir, { recursive: true });
      const session = { kind: 'claude', id: '0b7f3a4e-8c1d-4f2a-9e6b-2d5c8a1f3e7b', answers_given: 0, spec_sha256: 'a'.repeat(64),
        questions: [], last_output: null, resumed: null };
      writeFileSync(join(dir, 'state.json'), JSON.stringify({ source: 'local', run: 'rprev', status: 'succeeded', provider: 'claude',
        provider_session: session }));
      const followUp = { branch: 'svc/rprev', pr_url: null, previous: { source: 'local', run: 'rprev', receipt: null } };
      assert.equal(followUpSession(repo.repo, followUp, 'claude')?.id, session.id);
      execFileSync('git', ['add', '-f', '.svc/runs/rprev/state.json'], { cwd: repo.repo, env: { ...process.env, ...GIT_ENV } });
      execFileSync('git', ['commit', '-qm', 'a run folder of its own'], { cwd: repo.repo, env: { ...process.env, ...GIT_ENV } });
      assert.equal(followUpSession(repo.repo, followUp, 'claude'), null);
    } finally {
      repo.cleanup();
    }
  });
});
