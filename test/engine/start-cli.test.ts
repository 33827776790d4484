import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, spawn } from 'node:child_process';
import { readFileSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { generateKeyPairSync } from 'node:crypto';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { makeRepo, startGithubStandIn, readJson, CLI, ASK_SCRIPT, EDIT_SCRIPT, SPEND_SCRIPT, GIT_ENV, type StandIn, type TestRepo } from './fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { issueReceipt, verifyReceipt, receiptFromMarkdown } from '../../src/engine/receipt.ts';
import { keyIdOf, loadOrCreateSigningKey } from '../../src/keys.ts';
import { latestDeployLine } from '../../src/engine/deploys.ts';

const FIXTURES = new URL('./fixtures', import.meta.url).pathname;

describe('svc start from the command line', () => {
  let github: StandIn;
  let control: TestControl;
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    github = await startGithubStandIn();
    control = await startTestControl();
    repo = makeRepo({
      policy: { checks: [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'] }], max_usd: 1 },
      providers: { fake: EDIT_SCRIPT, ask: ASK_SCRIPT, spender: SPEND_SCRIPT, idle: '#!/bin/sh\ncat > /dev/null\n' },
    });
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, GITHUB_API_URL: github.url, GITHUB_TOKEN: 'gh-test-token', SVC_CONTROL_URL: control.url, SVC_CONTROL_ANSWER_DIR: join(repo.root, 'answers'), SVC_PUBLIC_URL: 'https://svc.example.test' };
  });
  after(async () => {
    await control.close();
    await github.close();
    repo.cleanup();
  });

  // Async on purpose: spawnSync would block this process, and with it the in-process Control Plane the run ships to.
  function svc(args: string[], extra: NodeJS.ProcessEnv = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: repo.repo, env: { ...env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    return new Promise((resolve) => child.on('close', (status) => resolve({ status, stdout, stderr })));
  }

  function state(run: string) {
    return readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
  }

  it('--pr --detach prints one {"source","run"} line at once, then the run finishes, opens a draft PR and ships to the Control Plane', async () => {
    const res = await svc(['start', '--brief', 'append fixed', '--pr', '--detach', '--provider', 'fake']);
    assert.equal(res.status, 0, res.stderr);
    const lines = res.stdout.trim().split('\n');
    assert.equal(lines.length, 1);
    const { source, run } = JSON.parse(lines[0]!);
    assert.equal(source, 'local');
    assert.match(run, /^r[0-9a-z]{26}$/);
    const done = await waitFor(() => (state(run).status === 'succeeded' ? state(run) : null), 'detached run to succeed');
    assert.equal(done.verdict, 'verified');
    assert.match(done.pr_url, /pull\/\d+$/);
    assert.ok(existsSync(join(repo.repo, '.svc', 'worktrees', run)));
    const pull = github.requests.find((r) => r.method === 'POST' && r.path === '/repos/acme/api/pulls' && r.body?.head === `svc/${run}`);
    assert.ok(pull, 'the GitHub stand-in got the pull request');
    assert.equal(pull.body.draft, true);
    assert.equal(pull.headers.authorization, 'Bearer gh-test-token');
    // The run's page where people reach the Control Plane (SVC_PUBLIC_URL), not the loopback SVC_CONTROL_URL.
    assert.ok(pull.body.body.includes(`Run page: https://svc.example.test/#/runs/local/${run}`), pull.body.body);
    assert.ok(!pull.body.body.includes(control.url));
    // The run signed with the key under HOME/.svc; the receipt embedded in the PR body must verify against it.
    const key = loadOrCreateSigningKey(join(repo.home, '.svc'));
    const fromPr = verifyReceipt(receiptFromMarkdown(pull.body.body), new Map([[key.kid, key.publicKey]]));
    assert.equal(fromPr.ok, true, fromPr.message);
    assert.equal(fromPr.receipt?.run, run);
    assert.equal(fromPr.receipt?.verdict, 'verified');
    const shipped = await waitFor(async () => {
      const r = (await control.request('GET', `/v1/runs/local/${run}`)).json;
      return r?.status === 'succeeded' ? r : null;
    }, 'the Control Plane to show the run');
    assert.equal(shipped.cost_usd, 0.25);
    const artifacts = await control.request('GET', `/v1/runs/local/${run}/artifact/diff.patch`);
    assert.match(artifacts.text, /\+fixed/);
    const receiptFile = join(repo.repo, '.svc', 'runs', run, 'artifacts', 'receipt.json');
    const ok = await svc(['receipt', 'verify', receiptFile]);
    assert.equal(ok.status, 0, ok.stderr);
    assert.match(ok.stdout, /Receipt OK/);
    const resumed = await svc(['start', '--resume', run]);
    assert.equal(resumed.status, 1);
    assert.equal(resumed.stderr, `svc start: Run ${run} is succeeded; only stopped or failed runs can be resumed\n`);
  });

  it('a failing required check means no PR and verdict not_verified', async () => {
    const res = await svc(['start', 'do nothing', '--pr', '--provider', 'idle']);
    assert.equal(res.status, 1);
    const summary = JSON.parse(res.stdout.trim().split('\n').at(-1)!);
    assert.equal(summary.status, 'failed');
    assert.equal(summary.verdict, 'not_verified');
    assert.equal(summary.pr_url, null);
    const events = readFileSync(join(repo.repo, '.svc', 'runs', summary.run, 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    const pr = events.find((e) => e.kind === 'pr');
    assert.equal(pr.data.opened, false);
    assert.match(pr.data.reason, /not_verified/);
  });

  it('blocks at the max_usd budget and stops when the answer says no', async () => {
    const child = spawn(process.execPath, [CLI, 'start', 'spend', '--provider', 'spender', '--detach'], { cwd: repo.repo, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    await new Promise((r) => child.on('close', r));
    const { run } = JSON.parse(out);
    const blocked = await waitFor(() => (state(run).status === 'blocked' ? state(run) : null), 'budget block');
    assert.match(blocked.question, /budget of \$1\.00/);
    assert.equal(blocked.cost_usd, 2);
    const early = await svc(['start', '--verify', run]);
    assert.equal(early.status, 1);
    assert.equal(early.stderr, `svc start: Run ${run} is blocked; verify it once it has ended\n`);
    const answer = await svc(['answer', `local/${run}`, 'no']);
    assert.equal(answer.status, 0, answer.stderr);
    const stopped = await waitFor(() => (state(run).status === 'stopped' ? state(run) : null), 'stop after the budget answer');
    assert.equal(stopped.question, null);
  });

  it('finishes a command-line run that blocked once the Control Plane answers it, though it watches another answer folder', async () => {
    const res = await svc(['start', '--brief', 'migrate', '--detach', '--provider', 'ask']);
    assert.equal(res.status, 0, res.stderr);
    const { source, run } = JSON.parse(res.stdout.trim());
    await waitFor(async () => ((await control.request('GET', `/v1/runs/${source}/${run}`)).json?.status === 'blocked' ? true : null), 'the Control Plane to show the run blocked');
    // The runner's SVC_CONTROL_ANSWER_DIR is not the Control Plane's: the answer must travel in an ingest response.
    assert.notEqual(env.SVC_CONTROL_ANSWER_DIR, control.deps.settings.answerDir);
    const answered = await control.request('POST', `/v1/runs/${source}/${run}/answer`, { body: { answer: 'postgres fixed' } });
    assert.equal(answered.status, 202, answered.text);
    const done = await waitFor(() => (['succeeded', 'failed'].includes(state(run).status) ? state(run) : null), 'the answered run to finish');
    assert.equal(done.status, 'succeeded', done.error);
    assert.deepEqual(done.answers, ['postgres fixed']);
    assert.match(readFileSync(join(done.workdir, 'a.txt'), 'utf8'), /postgres fixed/);
  });

  // A run deleted on the Control Plane before this attempt began is answered "deleted" from its first batch: only a
  // pod's run takes that as a stop (kubernetes-signer.test.ts); here the attempt completes, unshipped.
  it('resumes and verifies a run deleted on the Control Plane earlier: each completes here, said once unshipped', async () => {
    const failedThenDeleted = async () => {
      const res = await svc(['start', 'do nothing', '--worktree', '--provider', 'idle']);
      assert.equal(res.status, 1, res.stderr);
      const { run } = JSON.parse(res.stdout.trim().split('\n').at(-1)!);
      await waitFor(async () => ((await control.request('GET', `/v1/runs/local/${run}`)).json?.status === 'failed'
        ? true : null), 'the Control Plane to show the run failed');
      assert.equal((await control.request('DELETE', `/v1/runs/local/${run}`)).status, 200);
      writeFileSync(join(state(run).workdir, 'a.txt'), 'fixed\n');
      return run as string;
    };
    for (const flag of ['--resume', '--verify']) {
      const run = await failedThenDeleted();
      const receiptFile = join(repo.repo, '.svc', 'runs', run, 'artifacts', 'receipt.json');
      rmSync(receiptFile);
      const again = await svc(['start', flag, run]);
      if (flag === '--resume') {
        assert.equal(again.status, 0, again.stderr);
        assert.deepEqual([state(run).status, state(run).verdict], ['succeeded', 'verified']);
      }
      const receipt = readJson(receiptFile);
      assert.deepEqual(receipt.checks.map((c: { exit_code: number }) => c.exit_code), [0], flag);
      assert.equal(again.stderr.split('deleted on the Control Plane').length, 2, `${flag} says it once: ${again.stderr}`);
      assert.equal((await control.request('GET', `/v1/runs/local/${run}`)).status, 404, `${flag}: it stays deleted`);
    }
  });

  it('turns an exported issue file into the spec offline', async () => {
    const file = join(repo.root, 'issue.json');
    writeFileSync(file, JSON.stringify({ issue: readJson(join(FIXTURES, 'sentry-api-issue.json')), event: readJson(join(FIXTURES, 'sentry-api-latest-event.json')) }));
    const res = await svc(['start', file, '--provider', 'fake'], { ERRTRACK_AUTH_TOKEN: '' });
    assert.equal(res.status, 0, res.stderr);
    const [first, last] = res.stdout.trim().split('\n');
    // Foreground runs print their address first (as --detach does) and the final summary last.
    const { run } = JSON.parse(first!);
    assert.equal(JSON.parse(last!).run, run);
    const spec = readFileSync(join(repo.repo, '.svc', 'runs', run, 'spec.md'), 'utf8');
    assert.match(spec, /## Stack trace\n\n- index\.js:19631 in Object\.fetch/);
    assert.equal(state(run).origin, 'errtrack');
  });

  it('fails closed on an unknown policy key and names a missing provider', async () => {
    const policy = join(repo.repo, '.svc', 'policy.json');
    const saved = readFileSync(policy, 'utf8');
    writeFileSync(policy, JSON.stringify({ checks: [], pr: { open: 'verified', auto_merge: true } }));
    try {
      const res = await svc(['start', 'anything', '--provider', 'fake']);
      assert.equal(res.status, 1);
      assert.match(res.stderr, /Unknown key "auto_merge" in policy\.json pr/);
    } finally {
      writeFileSync(policy, saved);
    }
    const missing = await svc(['start', 'anything', '--provider', 'codex'], { PATH: '/usr/bin:/bin' });
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /Provider "codex" not found: looked for the "codex" executable on the PATH of the /);
    assert.match(missing.stderr, /process that started the run \(a server's or a job pod's, not always your shell's\)/);
    // No built-in on PATH and no "provider" named, but command providers configured: the error names them.
    const unnamed = await svc(['start', 'anything'], { PATH: '/usr/bin:/bin' });
    assert.equal(unnamed.status, 1);
    assert.match(unnamed.stderr, /No provider found: .* The command providers configured for this run \(\.svc\/config/);
    assert.match(unnamed.stderr, /are fake, ask, spender, idle: pass --provider NAME, or name one as "provider" in /);
  });

  it('refuses a --run-id that is not one path segment or names an existing run, and a --retry of no run', async () => {
    const runs = join(repo.repo, '.svc', 'runs');
    const before = spawnSync('ls', [runs], { encoding: 'utf8' }).stdout;
    const outside = await svc(['start', 'anything', '--provider', 'fake', '--run-id', '..']);
    assert.equal(outside.status, 2);
    assert.match(outside.stderr, /Run id "\.\." is not a valid path segment/);
    const taken = before.trim().split('\n')[0]!;
    const again = await svc(['start', 'anything', '--provider', 'fake', '--run-id', taken]);
    assert.equal(again.status, 2);
    assert.match(again.stderr, new RegExp(`Run ${taken} already exists in `));
    const none = await svc(['start', '--retry', 'no-such-run']);
    assert.equal(none.status, 2);
    assert.match(none.stderr, /No run no-such-run in /);
    assert.equal(spawnSync('ls', [runs], { encoding: 'utf8' }).stdout, before, 'no run was made');
  });

  it('refuses two actions at once, or an action beside an input, with exit 2 before touching any run', async () => {
    const runs = join(repo.repo, '.svc', 'runs');
    const before = spawnSync('ls', [runs], { encoding: 'utf8' }).stdout;
    const run = before.trim().split('\n')[0]!;
    const both = await svc(['start', '--stop', run, '--resume', run]);
    assert.deepEqual([both.status, both.stdout], [2, '']);
    assert.equal(both.stderr,
      'svc start: Give one of an input, --stop, --resume, --retry, --verify or --open-pr (got --stop, --resume)\n');
    const beside = await svc(['start', 'fix it', '--provider', 'fake', '--retry', run]);
    assert.deepEqual([beside.status, beside.stdout], [2, '']);
    assert.match(beside.stderr, /\(got an input, --retry\)\n$/);
    assert.equal(spawnSync('ls', [runs], { encoding: 'utf8' }).stdout, before, 'no run was made');
  });

  it('svc receipt verify names an integrity mismatch, a bad signature and an unknown key', async () => {
    const runs = spawnSync('ls', [join(repo.repo, '.svc', 'runs')], { encoding: 'utf8' }).stdout.trim().split('\n');
    const original = readJson(join(repo.repo, '.svc', 'runs', runs[0]!, 'artifacts', 'receipt.json'));
    const file = join(repo.root, 'tampered.json');
    writeFileSync(file, JSON.stringify({ ...original, verdict: 'verified', cost: { usd: 0, tokens_in: 0, tokens_out: 0 } }));
    assert.match((await svc(['receipt', 'verify', file])).stderr, /Integrity mismatch/);
    const other = generateKeyPairSync('ed25519');
    const foreign = { kid: keyIdOf(other.publicKey), privateKey: other.privateKey, publicKey: other.publicKey };
    const { kid: _k, integrity: _i, signature: _s, ...body } = original;
    writeFileSync(file, JSON.stringify(issueReceipt(body, foreign)));
    const unknown = await svc(['receipt', 'verify', file]);
    assert.equal(unknown.status, 1);
    assert.match(unknown.stderr, /Unknown key/);
    const reKeyed = issueReceipt(body, { ...foreign, kid: original.kid });
    writeFileSync(file, JSON.stringify(reKeyed));
    assert.match((await svc(['receipt', 'verify', file])).stderr, /Bad signature/);
  });

  it('records deploys and renders the newest as "last deploy <sha7> <finished_at> health=<status>"', async () => {
    const none = await svc(['deploy', 'last']);
    assert.equal(none.status, 1);
    assert.equal(none.stderr,
      'svc deploy: No deploy records in .svc/deploys: svc deploy record --sha SHA --health STATUS writes one\n');
    assert.equal((await svc(['deploy', 'record', '--sha', 'abcdef1234567890', '--health', 'ok', '--finished-at', '2026-01-01T00:00:00Z'])).status, 0);
    assert.equal((await svc(['deploy', 'record', '--sha', '1234567abcdef', '--health', 'degraded', '--finished-at', '2026-02-01T00:00:00Z'])).status, 0);
    assert.equal(await latestDeployLine(repo.repo), 'last deploy 1234567 2026-02-01T00:00:00.000Z health=degraded');
    const last = await svc(['deploy', 'last']);
    assert.equal(last.stdout, 'last deploy 1234567 2026-02-01T00:00:00.000Z health=degraded\n');
    assert.equal((await svc(['deploy', 'record', '--sha', 'not-a-sha', '--health', 'ok'])).status, 2);
  });
});
