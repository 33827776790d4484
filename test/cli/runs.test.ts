import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStandIn, sendJson, type StandIn } from '../client/stand-in.ts';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { runChild, type ChildResult } from '../helpers/run-child.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');
const home = mkdtempSync(join(tmpdir(), 'svc-'));
let api: StandIn;

const RUN = {
  source: 'local', run: 'r01abc', repo: 'acme/api', group_id: 'r01abc', status: 'blocked', verdict: null,
  brief: 'Fix the \u001b[31mcrash\u001b[0m', origin: 'cli', provider: 'claude', branch: 'svc/r01abc', pr_url: null,
  question: 'Which database?', started_at: '2026-11-20T10:00:00.000Z', ended_at: null, updated_at: '2026-11-20T10:01:00.000Z',
  cost_usd: null, tokens_in: null, tokens_out: null, exit_code: null, error: null,
};

function svc(args: string[], env: Record<string, string> = {}): Promise<ChildResult> {
  return runChild(process.execPath, [CLI, 'runs', ...args], { env: { PATH: process.env.PATH ?? '', HOME: home, SVC_CONTROL_URL: api.url, ...env } });
}

before(async () => {
  api = await startStandIn();
});
after(async () => {
  await api.close();
  rmSync(home, { recursive: true, force: true });
});

describe('svc runs list', () => {
  it('prints a table and passes filters as query parameters with the token from the environment', async () => {
    api.seen.length = 0;
    api.answer = (_req, res) => sendJson(res, 200, { items: [RUN], next_cursor: 'c2' });
    const r = await svc(['list', '--verdict', 'verified', '--repo', 'acme/api', '--group', 'g1', '--since', '2026-11-01', '--limit', '10'], { SVC_CONTROL_TOKEN: 'tok' });
    assert.equal(r.code, 0, r.stderr);
    const [head, row] = r.stdout.trimEnd().split('\n');
    assert.match(head!, /^RUN\s+STATUS\s+VERDICT\s+REPO\s+STARTED\s+BRIEF$/);
    assert.match(row!, /^local\/r01abc\s+blocked\s+-\s+acme\/api\s+2026-11-20 10:00\s+Fix the\s+\[31mcrash \[0m$/);
    assert.ok(!r.stdout.includes('\u001b'), 'terminal escapes from data reach the terminal');
    assert.equal(r.stderr, 'More runs: svc runs list --cursor c2\n');
    const u = new URL(api.seen[0]!.url, api.url);
    assert.deepEqual(Object.fromEntries(u.searchParams), { verdict: 'verified', repo: 'acme/api', group_id: 'g1', since: '2026-11-01', limit: '10' });
    assert.equal(api.seen[0]!.headers.authorization, 'Bearer tok');
  });

  it('asks for runs with no verdict yet with --verdict none, as the API allows', async () => {
    api.seen.length = 0;
    api.answer = (_req, res) => sendJson(res, 200, { items: [RUN], next_cursor: null });
    const r = await svc(['list', '--verdict', 'none']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(new URL(api.seen[0]!.url, api.url).searchParams.get('verdict'), 'none');
  });

  it('prints the page as JSON with --json, defaulting to list with no subcommand', async () => {
    api.answer = (_req, res) => sendJson(res, 200, { items: [RUN], next_cursor: null });
    const r = await svc(['--json']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { items: [RUN], next_cursor: null });
  });

  it('rejects a bad verdict or limit with exit 2 before calling the server', async () => {
    api.seen.length = 0;
    assert.equal((await svc(['list', '--verdict', 'great'])).code, 2);
    assert.equal((await svc(['list', '--limit', '0'])).code, 2);
    assert.equal(api.seen.length, 0);
  });

  it('rejects a --since or --until that is no time with exit 2 before calling the server', async () => {
    api.seen.length = 0;
    const since = await svc(['list', '--since', 'yesterday']);
    assert.equal(since.code, 2);
    assert.equal(since.stderr, 'svc runs: Invalid --since "yesterday" (expected an ISO-8601 time or unix ms)\n');
    assert.equal((await svc(['--until', '2026-13-45'])).code, 2);
    assert.equal(api.seen.length, 0);
  });
});

describe('svc runs show and actions', () => {
  it('shows one run with its pending question', async () => {
    api.seen.length = 0;
    api.answer = (_req, res) => sendJson(res, 200, RUN);
    const r = await svc(['show', 'local/r01abc']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(api.seen[0]!.url, '/v1/runs/local/r01abc');
    assert.match(r.stdout, /^run {8}local\/r01abc$/m);
    assert.match(r.stdout, /^question {3}Which database\?$/m);
    assert.match(r.stdout, /^cost_usd {3}unknown$/m);
  });

  it('answers a blocked run with the joined text, resolving a bare run id to SVC_SOURCE', async () => {
    api.seen.length = 0;
    api.answer = (_req, res) => sendJson(res, 202, { ...RUN, status: 'running' });
    const r = await svc(['answer', 'r01abc', 'use', 'postgres'], { SVC_SOURCE: 'ci' });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(api.seen[0]!.url, '/v1/runs/ci/r01abc/answer');
    assert.deepEqual(JSON.parse(api.seen[0]!.body), { answer: 'use postgres' });
    assert.equal(r.stdout, 'Answered ci/r01abc\n');
  });

  for (const action of ['stop', 'resume', 'verify']) {
    it(`posts ${action} and confirms it`, async () => {
      api.seen.length = 0;
      api.answer = (_req, res) => sendJson(res, 202, RUN);
      const r = await svc([action, 'local/r01abc']);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(api.seen[0]!.method, 'POST');
      assert.equal(api.seen[0]!.url, `/v1/runs/local/r01abc/${action}`);
    });
  }

  it('posts pr and says the pull request was requested', async () => {
    api.seen.length = 0;
    api.answer = (_req, res) => sendJson(res, 202, RUN);
    const r = await svc(['pr', 'local/r01abc']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(api.seen[0]!.method, 'POST');
    assert.equal(api.seen[0]!.url, '/v1/runs/local/r01abc/pr');
    assert.equal(r.stdout, 'Pull request requested for local/r01abc\n');
  });

  it('reports the new run id on retry', async () => {
    api.answer = (_req, res) => sendJson(res, 202, { ...RUN, run: 'r02new' });
    const r = await svc(['retry', 'local/r01abc']);
    assert.equal(r.stdout, 'Retrying local/r01abc as local/r02new\n');
  });

  it('exits 1 with the server message when the API refuses', async () => {
    api.answer = (_req, res) => sendJson(res, 409, { error: { code: 'invalid_transition', message: 'Run local/r01abc is not blocked' } });
    const r = await svc(['answer', 'local/r01abc', 'x']);
    assert.equal(r.code, 1);
    assert.equal(r.stderr,
      `svc runs: the Control Plane at ${api.url} answered 409 invalid_transition (Run local/r01abc is not blocked)\n`);
  });

  it('exits 2 when the API refuses with 400 what was typed (a cursor, an answer), naming its message', async () => {
    api.answer = (_req, res) => sendJson(res, 400,
      { error: { code: 'invalid_param', message: 'Parameter "cursor" is not a cursor this server issued' } });
    const list = await svc(['list', '--cursor', 'garbage']);
    assert.equal(list.code, 2);
    assert.equal(list.stderr, `svc runs: the Control Plane at ${api.url} answered 400 invalid_param `
      + '(Parameter "cursor" is not a cursor this server issued)\n');
    assert.equal((await svc(['answer', 'local/r01abc', 'x'])).code, 2);
  });

  it('says where the token goes when the Control Plane refuses the request with 401 (svc runs and svc answer)', async () => {
    api.answer = (_req, res) => sendJson(res, 401, { error: { code: 'unauthorized', message: 'Missing or wrong bearer token' } });
    const next = 'set SVC_CONTROL_TOKEN, or SVC_CONTROL_TOKEN_FILE to a file holding it '
      + '(under systemd: /etc/svc/credentials/control-token)';
    const listed = await svc(['list']);
    assert.equal(listed.code, 1);
    const needs = `the Control Plane at ${api.url} needs a token (401 unauthorized): ${next}`;
    assert.equal(listed.stderr, `svc runs: ${needs}\n`);
    const env = { PATH: process.env.PATH ?? '', HOME: home, SVC_CONTROL_URL: api.url };
    const answered = await runChild(process.execPath, [CLI, 'answer', 'local/r01abc', 'yes'], { env, cwd: home });
    assert.equal(answered.code, 1);
    assert.equal(answered.stderr, `svc answer: ${needs}\n`);
  });

  it('exits 1 naming the URL when the Control Plane is unreachable', async () => {
    const gone = await startStandIn();
    await gone.close();
    const r = await svc(['list'], { SVC_CONTROL_URL: gone.url });
    assert.equal(r.code, 1);
    // Why nothing answered (a refused connection, not a name that resolves nowhere), then what to do.
    assert.ok(r.stderr.startsWith(`svc runs: no Control Plane answered at ${gone.url} (connect ECONNREFUSED `),
      r.stderr);
    // The address came from SVC_CONTROL_URL: the hint says so, as svc control status does, and not to set it.
    const next = ': start the server SVC_CONTROL_URL names, or unset SVC_CONTROL_URL to use a local one\n';
    assert.ok(r.stderr.endsWith(next), r.stderr);
    const given = await svc(['list', '--url', gone.url]);
    assert.equal(given.code, 1);
    assert.ok(given.stderr.endsWith(': start the server --url names, or leave --url out to use a local one\n'),
      given.stderr);
  });

  it('exits 1 saying the answer was not JSON when something in between answers 200 with a page', async () => {
    api.answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>sign in to the network</html>');
    };
    const r = await svc(['list']);
    assert.equal(r.code, 1);
    // One sentence naming the URL once.
    assert.equal(r.stderr, `svc runs: the Control Plane at ${api.url} answered 200 with something that is not JSON `
      + '(text/html)\n');
  });

  it('rejects malformed run ids, unknown subcommands and list flags on actions with exit 2', async () => {
    assert.equal((await svc(['show', '../etc'])).code, 2);
    assert.equal((await svc(['show', 'a/b/c'])).code, 2);
    assert.equal((await svc(['explode', 'local/r1'])).code, 2);
    const bare = await svc(['explode']);
    assert.equal(bare.code, 2);
    assert.match(bare.stderr, /^svc runs: Unknown subcommand "runs explode" \(expected list, show, /);
    assert.equal((await svc(['stop', 'local/r1', '--verdict', 'verified'])).code, 2);
    assert.equal((await svc(['answer', 'local/r1'])).code, 2);
  });

  it('prints help with exit 0', async () => {
    const r = await svc(['--help']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /^Usage:\n {2}svc runs \[list\]/);
  });
});

describe('svc runs against a live Control Plane', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl({ token: 'live-runs-token' });
    const res = await cp.request('POST', '/v1/ingest', {
      body: { source: 'local', runs: [{ run: 'rlive2', repo: 'acme/web', status: 'blocked', question: 'Ship it?', brief: 'live brief', started_at: new Date().toISOString() }] },
    });
    assert.equal(res.status, 200, res.text);
  });
  after(() => cp.close());

  const live = (args: string[]) => svc(args, { SVC_CONTROL_URL: cp.url, SVC_CONTROL_TOKEN: 'live-runs-token' });

  it('lists, shows and answers a run end to end', async () => {
    const list = await live(['list', '--status', 'blocked']);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /^local\/rlive2\s+blocked\s+-\s+acme\/web/m);
    const show = await live(['show', 'local/rlive2', '--json']);
    assert.equal(JSON.parse(show.stdout).question, 'Ship it?');
    const answer = await live(['answer', 'local/rlive2', 'yes']);
    assert.equal(answer.code, 0, answer.stderr);
    assert.equal(answer.stdout, 'Answered local/rlive2\n');
  });
});
