// A project (or an agent that wrote into one) plants symbolic links in .svc/runs: the Control Plane's import, its
// reads of run files, and the engine's shipper must never follow one, must say what they skipped, and must still take
// everything else.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { createShipper } from '../../src/engine/shipper.ts';

const KEY = '-----BEGIN PRIVATE KEY-----\nFAKE-KEY-FOR-LINK-TESTS\n-----END PRIVATE KEY-----\n';
const T0 = new Date(Date.now() - 60_000).toISOString();

function state(run: string): string {
  return JSON.stringify({ source: 'local', run, repo: 'acme/api', status: 'failed', started_at: T0, updated_at: T0 });
}

function event(seq: number, text: string): string {
  return JSON.stringify({ seq, ts: T0, kind: 'log', data: { stream: 'stdout', text } }) + '\n';
}

/** A secret folder outside the project (the stand-in for ~/.svc/keys) and a run folder full of links into it. */
function plantProject(root: string): { project: string; keys: string } {
  const keys = join(root, 'keys');
  mkdirSync(keys);
  writeFileSync(join(keys, 'receipt-ed25519.pem'), KEY);
  const diffstat = (path: string): string => JSON.stringify({ files: [{ path, insertions: 1, deletions: 0 }] });
  writeFileSync(join(keys, 'diffstat.json'), diffstat('secret'));
  writeFileSync(join(keys, 'events.jsonl'), event(1, KEY));
  writeFileSync(join(keys, 'state.json'), state('rstate'));
  const elsewhere = join(root, 'elsewhere-run');
  mkdirSync(join(elsewhere, 'artifacts'), { recursive: true });
  writeFileSync(join(elsewhere, 'state.json'), state('rfolder'));
  writeFileSync(join(elsewhere, 'artifacts', 'key.pem'), KEY);

  const project = join(root, 'project');
  const runs = join(project, '.svc', 'runs');
  const run = (name: string): string => {
    mkdirSync(join(runs, name), { recursive: true });
    writeFileSync(join(runs, name, 'state.json'), state(name));
    writeFileSync(join(runs, name, 'events.jsonl'), event(1, 'own line'));
    return join(runs, name);
  };
  // artifacts/ itself is a link to the key folder.
  symlinkSync(keys, join(run('rart'), 'artifacts'));
  // events.jsonl is a link to a file of valid event lines.
  const rev = run('revents');
  rmSync(join(rev, 'events.jsonl'));
  symlinkSync(join(keys, 'events.jsonl'), join(rev, 'events.jsonl'));
  // One artifact file is a link; its sibling is a real file.
  const rfile = run('rfile');
  mkdirSync(join(rfile, 'artifacts'));
  writeFileSync(join(rfile, 'artifacts', 'provider.log'), 'real log');
  symlinkSync(join(keys, 'receipt-ed25519.pem'), join(rfile, 'artifacts', 'key.pem'));
  // An intermediate folder under artifacts/ is a link.
  const rmid = run('rmid');
  mkdirSync(join(rmid, 'artifacts', 'checks'), { recursive: true });
  writeFileSync(join(rmid, 'artifacts', 'checks', 'unit.log'), 'passed');
  symlinkSync(keys, join(rmid, 'artifacts', 'reports'));
  // The run folder itself is a link, and so is a state.json.
  symlinkSync(elsewhere, join(runs, 'rfolder'));
  const rstate = run('rstate');
  rmSync(join(rstate, 'state.json'));
  symlinkSync(join(keys, 'state.json'), join(rstate, 'state.json'));
  // And one run with nothing odd about it.
  mkdirSync(join(run('rok'), 'artifacts'));
  writeFileSync(join(runs, 'rok', 'artifacts', 'diffstat.json'), diffstat('a.ts'));
  return { project, keys };
}

function storedKeyAnywhere(cp: TestControl): string[] {
  const hits: string[] = [];
  for (const row of cp.deps.stores.runs.list({ limit: 500 })) {
    for (const meta of cp.deps.stores.artifacts.list(row.source, row.run)) {
      const content = cp.deps.stores.artifacts.get(row.source, row.run, meta.path)!.content;
      if (Buffer.from(content).toString('utf8').includes('FAKE-KEY')) hits.push(`${row.run}/${meta.path}`);
    }
    for (const ev of cp.deps.stores.events.listAll({ source: row.source, run: row.run, after: 0, limit: 500 })) {
      if (ev.data.includes('FAKE-KEY')) hits.push(`${row.run}/events`);
    }
  }
  return hits;
}

describe('POST /v1/import with symbolic links in the project', () => {
  let cp: TestControl;
  let root: string;
  let project: string;
  let skipped: Array<{ entry: string; reason: string }>;
  before(async () => {
    cp = await startTestControl();
    root = mkdtempSync(join(tmpdir(), 'svc-links-'));
    ({ project } = plantProject(root));
    const res = await cp.request('POST', '/v1/import', { body: { path: project } });
    assert.equal(res.status, 200, res.text);
    skipped = res.json.skipped;
  });
  after(async () => {
    await cp.close();
    rmSync(root, { recursive: true, force: true });
  });

  function reasonFor(entry: string): string | undefined {
    return skipped.find((s) => s.entry === entry)?.reason;
  }

  it('skips a linked artifacts/ folder, reports it and still imports the run', async () => {
    assert.match(reasonFor('rart/artifacts') ?? '', /symbolic link/);
    assert.equal(cp.deps.stores.runs.get('local', 'rart')?.status, 'failed');
    assert.deepEqual(cp.deps.stores.artifacts.list('local', 'rart'), []);
    const res = await cp.request('GET', '/v1/runs/local/rart/artifact/receipt-ed25519.pem');
    assert.equal(res.status, 404);
  });

  it('skips a linked events.jsonl and imports none of its lines', () => {
    assert.match(reasonFor('revents/events.jsonl') ?? '', /symbolic link/);
    assert.ok(cp.deps.stores.runs.get('local', 'revents'));
    assert.equal(cp.deps.stores.events.listAll({ source: 'local', run: 'revents', after: 0, limit: 10 }).length, 0);
  });

  it('skips a linked artifact file and keeps its real sibling', async () => {
    assert.match(reasonFor('rfile/artifacts/key.pem') ?? '', /symbolic link/);
    assert.deepEqual(cp.deps.stores.artifacts.list('local', 'rfile').map((a) => a.path), ['provider.log']);
    assert.equal((await cp.request('GET', '/v1/runs/local/rfile/artifact/provider.log')).text, 'real log');
  });

  it('skips a linked folder under artifacts/ and keeps the real one', () => {
    assert.match(reasonFor('rmid/artifacts/reports') ?? '', /symbolic link/);
    assert.deepEqual(cp.deps.stores.artifacts.list('local', 'rmid').map((a) => a.path), ['checks/unit.log']);
  });

  it('skips a linked run folder and a linked state.json: neither run exists', () => {
    assert.match(reasonFor('rfolder') ?? '', /symbolic link/);
    assert.match(reasonFor('rstate/state.json') ?? '', /symbolic link/);
    assert.equal(cp.deps.stores.runs.get('local', 'rfolder'), undefined);
    assert.equal(cp.deps.stores.runs.get('local', 'rstate'), undefined);
  });

  it('imports the plain run whole, and the fake key is nowhere in the store', () => {
    assert.deepEqual(cp.deps.stores.artifacts.list('local', 'rok').map((a) => a.path), ['diffstat.json']);
    assert.equal(cp.deps.stores.events.listAll({ source: 'local', run: 'rok', after: 0, limit: 10 }).length, 1);
    assert.deepEqual(storedKeyAnywhere(cp), []);
  });

  it('refuses a project whose .svc or .svc/runs is a link, naming it', async () => {
    for (const linked of ['.svc', 'runs']) {
      const other = join(root, `linked-${linked.replace('.', '')}`);
      mkdirSync(other);
      if (linked === '.svc') symlinkSync(join(project, '.svc'), join(other, '.svc'));
      else {
        mkdirSync(join(other, '.svc'));
        symlinkSync(join(project, '.svc', 'runs'), join(other, '.svc', 'runs'));
      }
      const res = await cp.request('POST', '/v1/import', { body: { path: other } });
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json.error.code, 'invalid_param');
      assert.match(res.json.error.message, /symbolic link/);
    }
  });

  it('refuses a project path that is itself a link', async () => {
    const link = join(root, 'project-link');
    symlinkSync(project, link);
    const res = await cp.request('POST', '/v1/import', { body: { path: link } });
    assert.equal(res.status, 400);
    assert.equal(res.json.error.code, 'invalid_param');
  });
});

describe('run files read from a run folder on this machine', () => {
  let cp: TestControl;
  let root: string;
  before(async () => {
    cp = await startTestControl();
    root = mkdtempSync(join(tmpdir(), 'svc-links-'));
    const { project } = plantProject(root);
    for (const run of ['rart', 'rok']) {
      cp.deps.stores.runs.upsert('local', { run, status: 'succeeded', started_at: Date.now(), repo_path: project });
    }
  });
  after(async () => {
    await cp.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('never reads diffstat.json through a linked artifacts/ folder', async () => {
    const linked = await cp.request('GET', '/v1/review/risk?source=local&run=rart');
    assert.equal(linked.status, 404, linked.text);
    const plain = await cp.request('GET', '/v1/review/risk?source=local&run=rok');
    assert.equal(plain.status, 200, plain.text);
    assert.deepEqual(plain.json.files.map((f: { path: string }) => f.path), ['a.ts']);
  });
});

describe('shipper with symbolic links in the run folder', () => {
  let cp: TestControl;
  let root: string;
  let project: string;
  const reports: string[] = [];
  before(async () => {
    cp = await startTestControl();
    root = mkdtempSync(join(tmpdir(), 'svc-links-'));
    ({ project } = plantProject(root));
    for (const run of ['rart', 'revents', 'rfile', 'rmid', 'rfolder', 'rstate', 'rok']) {
      const env = { SVC_CONTROL_URL: cp.url, HOME: root };
      const report = (entry: string, reason: string): void => {
        reports.push(`${run}: ${entry} ${reason}`);
      };
      const shipper = createShipper(join(project, '.svc', 'runs', run), env, undefined, report);
      assert.equal(await shipper.flush(), null);
      // A second flush reports nothing new: each entry is said once.
      assert.equal(await shipper.flush(), null);
    }
  });
  after(async () => {
    await cp.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('reports every link once and ships nothing through any of them', () => {
    const link = (entry: string): boolean => reports.some((r) => r.startsWith(entry) && r.includes('symbolic link'));
    const linked = ['rart: artifacts', 'revents: events.jsonl', 'rfile: artifacts/key.pem', 'rmid: artifacts/reports'];
    for (const entry of linked) {
      assert.ok(link(entry), `${entry} in ${reports.join(' | ')}`);
    }
    assert.ok(reports.some((r) => r.startsWith('rfolder:') && r.includes('rfolder') && r.includes('symbolic link')));
    assert.ok(link('rstate: state.json'));
    assert.equal(new Set(reports).size, reports.length);
    assert.deepEqual(storedKeyAnywhere(cp), []);
  });

  it('still ships the rest: the runs, their own events and real artifacts', () => {
    assert.equal(cp.deps.stores.runs.get('local', 'rfolder'), undefined);
    assert.equal(cp.deps.stores.runs.get('local', 'rstate'), undefined);
    for (const run of ['rart', 'revents', 'rfile', 'rmid', 'rok']) {
      assert.ok(cp.deps.stores.runs.get('local', run), run);
    }
    assert.equal(cp.deps.stores.events.listAll({ source: 'local', run: 'revents', after: 0, limit: 10 }).length, 0);
    assert.equal(cp.deps.stores.events.listAll({ source: 'local', run: 'rfile', after: 0, limit: 10 }).length, 1);
    assert.deepEqual(cp.deps.stores.artifacts.list('local', 'rfile').map((a) => a.path), ['provider.log']);
    assert.deepEqual(cp.deps.stores.artifacts.list('local', 'rmid').map((a) => a.path), ['checks/unit.log']);
    assert.deepEqual(cp.deps.stores.artifacts.list('local', 'rok').map((a) => a.path), ['diffstat.json']);
  });

  it('does not ship a state.json that names another run', async () => {
    const dir = join(project, '.svc', 'runs', 'rimpostor');
    mkdirSync(dir);
    writeFileSync(join(dir, 'state.json'), state('rok').replace('"failed"', '"succeeded"'));
    const seen: string[] = [];
    const report = (entry: string, reason: string): void => {
      seen.push(`${entry} ${reason}`);
    };
    await createShipper(dir, { SVC_CONTROL_URL: cp.url, HOME: root }, undefined, report).flush();
    assert.match(seen.join(' | '), /state\.json names run "rok"/);
    assert.equal(cp.deps.stores.runs.get('local', 'rok')?.status, 'failed');
  });
});
