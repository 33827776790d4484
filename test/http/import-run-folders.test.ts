// POST /v1/import of the run folders svc itself writes (empty files of every artifact kind, odd but valid layouts), and
// all-or-nothing: an import that fails part-way registers no project and stores no run.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';

const T0 = '2026-02-01T10:00:00.000Z';

/** Every file a finished run folder holds, as the engine writes them (src/engine/paths.ts, evidence.ts, receipt.ts). */
const RUN_FILES = ['spec.md', 'question.txt', 'answer.txt', 'worker.log', 'plan.json', 'provider.log', 'ship.json'];
const ARTIFACT_FILES = [
  'receipt.json', 'evidence.json', 'egress.jsonl', 'diff.patch', 'diffstat.json', 'prompt.md', 'checks/unit.log',
  'checks/lint.log',
];

function writeRun(project: string, run: string, files: Record<string, string>): void {
  const dir = join(project, '.svc', 'runs', run);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'state.json'), JSON.stringify({ source: 'local', run, status: 'succeeded', started_at: T0, ended_at: T0, updated_at: T0, repo: 'acme/api' }));
  for (const [rel, content] of Object.entries(files)) {
    mkdirSync(join(dir, rel, '..'), { recursive: true });
    writeFileSync(join(dir, rel), content);
  }
}

describe('POST /v1/import of the run folders svc writes', () => {
  let cp: TestControl;
  let project: string;
  before(async () => {
    cp = await startTestControl();
    project = mkdtempSync(join(tmpdir(), 'svc-import-'));
    // A run that made no connection and asked nothing: every file there, every one empty (egress.jsonl above all).
    const empty: Record<string, string> = { 'events.jsonl': '' };
    for (const f of RUN_FILES) empty[f] = '';
    for (const f of ARTIFACT_FILES) empty[`artifacts/${f}`] = '';
    writeRun(project, 'rempty', empty);
    // Odd but valid: no events.jsonl, an empty artifacts folder, an empty subfolder.
    writeRun(project, 'rbare', {});
    mkdirSync(join(project, '.svc', 'runs', 'rbare', 'artifacts', 'checks'), { recursive: true });
    // Names with spaces, dots and non-ASCII, a deep empty file, a one-byte file and a blank-lines-only events file.
    writeRun(project, 'rodd', {
      'events.jsonl': '\n\n   \n',
      'artifacts/checks/unit test.log': '',
      'artifacts/.hidden': '',
      'artifacts/résumé.txt': 'é',
      'artifacts/a/b/c/d/e/empty.bin': '',
      'artifacts/one.txt': 'x',
    });
  });
  after(async () => {
    await cp.close();
    rmSync(project, { recursive: true, force: true });
  });

  it('imports every run with its empty artifacts stored as empty files', async () => {
    const res = await cp.request('POST', '/v1/import', { body: { path: project } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.runs, 3);
    assert.equal(res.json.artifacts, ARTIFACT_FILES.length + 5);
    assert.deepEqual(res.json.skipped, []);
    const egress = await cp.request('GET', '/v1/runs/local/rempty/artifact/egress.jsonl');
    assert.equal(egress.status, 200);
    assert.equal(egress.text, '');
    assert.equal(egress.headers.get('etag'), '"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"');
    const listed = cp.deps.stores.artifacts.list('local', 'rempty');
    assert.deepEqual(listed.map((a) => a.path).sort(), [...ARTIFACT_FILES].sort());
    assert.ok(listed.every((a) => a.size === 0));
    assert.equal(cp.deps.stores.artifacts.get('local', 'rodd', 'a/b/c/d/e/empty.bin')?.size, 0);
    assert.equal(cp.deps.stores.artifacts.get('local', 'rodd', 'résumé.txt')?.size, 2);
    assert.ok(cp.deps.stores.runs.get('local', 'rbare'));
  });

  it('imports the same folders again as duplicates, changing nothing', async () => {
    const res = await cp.request('POST', '/v1/import', { body: { path: project } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.runs, 3);
    assert.equal(cp.deps.stores.artifacts.list('local', 'rempty').length, ARTIFACT_FILES.length);
  });

  it('skips an artifact whose file name holds a backslash and imports the rest of its run', async () => {
    writeRun(project, 'rslash', { 'artifacts/a\\b.txt': 'odd', 'artifacts/fine.txt': 'ok' });
    const res = await cp.request('POST', '/v1/import', { body: { path: project } });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json.skipped, [{ entry: 'rslash/artifacts/a\\b.txt', reason: 'name contains a backslash' }]);
    assert.deepEqual(cp.deps.stores.artifacts.list('local', 'rslash').map((a) => a.path), ['fine.txt']);
  });

  it('skips an artifact whose file name carries a credential, naming it with the credential cut', async () => {
    const other = mkdtempSync(join(tmpdir(), 'svc-import-'));
    try {
      writeRun(other, 'rcred',
        { 'artifacts/Authorization: Bearer name-secret-32.txt': 'odd', 'artifacts/fine.txt': 'ok' });
      const res = await cp.request('POST', '/v1/import', { body: { path: other } });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.json.skipped,
        [{ entry: 'rcred/artifacts/Authorization: Bearer ***', reason: 'name ingest refuses' }]);
      assert.deepEqual(cp.deps.stores.artifacts.list('local', 'rcred').map((a) => a.path), ['fine.txt']);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('names a run folder that has no state.json, as one whose state.json is empty', async () => {
    mkdirSync(join(project, '.svc', 'runs', 'rnostate', 'artifacts'), { recursive: true });
    const res = await cp.request('POST', '/v1/import', { body: { path: project } });
    assert.equal(res.status, 200, res.text);
    assert.ok(res.json.skipped.some((s: { entry: string; reason: string }) =>
      s.entry === 'rnostate/state.json' && s.reason === 'is missing'), JSON.stringify(res.json.skipped));
    rmSync(join(project, '.svc', 'runs', 'rnostate'), { recursive: true });
  });

  it('names a run folder whose state.json is cut short or damaged, and imports the whole one beside it', async () => {
    writeRun(project, 'rhalf', {});
    const state = join(project, '.svc', 'runs', 'rhalf', 'state.json');
    writeFileSync(state, readFileSync(state, 'utf8').slice(0, 40));
    writeRun(project, 'rbytes', {});
    writeFileSync(join(project, '.svc', 'runs', 'rbytes', 'state.json'), Buffer.from([0x7b, 0xff, 0xfe, 0x7d]));
    writeRun(project, 'rwhole', {});
    const res = await cp.request('POST', '/v1/import', { body: { path: project } });
    assert.equal(res.status, 200, res.text);
    for (const run of ['rhalf', 'rbytes']) {
      assert.ok(res.json.skipped.some((s: { entry: string; reason: string }) => s.entry === `${run}/state.json` &&
        s.reason === 'is not JSON (cut short or damaged, as by a copy still being made)'),
      JSON.stringify(res.json.skipped));
      assert.equal((await cp.request('GET', `/v1/runs/local/${run}`)).status, 404);
      rmSync(join(project, '.svc', 'runs', run), { recursive: true });
    }
    assert.equal((await cp.request('GET', '/v1/runs/local/rwhole')).status, 200);
  });

  it("imports an older svc's run whose command provider reported fractional tokens, the counts unknown", async () => {
    writeRun(project, 'rfrac', {});
    const reported = { cost_usd: 0.5, tokens_in: 1234.5, tokens_out: 10 };
    writeFileSync(join(project, '.svc', 'runs', 'rfrac', 'state.json'), JSON.stringify({ source: 'local', run: 'rfrac',
      status: 'succeeded', started_at: T0, ended_at: T0, updated_at: T0, reported, ...reported }));
    const res = await cp.request('POST', '/v1/import', { body: { path: project } });
    assert.equal(res.status, 200, res.text);
    const run = (await cp.request('GET', '/v1/runs/local/rfrac')).json;
    assert.deepEqual([run.cost_usd, run.tokens_in, run.tokens_out], [0.5, null, 10]);
    assert.deepEqual(run.reported, { cost_usd: 0.5, tokens_in: null, tokens_out: 10 });
  });
});

describe('POST /v1/import is all or nothing', () => {
  let cp: TestControl;
  let project: string;
  before(async () => {
    cp = await startTestControl();
    project = mkdtempSync(join(tmpdir(), 'svc-import-'));
    writeRun(project, 'r1first', { 'events.jsonl': `{"seq":1,"ts":"${T0}","kind":"log","data":{"text":"a"}}\n`, 'artifacts/ok.txt': 'fine' });
    writeRun(project, 'r2second', { 'artifacts/boom.txt': 'this one fails to store' });
  });
  after(async () => {
    await cp.close();
    rmSync(project, { recursive: true, force: true });
  });

  it('registers no project and stores no run when a later run fails to store', async () => {
    // A real SQLite failure part-way through: the second run's artifact cannot be written.
    cp.deps.db.exec(`CREATE TEMP TRIGGER refuse_boom BEFORE INSERT ON artifacts WHEN NEW.path = 'boom.txt'
      BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`);
    try {
      const res = await cp.request('POST', '/v1/import', { body: { path: project } });
      assert.equal(res.status, 500);
      assert.equal(res.json.error.code, 'internal_error');
    } finally {
      cp.deps.db.exec('DROP TRIGGER refuse_boom');
    }
    assert.deepEqual((await cp.request('GET', '/v1/projects')).json.items, []);
    assert.equal(cp.deps.stores.runs.get('local', 'r1first'), undefined);
    assert.equal(cp.deps.stores.artifacts.list('local', 'r1first').length, 0);
    assert.equal((await cp.request('GET', '/v1/runs/local/r1first/events')).status, 404);
  });

  it('imports everything once the failure is gone', async () => {
    const res = await cp.request('POST', '/v1/import', { body: { path: project } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.runs, 2);
    assert.equal(res.json.events, 1);
    const projects = (await cp.request('GET', '/v1/projects')).json.items.map((p: { path: string }) => p.path);
    assert.deepEqual(projects, [realpathSync(project)]);
  });
  it('imports a line of 15 MiB (no HTTP body), leaves out one over 16 MiB by its line number, goes on', async () => {
    const own = mkdtempSync(join(tmpdir(), 'svc-import-long-'));
    try {
      const line = (seq: number, text: string) => `${JSON.stringify({ seq, kind: 'log', ts: T0, data: { text } })}\n`;
      writeRun(own, 'rlong', {
        'events.jsonl': line(1, 'before') + line(2, 'y'.repeat(15 * 1024 * 1024))
          + line(3, 'x'.repeat(17 * 1024 * 1024)) + line(4, 'after'),
      });
      const res = await cp.request('POST', '/v1/import', { body: { path: own } });
      assert.equal(res.status, 200, res.text);
      const stored = cp.deps.stores.events.listAll({ source: 'local', run: 'rlong', after: 0, limit: 10 });
      assert.deepEqual(stored.map((e) => e.seq), [1, 2, 4]);
      const bytes = line(3, 'x'.repeat(17 * 1024 * 1024)).length - 1;
      assert.deepEqual(res.json.skipped, [{
        entry: 'rlong/events.jsonl:3', reason: `left out: a line of ${bytes} bytes, more than an import takes (16 MiB)`,
      }]);
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  });
});
