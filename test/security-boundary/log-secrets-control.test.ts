// The Control Plane scrubs again what a runner ships: a pod's agent writes its own events.jsonl and artifacts before
// the signer forwards them, so what the worker cut is no guarantee. And a line longer than one piece is cut where no
// secret is split, or each half would get past the scrub.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { makeRepo, CLI, EDIT_SCRIPT, GIT_ENV } from '../engine/fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { buildSummaryParts, plainSummary } from '../../src/trigger/summary.ts';
import { mintJobCredential } from '../../src/gate/job-credential.ts';

const credential = mintJobCredential(randomBytes(32), { job: 'j1', run: 'r1', repo: 'acme' }, Date.now() + 3_600_000);
const TOKEN = 'ghp_pushtoken0123456789';
const MAC = credential.split('.')[2]!;

// One line of some 400 KB, every part of it a secret or a header naming one: wherever a piece of it ends, it ends
// inside a secret unless the cut looks for the gap between two.
const LONG_LINER = `#!/bin/sh
cat > /dev/null
node -e 'const s = process.argv[1]; process.stdout.write(s.repeat(Math.ceil(400000 / s.length)) + "\\n")' \
  "Authorization: Bearer ${TOKEN}	https://u:${TOKEN}@h/ g1.${credential.slice(3)} "
echo fixed >> a.txt
`;

async function start(control: TestControl, provider: string, providers: Record<string, string>) {
  const repo = makeRepo({ providers });
  const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: control.url };
  const child = spawn(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--provider', provider],
    { cwd: repo.repo, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const status = await new Promise((resolve) => child.on('close', resolve));
  assert.equal(status, 0, stderr);
  const { source, run } = JSON.parse(stdout.trim().split('\n')[0]!) as { source: string; run: string };
  return { repo, source, run, dir: join(repo.repo, '.svc', 'runs', run) };
}

function assertNoSecret(text: string): void {
  for (const part of [TOKEN, 'ghp_', 'token0123', MAC, MAC.slice(0, 12), MAC.slice(-12)]) {
    assert.equal(text.includes(part), false, `${part} in ${text.slice(0, 2000)}`);
  }
}

describe('secrets the Control Plane takes', () => {
  let control: TestControl;
  before(async () => {
    control = await startTestControl();
  });
  after(() => control.close());

  it('cuts them from an event line and a log artifact as a pod\'s agent may have rewritten them', async () => {
    // What a pod's signer forwards is the agent's events.jsonl and artifacts (a local run's sandbox cannot write
    // them): shipped here as that copy, a header's tab in a JSON escape the worker's own line never has.
    const T0 = '2026-02-01T10:00:00.000Z';
    const text = `push https://x-access-token:${TOKEN}@github.com/a/b.git`;
    const res = await control.request('POST', '/v1/ingest', { body: {
      source: 'pod',
      runs: [{ run: 'r1', status: 'running', started_at: T0, updated_at: T0, repo: 'acme/api', brief: 'fix' }],
      events: [{ run: 'r1', seq: 1, ts: T0, kind: 'log',
        data: { stream: 'stdout', text, h: [`Authorization:\tBearer ${TOKEN}`] } }],
      artifacts: [{ run: 'r1', path: 'checks/unit.log', content_type: 'text/plain',
        content_base64: Buffer.from(`base URL http://svc-gate.test/_job/${credential}/_model\n`).toString('base64') }],
    } });
    assert.equal(res.status, 200, res.text);
    const events = await control.request('GET', '/v1/runs/pod/r1/events');
    assert.equal(events.status, 200);
    assertNoSecret(events.text);
    const [own] = (events.json as { items: Array<{ data: unknown }> }).items;
    assert.deepEqual(own?.data, { stream: 'stdout', text: 'push https://***@github.com/a/b.git',
      h: ['Authorization:\tBearer ***'] }, 'cut as the text it is, not as its JSON escapes');
    const log = await control.request('GET', '/v1/runs/pod/r1/artifact/checks/unit.log');
    assert.equal(log.status, 200);
    assert.equal(log.text, 'base URL http://svc-gate.test/_job/g1.***/_model\n');
  });

  it('cuts them from a run\'s error, question and failure reason as a runner sends them', async () => {
    const url = `https://u:${TOKEN}@h/`;
    const T0 = '2026-02-01T10:00:00.000Z';
    const res = await control.request('POST', '/v1/ingest', { body: {
      source: 'laptop',
      runs: [{ run: 'r1', status: 'failed', started_at: T0, updated_at: T0, ended_at: T0, repo: 'acme/api',
        brief: 'fix', question: `push to ${url}?`, error: `git said ${url}`,
        failure: { class: 'agent', reason: `Proxy-Authorization: Basic ${TOKEN}`, retryable: false } }],
    } });
    assert.equal(res.status, 200, res.text);
    const got = await control.request('GET', '/v1/runs/laptop/r1');
    assert.equal(got.status, 200);
    assertNoSecret(got.text);
    const row = got.json as { error: string; failure: { reason: string } };
    assert.equal(row.error, 'git said https://***@h/');
    assert.equal(row.failure.reason, 'Proxy-Authorization: Basic ***');
  });

  it('cuts every secret of a line longer than a piece whole, on disk and at the Control Plane', async () => {
    const { repo, source, run, dir } = await start(control, 'long', { long: LONG_LINER });
    try {
      const log = readFileSync(join(dir, 'artifacts', 'provider.log'), 'utf8');
      assert.ok(log.split('\n').length > 4, 'the line came in pieces');
      assertNoSecret(log);
      const events = await control.request('GET', `/v1/runs/${source}/${run}/events?limit=1000`);
      assertNoSecret(events.text);
      const shipped = await control.request('GET', `/v1/runs/${source}/${run}/artifact/provider.log`);
      assertNoSecret(shipped.text);
    } finally {
      repo.cleanup();
    }
  });
});

describe('secrets in what a run says of its end', () => {
  it('keeps a token a forge\'s refusal quotes out of the run\'s error, failure, log and CLI output', async () => {
    // A proxy in front of the forge that echoes the request's credential header in its refusal.
    const refusing = createServer((req, res) => {
      req.resume();
      res.writeHead(401, { 'content-type': 'text/plain' }).end(`denied: Authorization: ${req.headers.authorization}`);
    });
    await new Promise<void>((r) => refusing.listen(0, '127.0.0.1', () => r()));
    const repo = makeRepo({ providers: { fake: EDIT_SCRIPT },
      policy: { checks: [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'] }] } });
    try {
      const env = { PATH: '/usr/bin:/bin', HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0',
        SVC_CONTROL_URL: 'http://127.0.0.1:9', GITHUB_TOKEN: TOKEN,
        GITHUB_API_URL: `http://127.0.0.1:${(refusing.address() as { port: number }).port}` };
      const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--pr', '--provider',
        'fake'], { cwd: repo.repo, env });
      const { run } = JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string };
      const dir = join(repo.repo, '.svc', 'runs', run);
      const state = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')) as
        { status: string; error: string; failure: { reason: string } };
      assert.equal(state.status, 'failed');
      assert.match(state.error, /^Pull request not opened: GitHub answered 401 .*: denied: Authorization: \S+ \*\*\*$/);
      for (const text of [JSON.stringify(state), readFileSync(join(dir, 'events.jsonl'), 'utf8'), res.stderr]) {
        assertNoSecret(text);
      }
    } finally {
      await new Promise((r) => refusing.close(r));
      repo.cleanup();
    }
  });

  it('ends a check\'s log cut at its cap where no secret is cut in two', async () => {
    // 256 KiB is the cap: it falls inside the token, after "ghp_pusht".
    const print = `process.stdout.write("x".repeat(256 * 1024 - 20) + " https://u:${TOKEN}@h/\\n")`;
    const repo = makeRepo({ providers: { fake: EDIT_SCRIPT },
      policy: { checks: [{ name: 'loud', run: ['node', '-e', print], required: false }] } });
    try {
      const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_SHIP: '0', SVC_CONTROL_URL: 'http://127.0.0.1:9' };
      const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--provider', 'fake'],
        { cwd: repo.repo, env });
      assert.equal(res.code, 0, res.stderr);
      const { run } = JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string };
      const log = readFileSync(join(repo.repo, '.svc', 'runs', run, 'artifacts', 'checks', 'loud.log'), 'latin1');
      assert.match(log, /^x+ \n\[output truncated\]\n$/);
    } finally {
      repo.cleanup();
    }
  });

  it('keeps a token a run\'s error quotes out of the summary its origin gets', () => {
    const parts = buildSummaryParts({ jobId: 'j1', status: 'failed', run: { source: 'laptop', run: 'r1' },
      outcome: null, durationMs: 1000, error: `git: unable to access 'https://x-access-token:${TOKEN}@github.com/a'`,
      publicUrl: undefined });
    const summary = plainSummary(parts);
    assertNoSecret(summary);
    assert.match(summary, /error: git: unable to access 'https:\/\/\*\*\*@github\.com\/a'/);
  });
});
