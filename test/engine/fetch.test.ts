import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { readdirSync, readFileSync } from 'node:fs';
import { spawnSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { SvcError } from '../../src/errors.ts';
import {
  errtrackSpec, fetchIssueExport, issueApiUrls,
} from '../../src/engine/errtrack-spec.ts';
import { buildTask, classifyInput } from '../../src/engine/spec.ts';
import { makeRepo, CLI, type TestRepo } from './fixtures.ts';

const FIXTURES = new URL('./fixtures', import.meta.url).pathname;
const TOKEN = 'errtrack-secret-token-3141592653';

/** Every process's argv on this machine that mentions the token (must stay empty). */
function argvWithToken(): string[] {
  const hits: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
      if (cmdline.includes(TOKEN)) hits.push(`${pid}: ${cmdline}`);
    } catch {
      // Process gone or not ours to read.
    }
  }
  return hits;
}

function curlArgvs(): string[] {
  const out: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
      if (argv[0] && /(^|\/)curl$/.test(argv[0])) out.push(argv.slice(1).join(' '));
    } catch {
      // gone
    }
  }
  return out;
}

describe('fetching an error-tracker issue URL', () => {
  let server: Server;
  let url = '';
  const seen: Array<{ path: string; auth: string | undefined; argvHits: string[]; curl: string[] }> = [];
  let repo: TestRepo;

  before(async () => {
    repo = makeRepo();
    server = createServer((req, res) => {
      // Scan while curl is still waiting for this answer, so its argv is live in /proc.
      seen.push({ path: req.url ?? '', auth: req.headers.authorization, argvHits: argvWithToken(), curl: curlArgvs() });
      const file = req.url?.endsWith('/events/latest/') ? 'sentry-api-latest-event.json' : 'sentry-api-issue.json';
      res.writeHead(200, { 'content-type': 'application/json' }).end(readFileSync(join(FIXTURES, file)));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  after(async () => {
    await new Promise<void>((r) => server.close(() => r()));
    repo.cleanup();
  });

  it('maps issue page URLs to the REST API, with ERRTRACK_URL replacing the base', () => {
    const api = issueApiUrls('https://acme.sentry.io/issues/6507376925/', {});
    assert.equal(api.issueUrl, 'https://acme.sentry.io/api/0/organizations/acme/issues/6507376925/');
    assert.equal(api.eventUrl, 'https://acme.sentry.io/api/0/organizations/acme/issues/6507376925/events/latest/');
    assert.equal(issueApiUrls('https://acme.sentry.io/issues/1/', { ERRTRACK_URL: 'http://127.0.0.1:9' }).issueUrl, 'http://127.0.0.1:9/api/0/organizations/acme/issues/1/');
  });

  it('sends the token over plain http to a loopback address only, refusing before anything is sent', async () => {
    const before = seen.length;
    // 0.0.0.0 is no loopback name but reaches this machine's own listeners: a missing refusal shows up here.
    const base = `http://0.0.0.0:${new URL(url).port}`;
    await assert.rejects(fetchIssueExport('https://acme.sentry.io/issues/1/', { ERRTRACK_AUTH_TOKEN: TOKEN, ERRTRACK_URL: base }),
      { code: 'bad_setting', message: `Refusing to send ERRTRACK_AUTH_TOKEN over http: to ${new URL(base).host}: use https` });
    await assert.rejects(fetchIssueExport('https://acme.sentry.io/issues/1/', { ERRTRACK_AUTH_TOKEN: 'two words', ERRTRACK_URL: url }),
      { code: 'bad_setting', message: 'ERRTRACK_AUTH_TOKEN contains characters a token cannot have' });
    assert.equal(seen.length, before);
  });

  it('sends the token only in a curl config on stdin: it reaches the host but no process argv', async () => {
    const exp = await fetchIssueExport('https://acme.sentry.io/issues/6507376925/', { ERRTRACK_AUTH_TOKEN: TOKEN, ERRTRACK_URL: url });
    assert.deepEqual(seen.map((s) => s.path), ['/api/0/organizations/acme/issues/6507376925/', '/api/0/organizations/acme/issues/6507376925/events/latest/']);
    for (const s of seen) {
      assert.equal(s.auth, `Bearer ${TOKEN}`);
      assert.deepEqual(s.argvHits, []);
      assert.ok(s.curl.includes('-q --config -'), `curl ran as "curl -q --config -" (saw ${JSON.stringify(s.curl)})`);
    }
    const spec = errtrackSpec(exp).spec;
    assert.match(spec, /index\.js:19631 in Object\.fetch/);
  });

  it('exits 2 through svc start without ERRTRACK_AUTH_TOKEN and fetches nothing', () => {
    const before = seen.length;
    const { ERRTRACK_AUTH_TOKEN: _drop, ...env } = process.env;
    const res = spawnSync(process.execPath, [CLI, 'start', 'https://acme.sentry.io/issues/6507376925/', '--repo', repo.repo], {
      env: { ...env, HOME: repo.home, ERRTRACK_URL: url, SVC_CONTROL_URL: 'http://127.0.0.1:9' },
      encoding: 'utf8',
    });
    assert.equal(res.status, 2);
    assert.match(res.stderr, /ERRTRACK_AUTH_TOKEN is not set, so nothing was fetched/);
    assert.equal(seen.length, before);
  });

  it('fetches nothing for a chat run naming an issue URL, token set: chat text may name any project\'s issue', async () => {
    const page = 'https://acme.sentry.io/organizations/acme/issues/6507376925/';
    const task = (origin: string | undefined) => buildTask(classifyInput(page, {
      forceBrief: false, cwd: repo.repo, confineTo: repo.repo,
    }), repo.repo, { SVC_ORIGIN: origin, ERRTRACK_AUTH_TOKEN: TOKEN, ERRTRACK_URL: url });
    const before = seen.length;
    for (const origin of ['chata', 'chatb', 'trackera', 'webhook']) {
      await assert.rejects(task(origin), {
        code: 'bad_input',
        message: `Refusing to fetch the error-tracker issue "${page}" for a ${origin} run: ERRTRACK_AUTH_TOKEN ` +
          'serves only the CLI, the Control Plane, /jobs and the errtrack webhook\'s runs, and text from ' +
          `${origin} may name any project's issue. Paste the issue's details instead`,
      });
    }
    assert.equal(seen.length, before, 'nothing reached the tracker');
    for (const origin of ['errtrack', 'jobs', 'control', undefined]) {
      assert.match((await task(origin)).spec, /index\.js:19631 in Object\.fetch/);
    }
  });

  it('sends the token only to sentry.io hosts or the ERRTRACK_URL host', () => {
    for (const page of ['https://tracker.example.com/issues/1/', 'https://sentry.io.evil.example/issues/1/', 'https://evilsentry.io/issues/1/', 'http://127.0.0.1:9/issues/1/']) {
      const named = (e: unknown) => e instanceof SvcError && e.code === 'bad_setting' && e.message.includes(new URL(page).host);
      assert.throws(() => issueApiUrls(page, {}), named, page);
    }
    const host = (page: string, env: NodeJS.ProcessEnv = {}) => new URL(issueApiUrls(page, env).issueUrl).host;
    assert.equal(host('https://us.sentry.io/organizations/acme/issues/7/'), 'us.sentry.io');
    assert.equal(host('https://sentry.io/organizations/acme/issues/7/'), 'sentry.io');
    assert.equal(host('https://tracker.example.com/organizations/acme/issues/7/', { ERRTRACK_URL: 'https://tracker.example.com' }), 'tracker.example.com');
  });

  it('exits 2 naming the host through svc start when an issue URL names another host and ERRTRACK_URL is unset', async () => {
    const before = seen.length;
    const { ERRTRACK_URL: _drop, ...env } = process.env;
    const child = spawn(process.execPath, [CLI, 'start', `${url}/organizations/acme/issues/1/`, '--repo', repo.repo], {
      env: { ...env, HOME: repo.home, ERRTRACK_AUTH_TOKEN: TOKEN, SVC_CONTROL_URL: 'http://127.0.0.1:9' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const status = await new Promise((resolve) => child.on('close', resolve));
    assert.equal(status, 2);
    assert.match(stderr, new RegExp(`"${new URL(url).host}".*ERRTRACK_URL`));
    assert.equal(seen.length, before, 'nothing reached the host');
    assert.ok(!stderr.includes(TOKEN));
  });

  it('never prints the token when the tracker refuses it', async () => {
    const res = spawnSync(process.execPath, [CLI, 'start', 'https://acme.sentry.io/issues/1/', '--repo', repo.repo], {
      env: { ...process.env, HOME: repo.home, ERRTRACK_AUTH_TOKEN: TOKEN, ERRTRACK_URL: 'http://127.0.0.1:9', SVC_CONTROL_URL: 'http://127.0.0.1:9' },
      encoding: 'utf8',
    });
    assert.equal(res.status, 1);
    assert.match(res.stderr, /Fetching .* failed/);
    assert.ok(!res.stderr.includes(TOKEN) && !res.stdout.includes(TOKEN));
  });
});
