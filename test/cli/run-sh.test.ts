import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, rmSync, chmodSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStandIn, sendJson, type StandIn } from '../client/stand-in.ts';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { runChild, type ChildResult } from '../helpers/run-child.ts';

const SCRIPT = join(import.meta.dirname, '../../scripts/run.sh');
const TOKEN = 'tok-Zq9-secret-value';
const dir = mkdtempSync(join(tmpdir(), 'svc-'));
const home = join(dir, 'home');
const bin = join(dir, 'bin');
const argvLog = join(dir, 'curl-argv.log');
let api: StandIn;

// A curl on PATH that records its argv, then hands over to the real curl.
function installCurlSpy(): void {
  const realCurl = execFileSync('sh', ['-c', 'command -v curl'], { encoding: 'utf8' }).trim();
  mkdirSync(bin, { recursive: true });
  writeFileSync(join(bin, 'curl'), `#!/bin/sh\nprintf '%s\\n' "$@" >> "${argvLog}"\nexec "${realCurl}" "$@"\n`);
  chmodSync(join(bin, 'curl'), 0o755);
}

function runSh(args: string[], env: Record<string, string | undefined> = {}): Promise<ChildResult> {
  return runChild('bash', [SCRIPT, ...args], {
    env: { PATH: `${bin}:${process.env.PATH ?? ''}`, HOME: home, SVC_CONTROL_URL: api.url, SVC_CONTROL_TOKEN: TOKEN, ...env },
  });
}

before(async () => {
  mkdirSync(home, { recursive: true });
  installCurlSpy();
  api = await startStandIn();
});
after(async () => {
  await api.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('run.sh requests', () => {
  it('lists runs with URL-encoded filters and prints the JSON page', async () => {
    api.seen.length = 0;
    api.answer = (_req, res) => sendJson(res, 200, { items: [], next_cursor: null });
    const r = await runSh(['list', '--repo', 'acme/api x', '--verdict', 'verified', '--group', 'g1', '--limit', '5', '--failure', 'infra']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { items: [], next_cursor: null });
    const u = new URL(api.seen[0]!.url, api.url);
    assert.equal(u.pathname, '/v1/runs');
    assert.deepEqual(Object.fromEntries(u.searchParams), { repo: 'acme/api x', verdict: 'verified', group_id: 'g1', limit: '5', failure: 'infra' });
    assert.equal(api.seen[0]!.headers.authorization, `Bearer ${TOKEN}`);
  });

  it('starts a run with a JSON body that survives quotes, backslashes and newlines', async () => {
    api.seen.length = 0;
    api.answer = (_req, res) => sendJson(res, 202, { source: 'local', run: 'r1' });
    const brief = 'Fix "the" crash\\n in C:\\temp\nsecond line — ünïcode';
    const r = await runSh(['start', '--repo', '/srv/repo', '--brief', brief, '--provider', 'claude', '--pr', '--request-id', 'req-1']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(api.seen[0]!.method, 'POST');
    assert.equal(api.seen[0]!.url, '/v1/start');
    assert.equal(api.seen[0]!.headers['content-type'], 'application/json');
    assert.deepEqual(JSON.parse(api.seen[0]!.body), { brief, repo: '/srv/repo', provider: 'claude', pr: true, request_id: 'req-1' });
  });

  it('shows, stops and answers a run by <source>/<run>', async () => {
    api.seen.length = 0;
    api.answer = (req, res) => sendJson(res, req.method === 'GET' ? 200 : 202, { source: 'local', run: 'r1', status: 'running' });
    assert.equal((await runSh(['show', 'local/r1'])).code, 0);
    assert.equal((await runSh(['stop', 'local/r1'])).code, 0);
    assert.equal((await runSh(['answer', 'r1', 'use', '"postgres"'], { SVC_SOURCE: 'ci' })).code, 0);
    assert.deepEqual(api.seen.map((s) => `${s.method} ${s.url}`), ['GET /v1/runs/local/r1', 'POST /v1/runs/local/r1/stop', 'POST /v1/runs/ci/r1/answer']);
    assert.deepEqual(JSON.parse(api.seen[2]!.body), { answer: 'use "postgres"' });
  });

  it('streams Server-Sent Events to stdout, resuming with Last-Event-ID', async () => {
    api.seen.length = 0;
    api.answer = (req, res) => {
      if (!req.url.includes('/stream')) return sendJson(res, 200, { source: 'local', run: 'r1' });
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end('id: 8\nevent: log\ndata: {"text":"hi"}\n\n');
    };
    const r = await runSh(['stream', 'local/r1', '--after', '7']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'id: 8\nevent: log\ndata: {"text":"hi"}\n\n');
    const streamReq = api.seen.find((s) => s.url.startsWith('/v1/runs/local/r1/stream'))!;
    assert.equal(streamReq.url, '/v1/runs/local/r1/stream?after=7');
    assert.equal(streamReq.headers['last-event-id'], '7');
    assert.equal(streamReq.headers.authorization, `Bearer ${TOKEN}`);
  });

  it('reports status from /health and finds the server through server.json', async () => {
    api.answer = (_req, res) => sendJson(res, 200, { status: 'ok' });
    mkdirSync(join(home, '.svc', 'control'), { recursive: true });
    writeFileSync(join(home, '.svc', 'control', 'server.json'), JSON.stringify({ url: api.url, pid: process.pid }));
    const r = await runSh(['status'], { SVC_CONTROL_URL: undefined });
    rmSync(join(home, '.svc'), { recursive: true, force: true });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `Control Plane at ${api.url} is up: {"status":"ok"}\n`);
  });
});

describe('run.sh errors', () => {
  it('prints the error envelope message and exits 1 on a non-2xx answer', async () => {
    api.answer = (_req, res) => sendJson(res, 409, { error: { code: 'invalid_transition', message: 'Run local/r1 is not blocked' } });
    const r = await runSh(['answer', 'local/r1', 'x']);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, 'run.sh: Run local/r1 is not blocked (409 invalid_transition)\n');
  });

  it('shows the message as text: quotes and backslashes unescaped, no control code reaching the terminal', async () => {
    // JSON.stringify writes ESC and the newline as escapes but U+009B raw, as the servers' bodies do.
    const message = 'Body field "repo" must be absolute: a\\b/c\nnext \u001b[31mred \u009b2J';
    api.answer = (_req, res) => sendJson(res, 400, { error: { code: 'invalid_request', message } });
    const r = await runSh(['show', 'local/r1']);
    assert.equal(r.code, 1);
    const shown = 'Body field "repo" must be absolute: a\\b/c next \\u001b[31mred \uFFFD2J';
    assert.equal(r.stderr, `run.sh: ${shown} (400 invalid_request)\n`);
  });

  it('exits 1 naming the URL when the server is unreachable', async () => {
    const gone = await startStandIn();
    await gone.close();
    const r = await runSh(['status'], { SVC_CONTROL_URL: gone.url });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^run\.sh: cannot reach the Control Plane at http:\/\/127\.0\.0\.1:\d+ \(curl exit 7\)$/m);
  });

  it('exits 2 on usage errors without calling curl', async () => {
    rmSync(argvLog, { force: true });
    for (const args of [[], ['bogus'], ['show'], ['show', '../etc/passwd'], ['show', 'a/b/c'], ['start', '--brief', 'x'], ['list', '--nope', '1'], ['stream', '--after', 'x']]) {
      const r = await runSh(args);
      assert.equal(r.code, 2, `run.sh ${args.join(' ')} → ${r.code}: ${r.stderr}`);
    }
    assert.equal(existsSync(argvLog), false);
  });

  it('prints usage with --help and exits 0', async () => {
    const r = await runSh(['--help']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /^Usage: run\.sh <command>/);
    for (const cmd of ['list', 'show', 'start', 'stop', 'answer', 'stream', 'status']) assert.match(r.stdout, new RegExp(`^  ${cmd}\\b`, 'm'));
  });
});

describe('security', () => {
  it('never puts the token on a curl command line', async () => {
    rmSync(argvLog, { force: true });
    api.answer = (req, res) => (req.url.includes('/stream') ? (res.writeHead(200, { 'content-type': 'text/event-stream' }), res.end()) : sendJson(res, 200, { items: [] }));
    for (const args of [['list'], ['show', 'local/r1'], ['stop', 'local/r1'], ['answer', 'local/r1', 'y'], ['start', '--repo', '/r', '--brief', 'b'], ['status'], ['stream']]) {
      await runSh(args);
    }
    const argv = readFileSync(argvLog, 'utf8');
    assert.ok(argv.includes('--config'), 'the spy saw no curl calls');
    assert.ok(!argv.includes(TOKEN), 'token appeared in curl argv');
    assert.ok(!argv.includes('Authorization'), 'auth header appeared in curl argv');
  });

  it('sends no Authorization header when SVC_CONTROL_TOKEN is unset', async () => {
    api.seen.length = 0;
    api.answer = (_req, res) => sendJson(res, 200, { items: [] });
    assert.equal((await runSh(['list'], { SVC_CONTROL_TOKEN: undefined })).code, 0);
    assert.equal(api.seen[0]!.headers.authorization, undefined);
  });
});

describe('run.sh against a live Control Plane', () => {
  let cp: TestControl;
  const CP_TOKEN = 'live-token-Qx81';
  before(async () => {
    cp = await startTestControl({ token: CP_TOKEN });
    const now = new Date().toISOString();
    const seeded = await cp.request('POST', '/v1/ingest', {
      body: {
        source: 'local',
        runs: [{ run: 'rlive1', repo: 'acme/api', status: 'blocked', question: 'Which database?', brief: 'live run', started_at: now }],
      },
    });
    assert.equal(seeded.status, 200, seeded.text);
    const remote = await cp.request('POST', '/v1/ingest', { body: { source: 'ci', runs: [{ run: 'rremote', status: 'running', started_at: now }] } });
    assert.equal(remote.status, 200, remote.text);
  });
  after(() => cp.close());

  const live = (args: string[], token = CP_TOKEN) => runSh(args, { SVC_CONTROL_URL: cp.url, SVC_CONTROL_TOKEN: token });

  it('reports status, lists and shows runs', async () => {
    const status = await live(['status']);
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /is up/);
    const list = await live(['list', '--repo', 'acme/api']);
    assert.equal(list.code, 0, list.stderr);
    assert.deepEqual(JSON.parse(list.stdout).items.map((r: { run: string }) => r.run), ['rlive1']);
    const show = await live(['show', 'local/rlive1']);
    assert.equal(show.code, 0, show.stderr);
    assert.equal(JSON.parse(show.stdout).question, 'Which database?');
  });

  it('answers a blocked run and stops a remote run through the hand-over', async () => {
    const answer = await live(['answer', 'local/rlive1', 'PostgreSQL 16']);
    assert.equal(answer.code, 0, answer.stderr);
    const stop = await live(['stop', 'ci/rremote']);
    assert.equal(stop.code, 0, stop.stderr);
  });

  it('imports a project, after which a start there is no longer refused as unregistered', async () => {
    const project = join(dir, 'project with "quotes"');
    mkdirSync(project);
    execFileSync('git', ['init', '-q', project]);
    const before = await live(['start', '--repo', project, '--brief', 'x', '--provider', 'none-such']);
    assert.equal(before.code, 1);
    assert.match(before.stderr, /is not registered with this Control Plane: import it first/);
    const imported = await live(['import', project]);
    assert.equal(imported.code, 0, imported.stderr);
    assert.equal(JSON.parse(imported.stdout).runs, 0);
    const after = await live(['start', '--repo', project, '--brief', 'x', '--provider', 'none-such']);
    assert.equal(after.code, 0, after.stderr);
    assert.equal(JSON.parse(after.stdout).status, 'queued');
    assert.equal((await runSh(['import'])).code, 2);
  });

  it('exits 1 with the server message for a wrong token and an unknown run', async () => {
    const denied = await live(['list'], 'wrong-token');
    assert.equal(denied.code, 1);
    assert.match(denied.stderr, /\(401 unauthorized\)\n$/);
    const missing = await live(['show', 'local/rnope']);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /\(404 not_found\)\n$/);
  });
});
