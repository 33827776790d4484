import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { writeFileSync, chmodSync, existsSync, readFileSync, readdirSync, mkdtempSync, rmSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { makeRepo, startGithubStandIn, readJson, CLI, EDIT_SCRIPT, GIT_ENV, type StandIn, type TestRepo } from './fixtures.ts';
import { makeCert } from '../trigger/standins.ts';
import { PushRefusedError, pinPushTarget, pushBranch } from '../../src/engine/git-push.ts';

const SECRETS = {
  GITHUB_TOKEN: 'gh-secret-token-1', GH_TOKEN: 'gh-secret-token-2', ERRTRACK_AUTH_TOKEN: 'errtrack-secret-3',
  TRACKERA_API_KEY: 'trackera-secret-4', SVC_CONTROL_TOKEN: 'control-secret-5',
};

function dumper(path: string, passThrough: boolean): string {
  return `#!/bin/sh\nenv > "${path}.$$"\n${passThrough ? 'cat\n' : ''}`;
}

describe('git commands of a run', () => {
  let github: StandIn;
  let repo: TestRepo;
  let dumps: string;

  before(async () => {
    github = await startGithubStandIn();
    repo = makeRepo({ policy: { checks: [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'] }] }, providers: { fake: EDIT_SCRIPT } });
    dumps = join(repo.root, 'dumps');
    mkdirSync(dumps);
    const hooks = join(repo.repo, '.git', 'hooks');
    for (const hook of ['post-checkout', 'pre-push', 'post-commit', 'reference-transaction']) {
      writeFileSync(join(hooks, hook), dumper(join(dumps, hook), false));
      chmodSync(join(hooks, hook), 0o755);
    }
    // A clean filter is repository config too (git-lfs is one); it may run (inside svc's git sandbox), but must see
    // none of svc's secrets. It appends its environment to what it cleans, so the commit shows what it saw.
    const filter = join(repo.bin, 'filter.sh');
    writeFileSync(filter, '#!/bin/sh\ncat\nenv | sed "s/^/FILTER-ENV /"\n');
    chmodSync(filter, 0o755);
    execFileSync('git', ['config', 'filter.dump.clean', filter], { cwd: repo.repo });
    writeFileSync(join(repo.repo, '.git', 'info', 'attributes'), '*.txt filter=dump\n');
  });
  after(async () => {
    await github.close();
    repo.cleanup();
  });

  it('runs no hook planted in the repository and gives no git child a token during a run with --pr', async () => {
    const env = { ...process.env, ...GIT_ENV, ...SECRETS, HOME: repo.home, GITHUB_API_URL: github.url, SVC_SHIP: '0',
      PATH: `${repo.bin}:${process.env.PATH}` };
    const child = spawn(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--pr', '--provider', 'fake'], { cwd: repo.repo, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const status = await new Promise((resolve) => child.on('close', resolve));
    assert.equal(status, 0, stderr);
    const { run } = JSON.parse(stdout.trim().split('\n')[0]!);
    const state = readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
    assert.match(state.pr_url, /\/pull\/\d+$/);
    assert.ok(existsSync(join(repo.origin, 'refs', 'heads', 'svc', run)), 'the branch was pushed');
    const files = readdirSync(dumps);
    assert.deepEqual(files.filter((f) => !f.startsWith('filter.')), [], 'no hook ran');
    const committed = execFileSync('git', ['show', `svc/${run}:a.txt`], { cwd: repo.origin, encoding: 'utf8' });
    assert.match(committed, /FILTER-ENV /, 'the filter ran, so its environment was checked');
    for (const [name, value] of Object.entries(SECRETS)) assert.equal(committed.includes(value), false, `filter saw ${name}`);
    for (const f of files) {
      const text = readFileSync(join(dumps, f), 'utf8');
      for (const [name, value] of Object.entries(SECRETS)) assert.equal(text.includes(value), false, `${f} saw ${name}`);
    }
  });
});

// pushBranch runs git synchronously, so the HTTPS stand-in lives in its own process. Smart-HTTP enough to see
// credentials: 401 asks for them, then 403 ends the push; every Authorization header (or "-") is logged.
const HTTPS_STAND_IN = `
import { createServer } from 'node:https';
import { readFileSync, appendFileSync } from 'node:fs';
const [key, cert, log] = process.argv.slice(2);
const server = createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
  appendFileSync(log, (req.headers.authorization ?? '-') + '\\n');
  if (!req.headers.authorization) res.writeHead(401, { 'www-authenticate': 'Basic realm="GitHub"' }).end();
  else res.writeHead(403).end();
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;

// Where a hostile .git/config would like the push to go: plain HTTP, asks for credentials, logs every request
// (CONNECT included, for a planted proxy) with its Authorization header.
const EVIL_STAND_IN = `
import { createServer } from 'node:http';
import { appendFileSync } from 'node:fs';
const [log] = process.argv.slice(2);
const server = createServer((req, res) => {
  appendFileSync(log, req.method + ' ' + req.url + ' ' + (req.headers.authorization ?? '-') + '\\n');
  res.writeHead(401, { 'www-authenticate': 'Basic realm="evil"' }).end();
});
server.on('connect', (req, socket) => {
  appendFileSync(log, 'CONNECT ' + req.url + ' ' + (req.headers['proxy-authorization'] ?? '-') + '\\n');
  socket.end('HTTP/1.1 403 Forbidden\\r\\n\\r\\n');
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;

describe('pushing the run branch', () => {
  let server: ChildProcess;
  let evilServer: ChildProcess;
  let url: string;
  let evil: string;
  let root: string;
  let log: string;
  let evilLog: string;
  const saved = { HOME: process.env.HOME, GIT_SSL_CAINFO: process.env.GIT_SSL_CAINFO, GIT_TERMINAL_PROMPT: process.env.GIT_TERMINAL_PROMPT };

  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'svc-'));
    const cert = makeCert(root);
    writeFileSync(join(root, 'key.pem'), cert.key);
    writeFileSync(join(root, 'cert.pem'), cert.cert);
    writeFileSync(join(root, 'stand-in.mjs'), HTTPS_STAND_IN);
    log = join(root, 'auth.log');
    server = spawn(process.execPath, [join(root, 'stand-in.mjs'), join(root, 'key.pem'), join(root, 'cert.pem'), log], { stdio: ['ignore', 'pipe', 'inherit'] });
    const port = await new Promise<string>((resolve) => server.stdout!.once('data', (c: Buffer) => resolve(c.toString().trim())));
    url = `https://127.0.0.1:${port}`;
    writeFileSync(join(root, 'evil.mjs'), EVIL_STAND_IN);
    evilLog = join(root, 'evil.log');
    evilServer = spawn(process.execPath, [join(root, 'evil.mjs'), evilLog], { stdio: ['ignore', 'pipe', 'inherit'] });
    const evilPort = await new Promise<string>((resolve) => evilServer.stdout!.once('data', (c: Buffer) => resolve(c.toString().trim())));
    evil = `http://127.0.0.1:${evilPort}`;
    mkdirSync(join(root, 'home'));
    Object.assign(process.env, { HOME: join(root, 'home'), GIT_SSL_CAINFO: join(root, 'cert.pem'), GIT_TERMINAL_PROMPT: '0' });
  });
  after(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    server.kill();
    evilServer.kill();
    rmSync(root, { recursive: true, force: true });
  });

  function repoWithOrigin(origin: string): string {
    const dir = mkdtempSync(join(root, 'repo-'));
    for (const args of [['init', '-q', '-b', 'main'], ['commit', '-q', '--allow-empty', '-m', 'x'], ['remote', 'add', 'origin', origin], ['branch', 'svc/r1']]) {
      execFileSync('git', args, { cwd: dir, env: { ...process.env, ...GIT_ENV } });
    }
    return dir;
  }

  function headers(): string[] {
    const text = existsSync(log) ? readFileSync(log, 'utf8') : '';
    rmSync(log, { force: true });
    return text.split('\n').filter(Boolean);
  }

  it('hands the token to git push through GIT_ASKPASS when origin is the GitHub host', async () => {
    const dir = repoWithOrigin(`${url}/acme/api.git`);
    await assert.rejects(() => pushBranch(dir, pinPushTarget(dir), 'svc/r1', 'push-token-123', { GITHUB_API_URL: url }), /git push failed/);
    const sent = headers().filter((h) => h !== '-');
    assert.ok(sent.length > 0, 'git retried with credentials');
    assert.equal(Buffer.from(sent[0]!.replace(/^Basic /, ''), 'base64').toString(), 'x-access-token:push-token-123');
  });

  function evilSeen(): string[] {
    const text = existsSync(evilLog) ? readFileSync(evilLog, 'utf8') : '';
    rmSync(evilLog, { force: true });
    return text.split('\n').filter(Boolean);
  }

  /** A program the repository's config names; it records that it ran and everything it was given. */
  function spy(name: string): { path: string; ran: () => string } {
    const out = join(root, `${name}.out`);
    const path = join(root, `${name}.sh`);
    writeFileSync(path, `#!/bin/sh\necho "$@" >> "${out}"\ncat >> "${out}" 2>/dev/null\necho ran >> "${out}"\n`);
    chmodSync(path, 0o755);
    return { path, ran: () => (existsSync(out) ? readFileSync(out, 'utf8') : '') };
  }

  function setConfig(dir: string, pairs: Array<[string, string]>): void {
    for (const [key, value] of pairs) execFileSync('git', ['config', '--add', key, value], { cwd: dir });
  }

  function assertTokenOnlyAtGithub(): void {
    const sent = headers().filter((h) => h !== '-');
    assert.ok(sent.length > 0, 'the push reached the GitHub stand-in with credentials');
    for (const h of sent) assert.equal(Buffer.from(h.replace(/^Basic /, ''), 'base64').toString(), 'x-access-token:push-token-123');
  }

  const redirects: Array<[string, (evil: string, github: string) => Array<[string, string]>]> = [
    ['url.*.insteadOf to another server', (e, g) => [[`url.${e}/.insteadOf`, `${g}/`]]],
    ['url.*.pushInsteadOf to another server', (e, g) => [[`url.${e}/.pushInsteadOf`, `${g}/`]]],
    ['remote.origin.pushurl', (e) => [['remote.origin.pushurl', `${e}/acme/api.git`]]],
    ['a pushurl on the GitHub host plus a pushInsteadOf away from it', (e, g) => [['remote.origin.pushurl', `${g}/acme/api.git`], [`url.${e}/.pushInsteadOf`, `${g}/`]]],
  ];
  for (const [name, rules] of redirects) {
    it(`refuses to pin a push target when .git/config holds ${name}`, () => {
      const dir = repoWithOrigin(`${url}/acme/api.git`);
      setConfig(dir, rules(evil, url));
      assert.throws(() => pinPushTarget(dir), PushRefusedError);
    });
    it(`refuses to push, and sends nothing anywhere, when ${name} appears in .git/config after pinning`, async () => {
      const dir = repoWithOrigin(`${url}/acme/api.git`);
      const target = pinPushTarget(dir);
      setConfig(dir, rules(evil, url));
      await assert.rejects(() => pushBranch(dir, target, 'svc/r1', 'push-token-123', { GITHUB_API_URL: url }), /changed during the run/);
      assert.deepEqual(evilSeen(), []);
      assert.deepEqual(headers(), []);
    });
  }

  it('refuses to push when origin was repointed after pinning, even to another repository on the same host', async () => {
    const dir = repoWithOrigin(`${url}/acme/api.git`);
    const target = pinPushTarget(dir);
    assert.deepEqual(target, { url: `${url}/acme/api.git`, repo: 'acme/api' });
    execFileSync('git', ['remote', 'set-url', 'origin', `${url}/mallory/loot.git`], { cwd: dir });
    await assert.rejects(
      () => pushBranch(dir, target, 'svc/r1', 'push-token-123', { GITHUB_API_URL: url }),
      (err: Error) => err instanceof PushRefusedError && /origin changed during the run/.test(err.message) && err.message.includes('/mallory/loot.git'),
    );
    assert.deepEqual(headers(), [], 'nothing reached the host, with or without the token');
  });

  it('ignores credential helpers, askpass, proxies, TLS settings and includes that .git/config names', async () => {
    const dir = repoWithOrigin(`${url}/acme/api.git`);
    const helper = spy('helper');
    const askpass = spy('askpass');
    const included = join(root, 'included.gitconfig');
    writeFileSync(included, `[url "${evil}/"]\n\tinsteadOf = ${url}/\n[credential]\n\thelper = !${helper.path}\n`);
    setConfig(dir, [
      ['credential.helper', `!${helper.path}`], [`credential.${url}.helper`, `!${helper.path}`], ['core.askPass', askpass.path],
      ['http.proxy', evil], ['https.proxy', evil], [`http.${url}/.proxy`, evil], ['http.sslVerify', 'false'],
      ['include.path', included], [`includeIf.gitdir:${dir}/.path`, included], ['core.sshCommand', helper.path],
    ]);
    await assert.rejects(() => pushBranch(dir, pinPushTarget(dir), 'svc/r1', 'push-token-123', { GITHUB_API_URL: url }), /git push failed/);
    assertTokenOnlyAtGithub();
    assert.deepEqual(evilSeen(), [], 'neither the planted proxy nor the included insteadOf was used');
    assert.equal(helper.ran(), '', 'no planted credential helper ran');
    assert.equal(askpass.ran(), '', 'the planted askpass never ran');
  });

  it('ignores URL rules and credential helpers in the global git config when it carries the token', async () => {
    const dir = repoWithOrigin(`${url}/acme/api.git`);
    const helper = spy('global-helper');
    const globalConfig = join(process.env.HOME!, '.gitconfig');
    writeFileSync(globalConfig, `[url "${evil}/"]\n\tpushInsteadOf = ${url}/\n[credential]\n\thelper = !${helper.path}\n`);
    try {
      await assert.rejects(() => pushBranch(dir, pinPushTarget(dir), 'svc/r1', 'push-token-123', { GITHUB_API_URL: url }), /git push failed/);
    } finally {
      rmSync(globalConfig);
    }
    assertTokenOnlyAtGithub();
    assert.deepEqual(evilSeen(), []);
    assert.equal(helper.ran(), '');
  });

  it('refuses when .git/config names no origin or two', () => {
    const dir = repoWithOrigin(`${url}/acme/api.git`);
    setConfig(dir, [['remote.origin.url', `${evil}/acme/api.git`]]);
    assert.throws(() => pinPushTarget(dir), PushRefusedError);
    assert.deepEqual(evilSeen(), []);
  });

  it('never offers the token to an origin on another host', async () => {
    const dir = repoWithOrigin(`${url}/acme/api.git`);
    await assert.rejects(() => pushBranch(dir, pinPushTarget(dir), 'svc/r1', 'push-token-123', { GITHUB_API_URL: 'https://github.example' }), /git push failed/);
    const seen = headers();
    assert.ok(seen.length > 0, 'git reached the server');
    assert.deepEqual(seen.filter((h) => h !== '-'), []);
  });
});
