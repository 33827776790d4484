import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { BACKSTOP_PAGES } from '../../src/db/wal-checkpointer.ts';
import { waitFor } from '../helpers/wait-for.ts';

const T0 = '2026-02-01T10:00:00.000Z';

function batch(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    source: 'laptop',
    runs: [{ run: 'r1', status: 'running', started_at: T0, updated_at: T0, repo: 'acme/api', brief: 'fix login', repo_path: '/home/me/api', pid: 99 }],
    events: [
      { run: 'r1', seq: 1, ts: T0, kind: 'run.status', data: { from: 'queued', to: 'running' } },
      { run: 'r1', seq: 2, ts: Date.parse(T0) + 5, kind: 'log', data: { stream: 'stdout', text: 'hello' } },
    ],
    artifacts: [{ run: 'r1', path: 'checks/unit.log', content_type: 'text/plain', content_base64: Buffer.from('all good').toString('base64') }],
    ...over,
  };
}

describe('POST /v1/ingest', () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl();
  });
  after(() => cp.close());

  it('stores runs, events and artifacts and reports the counts', async () => {
    const res = await cp.request('POST', '/v1/ingest', { body: batch() });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json, { runs: 1, events: 2, duplicates: 0, artifacts: 1, control: [] });
    const run = await cp.request('GET', '/v1/runs/laptop/r1');
    assert.equal(run.json.brief, 'fix login');
    assert.equal(run.json.cost_usd, null);
    assert.equal(run.json.repo_path, undefined);
    assert.equal(cp.deps.stores.runs.get('laptop', 'r1')?.repo_path, null);
    const art = await cp.request('GET', '/v1/runs/laptop/r1/artifact/checks/unit.log');
    assert.equal(art.text, 'all good');
  });

  it('takes an artifact of several MiB (its base64 check once overflowed the stack: a 500)', async () => {
    const content = Buffer.alloc(6 * 1024 * 1024, 7);
    const big = [{ run: 'r1', path: 'big.bin', content_base64: content.toString('base64') }];
    const res = await cp.request('POST', '/v1/ingest', { body: batch({ events: [], artifacts: big }) });
    assert.equal(res.status, 200, res.text);
    assert.equal(cp.deps.stores.artifacts.get('laptop', 'r1', 'big.bin')?.content.length, content.length);
  });

  it('keeps a run\'s metered and reported cost apart, with only their own keys', async () => {
    const metered = { cost_usd: 0.4, tokens_in: 3000, tokens_out: 4000, calls: 4, unpriced: 0, unknown: 0, extra: 'x' };
    const res = await cp.request('POST', '/v1/ingest', { body: batch({ events: [], artifacts: [], runs: [{
      run: 'r-cost', status: 'succeeded', started_at: T0, cost_usd: 0.4, metered, reported: { cost_usd: 0 } }] }) });
    assert.equal(res.status, 200, res.text);
    const run = await cp.request('GET', '/v1/runs/laptop/r-cost');
    assert.equal(run.json.cost_usd, 0.4);
    assert.deepEqual(run.json.metered, { cost_usd: 0.4, tokens_in: 3000, tokens_out: 4000, calls: 4, unpriced: 0, unknown: 0 });
    assert.deepEqual(run.json.reported, { cost_usd: 0, tokens_in: null, tokens_out: null });
    const listed = await cp.request('GET', '/v1/runs?limit=200');
    const item = listed.json.items.find((r: { run: string }) => r.run === 'r-cost');
    assert.deepEqual(item.metered, run.json.metered);
  });

  it('keeps a run\'s doubtful and tunnel counts, which a run stopped for doubt has', async () => {
    const metered = {
      cost_usd: 0.4, tokens_in: 3000, tokens_out: 4000, calls: 4, unpriced: 0, unknown: 1, doubtful: 1, tunnels: 2,
    };
    const res = await cp.request('POST', '/v1/ingest', { body: batch({ events: [], artifacts: [], runs: [{
      run: 'r-doubt', status: 'stopped', started_at: T0, cost_usd: 0.4, metered }] }) });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual((await cp.request('GET', '/v1/runs/laptop/r-doubt')).json.metered, metered);
  });

  it('is idempotent on (source, run, seq): a resent batch only counts duplicates', async () => {
    const res = await cp.request('POST', '/v1/ingest', { body: batch() });
    assert.equal(res.json.events, 0);
    assert.equal(res.json.duplicates, 2);
    assert.equal((await cp.request('GET', '/v1/runs/laptop/r1/events')).json.items.length, 2);
  });

  it('accepts events for a run stored by an earlier batch', async () => {
    const res = await cp.request('POST', '/v1/ingest', { body: { source: 'laptop', events: [{ run: 'r1', seq: 3, ts: T0, kind: 'log', data: {} }] } });
    assert.equal(res.json.events, 1);
  });

  it("hands a run's pending control requests over once, to a batch that carries that run", async () => {
    cp.deps.stores.controlRequests.add('laptop', 'r1', 'stop');
    cp.deps.stores.controlRequests.add('laptop', 'r1', 'answer', { answer: 'Postgres' });
    const other = await cp.request('POST', '/v1/ingest', { body: { source: 'laptop' } });
    assert.deepEqual(other.json.control, [], 'a batch without r1 (a trigger server reporting its repositories) takes none');
    const body = { source: 'laptop', runs: [{ run: 'r1', status: 'blocked', started_at: T0, updated_at: T0 }] };
    const first = await cp.request('POST', '/v1/ingest', { body });
    assert.deepEqual(first.json.control.map((c: Record<string, unknown>) => [c.run, c.action, c.answer]), [['r1', 'stop', undefined], ['r1', 'answer', 'Postgres']]);
    const second = await cp.request('POST', '/v1/ingest', { body });
    assert.deepEqual(second.json.control, []);
  });

  it('stores notifications from the trigger server', async () => {
    const res = await cp.request('POST', '/v1/ingest', {
      body: { source: 'laptop', notifications: [{ job_id: 'j1', run: 'r1', origin: 'chata', channel: 'chata', target: 'hooks.example', status: 'sent', attempts: 1 }] },
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.notifications, 1);
  });

  it('stores a notification\'s error with each URL cut to scheme and host, a header\'s credential cut', async () => {
    // A redirect's target quoted encoded once or twice carries its user info and path encoded too.
    const error = 'POST https://hooks.chata.example/services/T0/B0/secret-path failed: 500; sent Authorization: ' +
      'Basic bm90aWZ5LXNlY3JldC0zMw== to https://bot:pass@word-33@jira.example:8443; moved to ' +
      'https%253A%252F%252Fbot%253Asecret-34%2540hooks.example%252Fsecret-35 and https:%2F%2Fu:secret-36@h2.example';
    const res = await cp.request('POST', '/v1/ingest', { body: { source: 'laptop', notifications: [
      { job_id: 'j9', run: 'r1', origin: 'chata', channel: 'chata', target: 'hooks.example', status: 'failed', error },
    ] } });
    assert.equal(res.status, 200, res.text);
    const { json } = await cp.request('GET', '/v1/notifications');
    assert.equal(json.items.find((n: { job_id: string }) => n.job_id === 'j9').error,
      'POST https://hooks.chata.example/… failed: 500; sent Authorization: Basic *** to https://jira.example:8443; ' +
      'moved to https%253A%252F%252Fhooks.example/… and https:%2F%2Fh2.example');
  });

  // An older svc's command provider wrote fractional token counts: its runners ship them and import reads them.
  it('stores a token or call count that is no whole number as unknown (null), and takes the batch', async () => {
    const res = await cp.request('POST', '/v1/ingest', { body: batch({ runs: [
      { run: 'frac', status: 'failed', started_at: T0, reported: { cost_usd: 0.4, tokens_in: 1.5, tokens_out: 1 },
        metered: { cost_usd: 0.2, tokens_in: 3, tokens_out: 2.5, calls: 1, unpriced: 0, unknown: 0, doubtful: 0.5 } },
    ] }) });
    assert.equal(res.status, 200, res.text);
    const run = (await cp.request('GET', '/v1/runs/laptop/frac')).json;
    assert.deepEqual(run.reported, { cost_usd: 0.4, tokens_in: null, tokens_out: 1 });
    assert.deepEqual(run.metered, { cost_usd: 0.2, tokens_in: 3, tokens_out: null, calls: 1, unpriced: 0, unknown: 0 });
  });

  it("stores a run's token count that is no whole number as unknown (null), and takes the batch", async () => {
    const runs = [{ run: 'frac-top', status: 'failed', started_at: T0, tokens_in: 1.5, tokens_out: 2 }];
    assert.equal((await cp.request('POST', '/v1/ingest', { body: batch({ runs }) })).status, 200);
    const top = (await cp.request('GET', '/v1/runs/laptop/frac-top')).json;
    assert.deepEqual([top.tokens_in, top.tokens_out], [null, 2]);
  });

  const invalid: Array<[string, Record<string, unknown>]> = [
    ['an event for an unknown run', batch({ events: [{ run: 'ghost', seq: 1, ts: T0, kind: 'log', data: {} }] })],
    ['an unknown status', batch({ runs: [{ run: 'r9', status: 'dancing', started_at: T0 }] })],
    ['a negative seq', batch({ events: [{ run: 'r1', seq: -1, ts: T0, kind: 'log' }] })],
    ['a kind with a newline', batch({ events: [{ run: 'r1', seq: 9, ts: T0, kind: 'log\nevent: x' }] })],
    ['bad base64', batch({ artifacts: [{ run: 'r1', path: 'a.txt', content_base64: '!!!' }] })],
    ['base64 not in groups of four', batch({ artifacts: [{ run: 'r1', path: 'a.txt', content_base64: 'abcde' }] })],
    ['base64 with padding inside', batch({ artifacts: [{ run: 'r1', path: 'a.txt', content_base64: 'ab==abcd' }] })],
    ['a traversal artifact path', batch({ artifacts: [{ run: 'r1', path: '../../etc/passwd', content_base64: '' }] })],
    ['a bad source', batch({ source: '../x' })],
    ['an unknown top-level field', batch({ extra: 1 })],
    ['a negative cost', batch({ runs: [{ run: 'r9', status: 'failed', started_at: T0, cost_usd: -1 }] })],
    ['a metered cost that is text', batch({ runs: [{ run: 'r9', status: 'failed', started_at: T0,
      metered: { cost_usd: '0.40', tokens_in: 1, tokens_out: 1, calls: 1, unpriced: 0, unknown: 0 } }] })],
    ['a doubtful count that is text', batch({ runs: [{ run: 'r9', status: 'failed', started_at: T0,
      metered: { cost_usd: 0.4, tokens_in: 1, tokens_out: 1, calls: 1, unpriced: 0, unknown: 0, doubtful: '1' } }] })],
    ['a reported cost that is not an object', batch({ runs: [{ run: 'r9', status: 'failed', started_at: T0, reported: 1 }] })],
    ['a bad time', batch({ runs: [{ run: 'r9', status: 'failed', started_at: 'yesterday' }] })],
    ['a bad notification', batch({ notifications: [{ status: 'maybe' }] })],
  ];
  for (const [what, body] of invalid) {
    it(`rejects ${what} with 400 invalid_param and writes nothing`, async () => {
      const before = cp.deps.stores.events.maxId();
      const res = await cp.request('POST', '/v1/ingest', { body: { ...body, runs: [...((body.runs as unknown[]) ?? []), { run: 'fresh', status: 'queued', started_at: T0 }] } });
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json.error.code, 'invalid_param');
      assert.equal(cp.deps.stores.events.maxId(), before);
      assert.equal(cp.deps.stores.runs.get('laptop', 'fresh'), undefined);
    });
  }

  it('scores review risk from an uploaded diffstat: a sizeable not_verified diff of CI, auth and migrations is critical', async () => {
    const files = [
      { path: '.github/workflows/ci.yml', insertions: 150, deletions: 100 },
      { path: 'src/auth/login.ts', insertions: 10, deletions: 0 },
      { path: 'db/migrations/001.sql', insertions: 5, deletions: 0 },
      { insertions: 9999 },
    ];
    const run = { run: 'rrisk', status: 'failed', started_at: T0, ended_at: T0, updated_at: T0, verdict: 'not_verified' };
    const diffstat = { run: 'rrisk', path: 'diffstat.json', content_base64: Buffer.from(JSON.stringify({ files })).toString('base64') };
    assert.equal((await cp.request('POST', '/v1/ingest', { body: { source: 'laptop', runs: [run], artifacts: [diffstat] } })).status, 200);
    const risk = (await cp.request('GET', '/v1/review/risk?source=laptop&run=rrisk')).json;
    assert.deepEqual([risk.score, risk.level], [100, 'critical']);
    assert.deepEqual(risk.reasons.filter((r: string) => !r.includes('(')), ['no tests changed', 'verdict not_verified']);
    assert.ok(risk.reasons.includes('sizeable diff (265 lines)'), risk.reasons);
    assert.deepEqual(risk.files.map((f: { flags: string[] }) => f.flags), [['ci'], ['auth'], ['migration']]);
    const none = await cp.request('GET', '/v1/review/risk?source=laptop&run=r1');
    assert.equal(none.status, 404);
    assert.equal(none.json.error.message, 'Run laptop/r1 has no diff yet');
    for (const [query, name] of [['run=rrisk', 'source'], ['source=laptop', 'run']]) {
      const missing = await cp.request('GET', `/v1/review/risk?${query}`);
      assert.deepEqual([missing.status, missing.json.error.code], [400, 'invalid_param']);
      assert.equal(missing.json.error.message, `Parameter "${name}" is required`);
    }
  });

  it('refuses an artifact whose name carries a credential, stores none of the batch, never echoes it', async () => {
    const path = 'notes/Authorization: Bearer name-secret-31.txt';
    const res = await cp.request('POST', '/v1/ingest', { body: batch({
      runs: [{ run: 'rname', status: 'running', started_at: T0, updated_at: T0 }], events: [],
      artifacts: [
        { run: 'rname', path, content_type: 'text/plain', content_base64: Buffer.from('x').toString('base64') }],
    }) });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.json.error.code, 'invalid_param');
    assert.match(res.json.error.message, /artifacts\[0\]\.path must be relative with no .*credential/);
    assert.equal(res.text.includes('name-secret-31'), false, res.text);
    assert.equal(cp.deps.stores.runs.get('laptop', 'rname'), undefined);
  });

  it('names the unknown run in the error', async () => {
    const res = await cp.request('POST', '/v1/ingest', { body: { source: 'laptop', events: [{ run: 'ghost', seq: 1, ts: T0, kind: 'log' }] } });
    assert.match(res.json.error.message, /ghost/);
  });
});

describe('POST /v1/import', () => {
  let cp: TestControl;
  let project: string;
  before(async () => {
    cp = await startTestControl();
    project = mkdtempSync(join(tmpdir(), 'svc-'));
    const runDir = join(project, '.svc', 'runs', 'r01');
    mkdirSync(join(runDir, 'artifacts', 'checks'), { recursive: true });
    // A crafted state.json naming another folder and a pid: the import must keep neither.
    writeFileSync(join(runDir, 'state.json'), JSON.stringify({ source: 'local', run: 'r01', status: 'succeeded', verdict: 'verified', started_at: T0, ended_at: T0, updated_at: T0, repo: 'acme/api', repo_path: '/etc', pid: 1 }));
    writeFileSync(
      join(runDir, 'events.jsonl'),
      [{ seq: 1, ts: T0, kind: 'log', data: { text: 'a' } }, { seq: 2, ts: T0, kind: 'receipt', data: {} }].map((e) => JSON.stringify(e)).join('\n') + '\nnot json\n{"seq":3,"ts"',
    );
    writeFileSync(join(runDir, 'artifacts', 'receipt.json'), '{"ok":true}');
    writeFileSync(join(runDir, 'artifacts', 'checks', 'unit.log'), 'passed');
    symlinkSync('/etc/hostname', join(runDir, 'artifacts', 'escape.txt'));
    mkdirSync(join(project, '.svc', 'runs', 'broken'));
    writeFileSync(join(project, '.svc', 'runs', 'broken', 'state.json'), 'not json');
  });
  after(async () => {
    await cp.close();
    rmSync(project, { recursive: true, force: true });
  });

  it('reads state, events and artifacts of every run and reports what it skipped', async () => {
    const res = await cp.request('POST', '/v1/import', { body: { path: project } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.runs, 1);
    assert.equal(res.json.events, 2);
    assert.equal(res.json.artifacts, 2);
    const skipped = res.json.skipped.map((s: { entry: string }) => s.entry);
    assert.ok(skipped.includes('broken/state.json'));
    // A complete line that is not JSON is listed; the unfinished last line is still being written, so left alone.
    assert.ok(skipped.includes('r01/events.jsonl:3'));
    assert.ok(!skipped.includes('r01/events.jsonl:4'));
    assert.ok(skipped.includes('r01/artifacts/escape.txt'));
    assert.equal((await cp.request('GET', '/v1/runs/local/r01/artifact/checks/unit.log')).text, 'passed');
    assert.equal(cp.deps.stores.runs.get('local', 'r01')?.repo_path, project);
    assert.equal(cp.deps.stores.runs.get('local', 'r01')?.pid, null);
  });

  it('reads a long events.jsonl in the batches the shipper sends, numbering its lines across them', async () => {
    const long = mkdtempSync(join(tmpdir(), 'svc-'));
    try {
      const dir = join(long, '.svc', 'runs', 'rlong');
      mkdirSync(join(dir, 'artifacts'), { recursive: true });
      writeFileSync(join(dir, 'state.json'), JSON.stringify({ run: 'rlong', status: 'succeeded', started_at: T0, updated_at: T0 }));
      const lines = Array.from({ length: 1200 }, (_, i) => JSON.stringify({ seq: i + 1, ts: T0, kind: 'log', data: { i } }));
      lines[699] = 'not json';
      writeFileSync(join(dir, 'events.jsonl'), lines.join('\n') + '\n');
      writeFileSync(join(dir, 'artifacts', 'provider.log'), 'log');
      symlinkSync('/etc/hostname', join(dir, 'artifacts', 'escape.txt'));
      const res = await cp.request('POST', '/v1/import', { body: { path: long } });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual([res.json.runs, res.json.events, res.json.artifacts], [1, 1199, 1]);
      assert.deepEqual(res.json.skipped.map((s: { entry: string }) => s.entry).sort(), ['rlong/artifacts/escape.txt', 'rlong/events.jsonl:700']);
      assert.equal(cp.deps.stores.events.listAll({ source: 'local', run: 'rlong', after: 0, limit: 5000 }).length, 1199);
    } finally {
      rmSync(long, { recursive: true, force: true });
    }
  });

  it('counts a second import as duplicates', async () => {
    const res = await cp.request('POST', '/v1/import', { body: { path: project } });
    assert.equal(res.json.events, 0);
    assert.equal(res.json.duplicates, 2);
  });

  for (const [what, path] of [['a relative path', 'some/dir'], ['a missing directory', '/nonexistent/svc-x'], ['a folder without .svc/runs', tmpdir()]] as const) {
    it(`rejects ${what} with 400 invalid_param`, async () => {
      const res = await cp.request('POST', '/v1/import', { body: { path } });
      assert.equal(res.status, 400);
      assert.equal(res.json.error.code, 'invalid_param');
    });
  }
});

describe('security', () => {
  let cp: TestControl;
  let open: TestControl;
  before(async () => {
    cp = await startTestControl({ token: 'ingest-token' });
    open = await startTestControl({ host: '0.0.0.0' });
  });
  after(async () => {
    await cp.close();
    await open.close();
  });

  it('needs the bearer token to ingest', async () => {
    assert.equal((await cp.request('POST', '/v1/ingest', { body: { source: 'x' }, token: null })).status, 401);
    assert.equal((await cp.request('POST', '/v1/ingest', { body: { source: 'x' } })).status, 200);
  });

  it('needs a JSON content type', async () => {
    const res = await cp.request('POST', '/v1/ingest', { body: '{"source":"x"}', headers: { 'content-type': 'text/plain' } });
    assert.equal(res.status, 415);
  });

  it('answers 400 invalid_json to a malformed body and 413 above 16 MiB', async () => {
    assert.equal((await cp.request('POST', '/v1/ingest', { body: '{"source":' })).json.error.code, 'invalid_json');
    const big = JSON.stringify({ source: 'x', pad: 'a'.repeat(16 * 1024 * 1024) });
    assert.equal((await cp.request('POST', '/v1/ingest', { body: big })).status, 413);
  });

  it('takes no unregistered repo_path and no pid from a batch, even from a loopback peer, nor moves a run held for a folder', async () => {
    const body = { source: 'local', runs: [{ run: 'rlo', status: 'running', started_at: T0, updated_at: T0, repo_path: '/etc', pid: 1 }] };
    assert.equal((await cp.request('POST', '/v1/ingest', { body })).status, 200);
    assert.equal(cp.deps.stores.runs.get('local', 'rlo')?.repo_path, null);
    assert.equal(cp.deps.stores.runs.get('local', 'rlo')?.pid, null);
    cp.deps.stores.runs.upsert('local', { run: 'rown', status: 'running', started_at: Date.parse(T0), updated_at: Date.parse(T0), repo_path: '/work/own' });
    const later = { source: 'local', runs: [{ run: 'rown', status: 'failed', started_at: T0, updated_at: Date.parse(T0) + 1, repo_path: '/etc' }] };
    assert.equal((await cp.request('POST', '/v1/ingest', { body: later })).status, 200);
    assert.equal(cp.deps.stores.runs.get('local', 'rown')?.repo_path, '/work/own');
  });

  it('records a stop for a local run it did not start as a control request instead of signalling anything', async () => {
    const body = { source: 'local', runs: [{ run: 'rcli', status: 'running', started_at: T0, updated_at: T0, repo_path: '/etc', pid: 1 }] };
    await cp.request('POST', '/v1/ingest', { body });
    const stop = await cp.request('POST', '/v1/runs/local/rcli/stop', { body: {} });
    assert.equal(stop.status, 202);
    assert.deepEqual(cp.deps.stores.controlRequests.pending('local').map((p) => [p.run, p.action]), [['rcli', 'stop']]);
    const stopped = { source: 'local', runs: [{ run: 'rcli', status: 'stopped', started_at: T0, updated_at: Date.parse(T0) + 1, repo_path: '/etc' }] };
    const handed = await cp.request('POST', '/v1/ingest', { body: stopped });
    assert.deepEqual(handed.json.control.map((c: { run: string; action: string }) => [c.run, c.action]), [['rcli', 'stop']]);
    const verify = await cp.request('POST', '/v1/runs/local/rcli/verify', { body: {} });
    assert.equal(verify.status, 409);
    assert.equal(verify.json.error.code, 'invalid_transition');
  });

  // Tests send nothing off loopback: the rule is by source and registration, not by the peer's address.
  it('ignores repo_path and pid sent for another source, even from this machine', async () => {
    const port = new URL(open.url).port;
    const body = { source: 'lan', runs: [{ run: 'r1', status: 'running', started_at: T0, repo_path: '/etc', pid: 1 }] };
    const res = await fetch(`http://127.0.0.1:${port}/v1/ingest`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    assert.equal(res.status, 200);
    const row = open.deps.stores.runs.get('lan', 'r1');
    assert.equal(row?.repo_path, null);
    assert.equal(row?.pid, null);
  });

  it('refuses import on a server that is not bound to loopback', async () => {
    const res = await open.request('POST', '/v1/import', { body: { path: '/tmp' } });
    assert.equal(res.status, 403);
    assert.equal(res.json.error.code, 'loopback_only');
  });
});

describe('POST /v1/ingest and the WAL checkpoint', () => {
  it('commits on the event loop and leaves copying the WAL into the database file to the checkpoint thread', async () => {
    const cp = await startTestControl();
    try {
      const { db, settings } = cp.deps;
      // The main connection checkpoints itself only past the backstop, far above what this batch writes.
      const pragma = db.prepare('PRAGMA wal_autocheckpoint').get() as { wal_autocheckpoint: number };
      assert.equal(pragma.wal_autocheckpoint, BACKSTOP_PAGES);
      const before = statSync(settings.dbPath).size;
      const events = Array.from({ length: 200 }, (_, i) =>
        ({ run: 'w1', seq: i + 1, ts: T0, kind: 'log', data: { stream: 'stdout', text: 'x'.repeat(1000) } }));
      const runs = [{ run: 'w1', status: 'running', started_at: T0, updated_at: T0 }];
      const res = await cp.request('POST', '/v1/ingest', { body: { source: 'laptop', runs, events } });
      assert.equal(res.status, 200, res.text);
      // A 200 means committed: every event is in the WAL before any checkpoint copies it.
      assert.equal((db.prepare('SELECT count(*) AS n FROM events').get() as { n: number }).n, 200);
      await waitFor(() => statSync(settings.dbPath).size > before + 150_000, 'the checkpoint thread');
    } finally {
      await cp.close();
    }
  });
});
