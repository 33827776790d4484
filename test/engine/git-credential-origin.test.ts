// A credential goes to exactly one origin: the push token only to the scheme, host, port and path it was configured
// for. The attack: an origin on the token's own host answers git's first request with a 301 to another host, which
// would then get `Authorization: Basic x-access-token:<token>`; or the same host on another port asks for it. Two
// loopback HTTPS servers per case; the push runs git synchronously, so they live in their own processes.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { GIT_ENV } from './fixtures.ts';
import { makeCert } from '../trigger/standins.ts';
import { pinPushTarget, pushBranch } from '../../src/engine/git-push.ts';
import { CredentialRedirectError, redirectRefusal, withGitToken } from '../../src/engine/git-token.ts';
import { createManagedCheckouts } from '../../src/trigger/managed-checkout.ts';
import { ManagedGitError } from '../../src/trigger/managed-checkout.ts';
import type { ServedRepo } from '../../src/trigger/served-repos-file.ts';
import { createLogger } from '../../src/log.ts';

const TOKEN = 'one-origin-token-81f3';

// HTTPS; logs "METHOD URL AUTHORIZATION|-" per request. With a port it answers 301 to that port, else 401 asking for
// Basic credentials (then 403 once it has some).
const SERVER = `
import { createServer } from 'node:https';
import { readFileSync, appendFileSync } from 'node:fs';
const [key, cert, log, to] = process.argv.slice(2);
const server = createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
  appendFileSync(log, req.method + ' ' + req.url + ' ' + (req.headers.authorization ?? '-') + '\\n');
  req.resume();
  if (to) res.writeHead(301, { location: 'https://127.0.0.1:' + to + req.url }).end();
  else if (!req.headers.authorization) res.writeHead(401, { 'www-authenticate': 'Basic realm="x"' }).end();
  else res.writeHead(403).end();
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;

interface Served {
  port: string;
  url: string;
  seen(): string[];
  child: ChildProcess;
}

describe('where the push token may go', () => {
  let root: string;
  let servers: Served[] = [];
  const saved = { HOME: process.env.HOME, GIT_SSL_CAINFO: process.env.GIT_SSL_CAINFO };

  async function serve(name: string, redirectTo: string | null = null): Promise<Served> {
    const log = join(root, `${name}.log`);
    const args = [join(root, 'server.mjs'), join(root, 'key.pem'), join(root, 'cert.pem'), log];
    const child = spawn(process.execPath, redirectTo ? [...args, redirectTo] : args, { stdio: ['ignore', 'pipe', 'inherit'] });
    const port = await new Promise<string>((r) => child.stdout!.once('data', (c: Buffer) => r(c.toString().trim())));
    const seen = () => (existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : []);
    const served = { port, url: `https://127.0.0.1:${port}`, seen, child };
    servers.push(served);
    return served;
  }

  before(() => {
    root = mkdtempSync(join(tmpdir(), 'svc-one-origin-'));
    const cert = makeCert(root);
    writeFileSync(join(root, 'key.pem'), cert.key);
    writeFileSync(join(root, 'cert.pem'), cert.cert);
    writeFileSync(join(root, 'server.mjs'), SERVER);
    mkdirSync(join(root, 'home'));
    Object.assign(process.env, { HOME: join(root, 'home'), GIT_SSL_CAINFO: join(root, 'cert.pem') });
  });
  after(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    for (const s of servers) s.child.kill();
    servers = [];
    rmSync(root, { recursive: true, force: true });
  });

  function repoWithOrigin(origin: string): string {
    const dir = mkdtempSync(join(root, 'repo-'));
    for (const args of [['init', '-q', '-b', 'main'], ['commit', '-q', '--allow-empty', '-m', 'x'],
      ['remote', 'add', 'origin', origin], ['branch', 'svc/r1']]) {
      execFileSync('git', args, { cwd: dir, env: { ...process.env, ...GIT_ENV } });
    }
    return dir;
  }

  const withAuth = (lines: string[]) => lines.filter((l) => !l.endsWith(' -'));

  it('fails a push whose origin redirects to another host, names both, and the other host gets nothing', async () => {
    const other = await serve('other');
    const origin = await serve('origin', other.port);
    const dir = repoWithOrigin(`${origin.url}/acme/api.git`);
    await assert.rejects(
      pushBranch(dir, pinPushTarget(dir), 'svc/r1', TOKEN, { GITHUB_API_URL: `${origin.url}/api/v3`, GIT_SSL_CAINFO: join(root, 'cert.pem') }),
      (err: unknown) => {
        assert.ok(err instanceof CredentialRedirectError, String(err));
        assert.ok(err.message.includes(`"${origin.url}/acme/api.git"`), err.message);
        assert.ok(err.message.includes(`redirected to "${other.url}/acme/api.git"`), err.message);
        return true;
      },
    );
    assert.ok(origin.seen().length > 0, 'git asked the origin');
    assert.deepEqual(withAuth(origin.seen()), []);
    assert.deepEqual(withAuth(other.seen()), [], 'the other host never got the token');
  });

  it('gives nothing to the same host on another port than the token\'s', async () => {
    const tokenHost = await serve('token-host');
    const samehost = await serve('same-host');
    const dir = repoWithOrigin(`${samehost.url}/acme/api.git`);
    await assert.rejects(
      pushBranch(dir, pinPushTarget(dir), 'svc/r1', TOKEN, { GITHUB_API_URL: `${tokenHost.url}/api/v3` }),
      /git push failed/,
    );
    assert.ok(samehost.seen().length > 0, 'git reached the server');
    assert.deepEqual(withAuth(samehost.seen()), []);
    assert.deepEqual(tokenHost.seen(), []);
  });

  it('still hands the token to the exact origin it was configured for', async () => {
    const host = await serve('exact');
    const dir = repoWithOrigin(`${host.url}/acme/api.git`);
    await assert.rejects(
      pushBranch(dir, pinPushTarget(dir), 'svc/r1', TOKEN, { GITHUB_API_URL: `${host.url}/api/v3` }), /git push failed/,
    );
    const sent = withAuth(host.seen()).map((l) => l.split(' ').pop()!.replace(/^Basic /, ''));
    assert.ok(sent.length > 0, 'git retried with the credential');
    assert.equal(Buffer.from(sent[0]!, 'base64').toString(), `x-access-token:${TOKEN}`);
  });

  describe('the askpass', () => {
    // The askpass git would be given for `url` (the token's host is github.example:8443), asked `prompt`.
    const ask = (url: string, prompt: string) => withGitToken(url, TOKEN,
      { GITHUB_API_URL: 'https://github.example:8443/api/v3' }, 'git-upload-pack', (config, extra) => {
        assert.deepEqual(config, ['-c', 'credential.useHttpPath=true']);
        return spawnSync(extra.GIT_ASKPASS!, [prompt], { env: { PATH: '/usr/bin:/bin', ...extra }, encoding: 'utf8' });
      });

    it('answers the prompts for its one URL', async () => {
      const url = 'https://github.example:8443/acme/api.git';
      const user = await ask(url, "Username for 'https://github.example:8443/acme/api.git': ");
      const pass = await ask(url, "Password for 'https://x-access-token@github.example:8443/acme/api.git': ");
      assert.deepEqual([user.status, user.stdout, pass.status, pass.stdout], [0, 'x-access-token\n', 0, `${TOKEN}\n`]);
    });

    for (const [what, prompt] of [
      ['another port', "Password for 'https://x-access-token@github.example:9443/acme/api.git': "],
      ['another host', "Password for 'https://x-access-token@evil.example:8443/acme/api.git': "],
      ['another repository', "Password for 'https://x-access-token@github.example:8443/mallory/loot.git': "],
      ['plain http', "Password for 'http://x-access-token@github.example:8443/acme/api.git': "],
      ['a proxy', "Password for 'http://proxy.example:3128': "],
    ] as const) {
      it(`refuses a prompt for ${what} and logs the refusal`, async () => {
        const r = await ask('https://github.example:8443/acme/api.git', prompt);
        assert.notEqual(r.status, 0);
        assert.equal(r.stdout, '');
        assert.match(r.stderr, /^svc askpass: refused a credential for ".+": the token is only for "https:\/\/github\.example:8443\/acme\/api\.git"/);
        assert.equal(r.stderr.includes(TOKEN), false);
      });
    }
  });
});

describe('a managed checkout whose clone= origin redirects', () => {
  let root: string;
  let servers: ChildProcess[] = [];
  after(() => {
    for (const s of servers) s.kill();
    servers = [];
    rmSync(root, { recursive: true, force: true });
  });

  it('fails the job with a message naming both hosts, and the other host never sees the token', async () => {
    root = mkdtempSync(join(tmpdir(), 'svc-managed-redirect-'));
    const cert = makeCert(root);
    writeFileSync(join(root, 'key.pem'), cert.key);
    writeFileSync(join(root, 'cert.pem'), cert.cert);
    writeFileSync(join(root, 'server.mjs'), SERVER);
    const start = async (log: string, to?: string) => {
      const args = [join(root, 'server.mjs'), join(root, 'key.pem'), join(root, 'cert.pem'), join(root, log)];
      const child = spawn(process.execPath, to ? [...args, to] : args, { stdio: ['ignore', 'pipe', 'inherit'] });
      servers.push(child);
      return new Promise<string>((r) => child.stdout!.once('data', (c: Buffer) => r(c.toString().trim())));
    };
    const otherPort = await start('other.log');
    const originPort = await start('origin.log', otherPort);
    const env = { PATH: process.env.PATH, HOME: root, GITHUB_TOKEN: TOKEN, GIT_SSL_CAINFO: join(root, 'cert.pem'),
      GITHUB_API_URL: `https://127.0.0.1:${originPort}/api/v3` };
    const stateDir = join(root, 'state');
    const managed = createManagedCheckouts({ stateDir, checkoutsDir: join(root, 'checkouts'), env,
      log: createLogger('test', () => {}) });
    const keys = { errtrack: [], trackera: [], trackerb: [], chata: [], chatb: [] };
    const repo: ServedRepo = { name: 'acme/api', checkout: null, clone: `https://127.0.0.1:${originPort}/acme/api.git`,
      keys, isDefault: false, line: 1 };
    await assert.rejects(managed.prepare(repo, { id: 'j1', origin: 'jobs', args: [] }), (err: unknown) => {
      assert.ok(err instanceof ManagedGitError, String(err));
      assert.ok(err.message.includes(`"https://127.0.0.1:${originPort}/acme/api.git"`), err.message);
      assert.ok(err.message.includes(`redirected to "https://127.0.0.1:${otherPort}/acme/api.git"`), err.message);
      return true;
    });
    const read = (f: string) => (existsSync(join(root, f)) ? readFileSync(join(root, f), 'utf8') : '');
    assert.notEqual(read('origin.log'), '', 'git asked the origin');
    assert.equal(read('other.log').includes('Basic'), false, 'the other host never got the token');
    assert.equal(read('origin.log').includes('Basic'), false);
  });
});

describe('the redirect refusal when the server cannot be asked where it points', () => {
  it('names "another address" when the CA file is unreadable or the URL is not http(s), asking nothing', async () => {
    const env = { GIT_SSL_CAINFO: join(tmpdir(), 'svc-no-such-ca.pem') };
    const https = await redirectRefusal('https://127.0.0.1:1/acme/api.git/', 'git-upload-pack', env);
    assert.ok(https instanceof CredentialRedirectError);
    assert.match(https.message, /^The git server at "https:\/\/127\.0\.0\.1:1\/acme\/api\.git\/" redirected to another address \(the server did not say where\): svc follows no redirect/);
    const ssh = await redirectRefusal('ssh://git@127.0.0.1/acme/api.git', 'git-receive-pack', {});
    assert.match(ssh.message, /^The git server at "ssh:\/\/…@127\.0\.0\.1\/acme\/api\.git" redirected to another address/);
  });
});
