// `svc start --pr` checks, before the agent starts, that its pull request could be opened: GitHub credentials exist
// and the pinned origin answers `git ls-remote` as configured (a redirect is named, never followed). A run whose work
// was verified but whose PR could not be opened (the API refused the token then) opens it later with
// `svc start --open-pr RUN`; a repository without an origin is told how to add one.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import {
  makeRepo, processesMentioning, readJson, startGithubStandIn, CLI, EDIT_SCRIPT, GIT_ENV, type StandIn, type TestRepo,
} from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { makeCert } from '../trigger/standins.ts';

const TOKEN = 'pr-check-token-5c1e';

/** The class of the failure `svc start` printed, and whether it is retryable. */
function failureOf(stdout: string): [string, boolean] {
  const { failure } = JSON.parse(stdout.trim().split('\n')[0]!) as { failure: { class: string; retryable: boolean } };
  return [failure.class, failure.retryable];
}

function runsOf(repo: TestRepo): string[] {
  const dir = join(repo.repo, '.svc', 'runs');
  return existsSync(dir) ? readdirSync(dir) : [];
}

// A token opens the pull request on GITHUB_API_URL's host only: origins on loopback stand for GitHub when it is there.
const LOOPBACK_GITHUB = { GITHUB_TOKEN: TOKEN, GITHUB_API_URL: 'http://127.0.0.1:9' };

describe('svc start --pr without what a pull request needs', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;

  before(() => {
    const checks = [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'] }];
    repo = makeRepo({ providers: { fake: EDIT_SCRIPT }, policy: { checks } });
    // No token, and a PATH on which no `gh` can be found.
    env = { PATH: '/usr/bin:/bin', HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0', SVC_CONTROL_URL: 'http://127.0.0.1:9' };
  });
  after(() => repo.cleanup());

  it('refuses before the agent starts without GitHub credentials, names the fix and writes no run', async () => {
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--pr', '--provider', 'fake'],
      { cwd: repo.repo, env });
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /Refusing to start a --pr run: No GitHub credentials: set GITHUB_TOKEN or GH_TOKEN, or log in with gh/);
    assert.match(res.stderr, /\(nothing was started\)/);
    assert.deepEqual(runsOf(repo), []);
  });

  it('refuses before the agent starts when the origin does not answer as configured', async () => {
    execFileSync('git', ['remote', 'set-url', 'origin', join(repo.root, 'nowhere', 'api.git')], { cwd: repo.repo });
    try {
      const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'x', '--pr', '--provider', 'fake'],
        { cwd: repo.repo, env: { ...env, GITHUB_TOKEN: TOKEN } });
      assert.notEqual(res.code, 0);
      assert.match(res.stderr, /Refusing to start a --pr run: The origin ".*nowhere\/api\.git" cannot be reached as configured/);
      assert.match(res.stderr, /git remote set-url origin URL/);
      assert.deepEqual(runsOf(repo), []);
    } finally {
      execFileSync('git', ['remote', 'set-url', 'origin', repo.origin], { cwd: repo.repo });
    }
  });

  it('refuses before the agent starts when a token would open the pull request on GitHub but the origin is elsewhere',
    async () => {
      // Refused on the origin's host alone: nothing listens there, and nothing is asked of it.
      const url = 'http://127.0.0.1:9/acme/api.git';
      execFileSync('git', ['remote', 'set-url', 'origin', url], { cwd: repo.repo });
      try {
        const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'x', '--pr', '--provider', 'fake'],
          { cwd: repo.repo, env: { ...env, GITHUB_TOKEN: TOKEN } });
        assert.equal(res.code, 1);
        assert.deepEqual(failureOf(res.stdout), ['policy', false]);
        assert.ok(res.stderr.includes(`Refusing to start a --pr run: The origin "${url}" is on 127.0.0.1, and svc ` +
          'opens pull requests only on github.com (GitHub, or the host of GITHUB_API_URL) (nothing was started)'),
        res.stderr);
        assert.deepEqual(runsOf(repo), []);
      } finally {
        execFileSync('git', ['remote', 'set-url', 'origin', repo.origin], { cwd: repo.repo });
      }
    });

  // gh alone opens it on the origin's own host (`gh pr create --repo HOST/OWNER/NAME`), where it may be logged in.
  it('leaves an origin on another host to gh when gh is the only credential', async () => {
    const bin = join(repo.root, 'gh-bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'gh'), '#!/bin/sh\nexit 1\n', { mode: 0o755 });
    const url = 'http://127.0.0.1:9/acme/api.git';
    execFileSync('git', ['remote', 'set-url', 'origin', url], { cwd: repo.repo });
    try {
      const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'x', '--pr', '--provider', 'fake'],
        { cwd: repo.repo, env: { ...env, PATH: `${bin}:${env.PATH}` } });
      assert.equal(res.code, 1);
      assert.deepEqual(failureOf(res.stdout), ['infra', true]);
      assert.ok(res.stderr.includes(`The origin "${url}" could not be reached to check`), res.stderr);
    } finally {
      execFileSync('git', ['remote', 'set-url', 'origin', repo.origin], { cwd: repo.repo });
    }
  });

  it('calls an origin that cannot be reached an infra failure, retryable, and blames no credential', async () => {
    // A loopback port nothing listens on: git's connection is refused before any credential is asked for.
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
    const port = (closed.address() as { port: number }).port;
    await new Promise((r) => closed.close(r));
    const url = `http://127.0.0.1:${port}/acme/api.git`;
    execFileSync('git', ['remote', 'set-url', 'origin', url], { cwd: repo.repo });
    try {
      const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'x', '--pr', '--provider', 'fake'],
        { cwd: repo.repo, env: { ...env, ...LOOPBACK_GITHUB } });
      assert.equal(res.code, 1);
      assert.deepEqual(failureOf(res.stdout), ['infra', true]);
      assert.ok(res.stderr.includes(`The origin "${url}" could not be reached to check that the pull request can be ` +
        'pushed (fatal: unable to access'), res.stderr);
      assert.match(res.stderr, /try again once it answers \(nothing was started\)/);
      assert.doesNotMatch(res.stderr, /credential|Refusing/);
      assert.deepEqual(runsOf(repo), []);
    } finally {
      execFileSync('git', ['remote', 'set-url', 'origin', repo.origin], { cwd: repo.repo });
    }
  });

  it('names an origin whose password holds an @ with its whole user info cut', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
    const port = (closed.address() as { port: number }).port;
    await new Promise((r) => closed.close(r));
    execFileSync('git', ['remote', 'set-url', 'origin', `http://u:pass@word-41@127.0.0.1:${port}/acme/api.git`],
      { cwd: repo.repo });
    try {
      const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'x', '--pr', '--provider', 'fake'],
        { cwd: repo.repo, env: { ...env, ...LOOPBACK_GITHUB } });
      assert.notEqual(res.code, 0);
      assert.ok(res.stderr.includes(`The origin "http://***@127.0.0.1:${port}/acme/api.git"`), res.stderr);
      assert.equal(res.stderr.includes('word-41'), false, res.stderr);
    } finally {
      execFileSync('git', ['remote', 'set-url', 'origin', repo.origin], { cwd: repo.repo });
    }
  });

  // A bare 404 (no body) makes git say only "repository '…' not found": an answer, so still a refusal.
  for (const [status, headers] of [[401, { 'www-authenticate': 'Basic realm="git"' }], [404, {}]] as const) {
    it(`still blames the credential when the origin answers ${status}`, async () => {
      const refusing = createServer((req, res) => {
        req.resume();
        res.writeHead(status, headers).end();
      });
      await new Promise<void>((r) => refusing.listen(0, '127.0.0.1', () => r()));
      const url = `http://127.0.0.1:${(refusing.address() as { port: number }).port}/acme/api.git`;
      execFileSync('git', ['remote', 'set-url', 'origin', url], { cwd: repo.repo });
      try {
        const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'x', '--pr', '--provider', 'fake'],
          { cwd: repo.repo, env: { ...env, ...LOOPBACK_GITHUB } });
        assert.equal(res.code, 1);
        assert.deepEqual(failureOf(res.stdout), ['policy', false]);
        assert.match(res.stderr, /Refusing to start a --pr run: The origin ".*" cannot be reached as configured/);
        assert.match(res.stderr, /fix the credential \(GITHUB_TOKEN, GH_TOKEN or gh auth login\)/);
        assert.deepEqual(runsOf(repo), []);
      } finally {
        execFileSync('git', ['remote', 'set-url', 'origin', repo.origin], { cwd: repo.repo });
        await new Promise((r) => refusing.close(r));
      }
    });
  }

  it('names `git remote add origin` when the repository has no origin', async () => {
    execFileSync('git', ['remote', 'remove', 'origin'], { cwd: repo.repo });
    try {
      const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'x', '--pr', '--provider', 'fake'],
        { cwd: repo.repo, env: { ...env, GITHUB_TOKEN: TOKEN } });
      assert.notEqual(res.code, 0);
      assert.match(res.stderr, /found 0\): add the GitHub repository, /);
      assert.match(res.stderr, /`git remote add origin https:\/\/github\.com\/OWNER\/NAME\.git`/);
    } finally {
      execFileSync('git', ['remote', 'add', 'origin', repo.origin], { cwd: repo.repo });
    }
  });
});

describe('svc start --pr whose origin redirects', () => {
  let repo: TestRepo;
  let root: string;
  let origin: HttpsServer;
  let other: HttpsServer;
  const seenByOther: Array<string | null> = [];
  const seenByOrigin: Array<string | null> = [];

  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'svc-redirect-'));
    const cert = makeCert(root);
    writeFileSync(join(root, 'ca.pem'), cert.cert);
    other = createHttpsServer(cert, (req, res) => {
      seenByOther.push(req.headers.authorization ?? null);
      res.writeHead(401, { 'www-authenticate': 'Basic realm="other"' }).end();
    });
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', () => r()));
    const otherPort = (other.address() as { port: number }).port;
    origin = createHttpsServer(cert, (req, res) => {
      seenByOrigin.push(req.headers.authorization ?? null);
      res.writeHead(301, { location: `https://127.0.0.1:${otherPort}${req.url}` }).end();
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', () => r()));
    repo = makeRepo({ providers: { fake: EDIT_SCRIPT }, policy: { checks: [] } });
  });
  after(async () => {
    await new Promise((r) => origin.close(r));
    await new Promise((r) => other.close(r));
    repo.cleanup();
    rmSync(root, { recursive: true, force: true });
  });

  it('refuses before the agent starts, names both hosts, and the other host never sees the token', async () => {
    const port = (origin.address() as { port: number }).port;
    const otherPort = (other.address() as { port: number }).port;
    execFileSync('git', ['remote', 'set-url', 'origin', `https://127.0.0.1:${port}/acme/api.git`], { cwd: repo.repo });
    const env = { PATH: '/usr/bin:/bin', HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0', SVC_CONTROL_URL: 'http://127.0.0.1:9',
      GITHUB_TOKEN: TOKEN, GITHUB_API_URL: `https://127.0.0.1:${port}/api/v3`, GIT_SSL_CAINFO: join(root, 'ca.pem') };
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'x', '--pr', '--provider', 'fake'],
      { cwd: repo.repo, env });
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, new RegExp(`The git server at "https://127\\.0\\.0\\.1:${port}/acme/api\\.git" ` +
      `redirected to "https://127\\.0\\.0\\.1:${otherPort}/acme/api\\.git": svc follows no redirect`));
    assert.ok(seenByOrigin.length > 0, 'git asked the origin');
    assert.deepEqual(seenByOther.filter((h) => h !== null), [], 'the other host never got a credential');
    assert.deepEqual(seenByOrigin.filter((h) => h !== null), [], 'nothing was sent before the redirect either');
    assert.deepEqual(runsOf(repo), [], 'no run was made, so no agent ran');
  });
});

describe('a verified --pr run whose pull request could not be opened', () => {
  let repo: TestRepo;
  let github: StandIn;
  let refusing: Server;
  let env: NodeJS.ProcessEnv;
  let run: string;
  let refusingUrl: string;

  before(async () => {
    github = await startGithubStandIn();
    // The GitHub API refuses the token while the run finishes (revoked, rate-limited): the PR cannot be opened then.
    refusing = createServer((req, res) => {
      req.resume();
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"message":"Bad credentials"}');
    });
    await new Promise<void>((r) => refusing.listen(0, '127.0.0.1', () => r()));
    const checks = [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'] }];
    repo = makeRepo({ providers: { fake: EDIT_SCRIPT }, policy: { checks } });
    env = { PATH: '/usr/bin:/bin', HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0', SVC_CONTROL_URL: 'http://127.0.0.1:9',
      GITHUB_TOKEN: TOKEN };
    refusingUrl = `http://127.0.0.1:${(refusing.address() as { port: number }).port}`;
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--pr', '--provider', 'fake'],
      { cwd: repo.repo, env: { ...env, GITHUB_API_URL: refusingUrl } });
    run = (JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string }).run;
  });
  after(async () => {
    await github.close();
    await new Promise((r) => refusing.close(r));
    repo.cleanup();
  });

  it('ends failed with verdict verified, saying why there is no pull request', () => {
    const state = readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
    assert.equal(state.status, 'failed');
    assert.equal(state.verdict, 'verified');
    assert.equal(state.pr_url, null);
    assert.match(state.error, /Pull request not opened: GitHub answered 401/);
  });

  it('refuses --open-pr without the run\'s own receipt, and for a run not started with --pr', async () => {
    const openPr = (id: string) => runChild(process.execPath, [CLI, 'start', '--open-pr', id],
      { cwd: repo.repo, env: { ...env, GITHUB_API_URL: github.url } });
    const path = join(repo.repo, '.svc', 'runs', run, 'artifacts', 'receipt.json');
    const signed = readFileSync(path, 'utf8');
    try {
      rmSync(path);
      const none = await openPr(run);
      assert.equal(none.code, 1);
      assert.match(none.stderr, new RegExp(`Run local/${run} has no receipt: verify it first`));
      writeFileSync(path, JSON.stringify({ ...JSON.parse(signed), verdict: 'verified_with_gaps' }));
      const forged = await openPr(run);
      assert.equal(forged.code, 1);
      assert.match(forged.stderr, /The run's receipt does not verify: /);
    } finally {
      writeFileSync(path, signed);
    }
    const plain = await runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--provider', 'fake'],
      { cwd: repo.repo, env });
    const other = (JSON.parse(plain.stdout.trim().split('\n')[0]!) as { run: string }).run;
    const notPr = await openPr(other);
    assert.equal(notPr.code, 1);
    assert.match(notPr.stderr, new RegExp(`Run local/${other} was not started with --pr`));
    assert.equal(github.requests.filter((r) => r.method === 'POST').length, 0, 'no pull request was asked for');
  });

  it('fails --open-pr again while GitHub still refuses, keeping the run failed with the new reason', async () => {
    const res = await runChild(process.execPath, [CLI, 'start', '--open-pr', run],
      { cwd: repo.repo, env: { ...env, GITHUB_API_URL: refusingUrl } });
    assert.equal(res.code, 1);
    assert.match(res.stderr, /Pull request not opened: GitHub answered 401/);
    const state = readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
    assert.equal(state.status, 'failed');
    assert.match(state.error, /Pull request not opened: GitHub answered 401/);
  });

  it('opens it with svc start --open-pr once the credential works, and the run ends succeeded', async () => {
    const res = await runChild(process.execPath, [CLI, 'start', '--open-pr', run],
      { cwd: repo.repo, env: { ...env, GITHUB_API_URL: github.url } });
    assert.equal(res.code, 0, res.stderr);
    const state = readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
    assert.equal(state.status, 'succeeded');
    assert.equal(state.error, null);
    assert.match(state.pr_url, /\/pull\/\d+$/);
    const created = github.requests.filter((r) => r.method === 'POST');
    assert.equal(created.length, 1);
    assert.equal(created[0]!.body.head, `svc/${run}`);
    assert.match(created[0]!.body.body, /svc-receipt/);
    assert.ok(existsSync(join(repo.origin, 'refs', 'heads', 'svc', run)), 'the branch was pushed');
  });

  it('refuses a second --open-pr: the run has its pull request', async () => {
    const res = await runChild(process.execPath, [CLI, 'start', '--open-pr', run],
      { cwd: repo.repo, env: { ...env, GITHUB_API_URL: github.url } });
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /already has its pull request/);
    assert.equal(github.requests.filter((r) => r.method === 'POST').length, 1);
  });
});

/** A --pr run whose work was verified but whose pull request was not opened (GitHub refused the connection). */
async function verifiedRunWithoutPr(ship: '0' | '1'): Promise<{ repo: TestRepo; env: NodeJS.ProcessEnv; run: string }> {
  const checks = [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'] }];
  const repo = makeRepo({ providers: { fake: EDIT_SCRIPT }, policy: { checks } });
  const env = { PATH: '/usr/bin:/bin', HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: ship,
    SVC_CONTROL_URL: 'http://127.0.0.1:9', GITHUB_TOKEN: TOKEN, GITHUB_API_URL: 'http://127.0.0.1:9' };
  const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--pr', '--provider', 'fake'],
    { cwd: repo.repo, env });
  return { repo, env, run: (JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string }).run };
}

// An --open-pr writes and ships its run as a worker does (finish-phase.ts openPrLater), so a signal ends it as one:
// what it did not ship is left to the next svc command (the ship-pending marker), and its pid is cleared last.
describe('an --open-pr a SIGTERM ends while GitHub has not answered', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;
  let run: string;
  let marker: string;

  before(async () => {
    // Shipped (not kept local), to a Control Plane that refuses every connection: nothing of the run reaches it.
    ({ repo, env, run } = await verifiedRunWithoutPr('1'));
    marker = join(repo.repo, '.svc', 'ship-pending', run);
    // Its worker left it pending; the marker below is the --open-pr's to write.
    rmSync(marker, { force: true });
  });
  after(() => repo.cleanup());

  it('leaves its run pending for the next svc command, its pid cleared', async () => {
    const statePath = join(repo.repo, '.svc', 'runs', run, 'state.json');
    assert.deepEqual([readJson(statePath).status, readJson(statePath).verdict], ['failed', 'verified']);
    const asked: string[] = [];
    const silent = createServer((req) => {
      asked.push(`${req.method} ${req.url}`);
      req.resume();
    });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    const opener = spawn(process.execPath, [CLI, 'start', '--open-pr', run], { cwd: repo.repo, env: {
      ...env, GITHUB_API_URL: `http://127.0.0.1:${(silent.address() as { port: number }).port}`,
    } });
    opener.stdout.resume();
    opener.stderr.resume();
    const exited = once(opener, 'exit');
    try {
      await waitFor(() => asked.length > 0, 'the --open-pr to ask GitHub');
      assert.equal(readJson(statePath).pid, opener.pid, 'the --open-pr holds the run as its worker');
      assert.equal(existsSync(marker), false, 'not pending before the signal');
      opener.kill('SIGTERM');
      const [code, signal] = await exited;
      assert.deepEqual([code, signal], [1, null], 'it took the signal and ended as its failed run');
      assert.ok(existsSync(marker), 'the run is left for the next svc command to ship');
      const left = readJson(statePath);
      assert.deepEqual([left.status, left.pid], ['failed', null]);
    } finally {
      opener.kill('SIGKILL');
      silent.closeAllConnections();
      await new Promise((r) => silent.close(r));
    }
  });
});

// A signal ends an --open-pr at once (above), and the push it started with it: the push's whole process group, rather
// than a push that goes on with nobody left to record its pull request. The push is held by a `git` stand-in first on
// PATH, which waits on a FIFO nobody writes before it hands the push to git (any other git goes straight to git).
describe('an --open-pr a SIGTERM ends while its push runs', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;
  let run: string;
  let standIn: string;
  let fifo: string;
  let pushing: string;

  before(async () => {
    ({ repo, env, run } = await verifiedRunWithoutPr('0'));
    standIn = join(repo.root, 'slow-push');
    fifo = join(repo.root, 'push-held.fifo');
    pushing = join(repo.root, 'pushing');
    mkdirSync(standIn);
    execFileSync('mkfifo', [fifo]);
    const git = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
    const hold = `  [ "$a" = push ] && { : > "${pushing}"; cat "${fifo}" > /dev/null; }\n`;
    writeFileSync(join(standIn, 'git'), `#!/bin/sh\nfor a in "$@"; do\n${hold}done\nexec "${git}" "$@"\n`,
      { mode: 0o755 });
  });
  after(() => {
    for (const pid of [...processesMentioning(fifo), ...processesMentioning(standIn)]) process.kill(pid, 'SIGKILL');
    repo.cleanup();
  });

  it('ends the push\'s process group before it exits, leaving the run as it was', async () => {
    const statePath = join(repo.repo, '.svc', 'runs', run, 'state.json');
    assert.deepEqual([readJson(statePath).status, readJson(statePath).verdict], ['failed', 'verified']);
    // Its own temp folder: what svc makes there for the push (svc-push-*) is seen, and must not outlive it.
    const scratch = join(repo.root, 'tmp');
    mkdirSync(scratch);
    const opener = spawn(process.execPath, [CLI, 'start', '--open-pr', run],
      { cwd: repo.repo, env: { ...env, PATH: `${standIn}:/usr/bin:/bin`, TMPDIR: scratch } });
    opener.stdout.resume();
    opener.stderr.resume();
    const exited = once(opener, 'exit');
    try {
      await waitFor(() => existsSync(pushing) && processesMentioning(fifo).length > 0, 'the --open-pr to push');
      assert.equal(readJson(statePath).pid, opener.pid, 'the --open-pr holds the run');
      assert.ok(readdirSync(scratch).some((name) => name.startsWith('svc-push-')), 'the push has its scratch folder');
      opener.kill('SIGTERM');
      // Not a time assertion: a bound, so that an --open-pr that waits on its push for ever fails here, not hangs.
      let bound: NodeJS.Timeout | undefined;
      const late = new Promise<string>((done) => (bound = setTimeout(() => done('still running'), 30_000)));
      const ended = await Promise.race([exited, late]).finally(() => clearTimeout(bound));
      assert.deepEqual(ended, [1, null], 'it took the signal and ended as its failed run');
      assert.deepEqual(processesMentioning(fifo), [], 'nothing of the push is left');
      assert.deepEqual(processesMentioning(standIn), [], 'nothing of the push is left');
      const left = readJson(statePath);
      assert.deepEqual([left.status, left.pid, left.child], ['failed', null, null]);
      assert.deepEqual(readdirSync(scratch), [], 'no scratch folder of svc is left');
    } finally {
      opener.kill('SIGKILL');
    }
  });
});

// An ssh origin's host is whatever the user's ssh setup makes of it: a Host alias of ~/.ssh/config for a second
// account (`git@github-work:acme/api.git`), or GitHub's own ssh.github.com on port 443. svc pushes there with that
// setup and opens the pull request with the token on GitHub, so its host is never compared with GitHub's.
describe('svc start --pr whose origin is an ssh host alias', () => {
  let repo: TestRepo;
  let github: StandIn;

  before(async () => {
    github = await startGithubStandIn();
    const checks = [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'] }];
    repo = makeRepo({ providers: { fake: EDIT_SCRIPT }, policy: { checks } });
    // The ssh the alias resolves to, standing in: it runs the git command it was given beside the bare origin.
    writeFileSync(join(repo.bin, 'ssh'), '#!/bin/sh\n[ "$1" = -G ] && exit 0\nfor a; do last=$a; done\n' +
      `cd '${repo.root}' && exec sh -c "$last"\n`, { mode: 0o755 });
    execFileSync('git', ['remote', 'set-url', 'origin', 'git@github-work:acme/api.git'], { cwd: repo.repo });
  });
  after(async () => {
    await github.close();
    repo.cleanup();
  });

  it('is not refused for its host, pushes through that ssh and opens the pull request with the token', async () => {
    const env = { PATH: '/usr/bin:/bin', HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0',
      SVC_CONTROL_URL: 'http://127.0.0.1:9', GITHUB_TOKEN: TOKEN, GITHUB_API_URL: github.url,
      GIT_SSH_COMMAND: join(repo.bin, 'ssh') };
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--pr', '--provider', 'fake'],
      { cwd: repo.repo, env });
    assert.equal(res.code, 0, res.stderr);
    const run = (JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string }).run;
    assert.ok(existsSync(join(repo.origin, 'refs', 'heads', 'svc', run)), 'the branch was pushed');
    assert.equal(github.requests.filter((r) => r.method === 'POST').length, 1, 'the pull request was asked for');
  });
});
