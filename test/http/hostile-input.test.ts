// Regression tests for hostile inputs once found to break the Control Plane: each used to answer 500 or hang.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'node:http';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { nestsDeeperThan } from '../../src/json-value.ts';

const T0 = '2026-02-01T10:00:00.000Z';

function deep(n: number): string {
  return `${'['.repeat(n)}${']'.repeat(n)}`;
}

function counts(control: TestControl): { runs: number; events: number } {
  const row = control.deps.db.prepare("SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM events) AS events").get() as { runs: number; events: number };
  return { runs: row.runs, events: row.events };
}

describe('hostile input to the Control Plane', () => {
  let control: TestControl;
  before(async () => {
    control = await startTestControl();
  });
  after(() => control.close());

  it('answers an ingest event whose data nests 10,000 deep with 400 invalid_json and stores nothing', async () => {
    const body = `{"source":"laptop","runs":[{"run":"r1","status":"running","started_at":"${T0}"}],"events":[{"run":"r1","seq":1,"kind":"log","data":${deep(10_000)}}]}`;
    const res = await control.request('POST', '/v1/ingest', { body });
    assert.equal(res.status, 400);
    assert.equal(res.json.error.code, 'invalid_json');
    assert.deepEqual(counts(control), { runs: 0, events: 0 });
  });

  it('imports a project whose events.jsonl holds a 10,000-deep line: that line is skipped, the rest stored', async () => {
    const project = join(control.dir, 'project');
    const run = join(project, '.svc', 'runs', 'rimp1');
    mkdirSync(run, { recursive: true });
    writeFileSync(join(run, 'state.json'), JSON.stringify({ run: 'rimp1', status: 'succeeded', started_at: T0 }));
    writeFileSync(join(run, 'events.jsonl'), `{"seq":1,"kind":"log","data":{"text":"a"}}\n{"seq":2,"kind":"log","data":${deep(10_000)}}\n`);
    const res = await control.request('POST', '/v1/import', { body: { path: project } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.events, 1);
    assert.equal(res.json.skipped.length, 1);
    assert.match(res.json.skipped[0].entry, /events\.jsonl:2$/);
  });

  async function ingestArtifact(run: string, path: string, content: string): Promise<void> {
    const res = await control.request('POST', '/v1/ingest', {
      body: {
        source: 'laptop',
        runs: [{ run, status: 'succeeded', started_at: T0, pr_url: 'https://github.com/acme/api/pull/7', verdict: 'verified' }],
        artifacts: [{ run, path, content_type: 'application/json', content_base64: Buffer.from(content).toString('base64') }],
      },
    });
    assert.equal(res.status, 200, res.text);
  }

  it('scores review risk from a hostile diffstat.json artifact without a 500', async () => {
    const files = `[null, 1, {"path":{"toString":1},"insertions":{"valueOf":null}}, {"path":"src/auth.ts","insertions":"9","deletions":-3}, {"path":"a.ts","insertions":5,"deletions":2}]`;
    await ingestArtifact('rrisk', 'diffstat.json', `{"files":${files}}`);
    const res = await control.request('GET', '/v1/review/risk?source=laptop&run=rrisk');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json.files.map((f: { path: string; insertions: number; deletions: number }) => [f.path, f.insertions, f.deletions]), [['src/auth.ts', 0, 0], ['a.ts', 5, 2]]);
  });

  it('refuses a receipt.json artifact nested 10,000 deep from the merge queue with 409, not a 500', async () => {
    await ingestArtifact('rdeep', 'receipt.json', `{"type":"svc.receipt","kid":"k","integrity":"x","signature":"y","extra":${deep(10_000)}}`);
    const res = await control.request('POST', '/v1/merge/queue', { body: { source: 'laptop', run: 'rdeep' } });
    assert.equal(res.status, 409, res.text);
    assert.match(res.json.error.message, /nests deeper/);
  });

  it('answers an HTTP/1.1 request without Host with the 400 envelope, not a bare 400', async () => {
    const res = await rawRequest(control.url, '/v1/runs', { headers: { host: '' } });
    assert.equal(res.status, 403, 'an empty Host is a wrong Host');
    const socketAnswer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const url = new URL(control.url);
      const req = request({ host: url.hostname, port: url.port, path: '/health', setHost: false, headers: { connection: 'close' } });
      req.on('response', (r) => {
        let body = '';
        r.on('data', (c: Buffer) => (body += c));
        r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(socketAnswer.status, 400);
    assert.equal(JSON.parse(socketAnswer.body).error.code, 'bad_request');
  });

  it('answers HEAD on an event stream with its headers and ends it', async () => {
    const res = await rawRequest(control.url, '/v1/stream', { method: 'HEAD' });
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^text\/event-stream/);
    assert.equal(res.text, '');
  });
});

describe('nestsDeeperThan', () => {
  it('measures depth without recursion, even 100,000 deep', () => {
    const value = JSON.parse(deep(100_000)) as unknown;
    assert.equal(nestsDeeperThan(value, 64), true);
    assert.equal(nestsDeeperThan(JSON.parse(deep(64)), 64), false);
    assert.equal(nestsDeeperThan(JSON.parse(deep(65)), 64), true);
    assert.equal(nestsDeeperThan({ a: [1, { b: {} }] }, 4), false);
    assert.equal(nestsDeeperThan({ a: [1, { b: {} }] }, 3), true);
    assert.equal(nestsDeeperThan('text', 0), false);
  });
});
