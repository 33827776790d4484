// POST /v1/import reads a project's own .svc/runs, which is the project's text: it imports only this server's own
// source, never over a run this server holds for another folder, and never brings back another source's deleted run.
// POST /v1/ingest (`svc ship` of that same text) never names another registered project for a run held for one.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { createShipper } from '../../src/engine/shipper.ts';
import { runKeyDigest } from '../../src/control/ingest-apply.ts';

const MAIN = 'main-token-0123456789abcdefghijkl';
const K8S = 'k8s-runner-token-0123456789abcdef';
const T0 = '2026-02-01T10:00:00.000Z';
const T1 = '2026-02-01T11:00:00.000Z';

function forgedProject(runs: Record<string, Record<string, unknown>>): string {
  const project = mkdtempSync(join(tmpdir(), 'svc-hostile-'));
  execFileSync('git', ['init', '-q', project]);
  for (const [run, state] of Object.entries(runs)) {
    mkdirSync(join(project, '.svc', 'runs', run), { recursive: true });
    const forged = { run, status: 'succeeded', started_at: T0, updated_at: T1, brief: 'forged', verdict: 'verified' };
    writeFileSync(join(project, '.svc', 'runs', run, 'state.json'), JSON.stringify({ ...forged, ...state }));
  }
  return project;
}

describe('POST /v1/import of runs the project does not own', () => {
  let cp: TestControl;
  const folders: string[] = [];
  before(async () => {
    cp = await startTestControl({ token: MAIN, settings: { runnerTokens: [{ source: 'k8s', token: K8S }] } });
  });
  after(async () => {
    await cp.close();
    for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  });

  it('skips a run whose state.json names another source, leaving that source\'s run as its runner shipped it', async () => {
    const real = { run: 'r1', status: 'failed', started_at: T0, updated_at: T0, brief: 'real', verdict: 'not_verified' };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: K8S, body: { source: 'k8s', runs: [real] } })).status, 200);
    const project = forgedProject({ r1: { source: 'k8s' }, r2: { source: 'ci' } });
    folders.push(project);
    const res = await cp.request('POST', '/v1/import', { token: MAIN, body: { path: project } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.runs, 0);
    assert.deepEqual(res.json.skipped, [
      { entry: 'r1', reason: 'is a run of source "k8s": only this server\'s own source ("local") imports' },
      { entry: 'r2', reason: 'is a run of source "ci": only this server\'s own source ("local") imports' },
    ]);
    const row = cp.deps.stores.runs.get('k8s', 'r1')!;
    assert.equal(row.brief, 'real');
    assert.equal(row.verdict, 'not_verified');
    assert.equal(row.repo_path, null);
    assert.equal(cp.deps.stores.runs.get('ci', 'r2'), undefined);
  });

  it('refuses a run\'s worktree as the project, 400 invalid_param: its agent wrote the .svc/runs there', async () => {
    const project = forgedProject({});
    folders.push(project);
    const worktree = join(project, '.svc', 'worktrees', 'rwork');
    mkdirSync(worktree, { recursive: true });
    execFileSync('git', ['init', '-q', worktree]);
    mkdirSync(join(worktree, '.svc', 'runs', 'rplanted'), { recursive: true });
    writeFileSync(join(worktree, '.svc', 'runs', 'rplanted', 'state.json'),
      JSON.stringify({ run: 'rplanted', status: 'succeeded', started_at: T0, updated_at: T1, verdict: 'verified' }));
    for (const path of [worktree, join(worktree, 'sub')]) {
      mkdirSync(path, { recursive: true });
      const res = await cp.request('POST', '/v1/import', { token: MAIN, body: { path } });
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json.error.code, 'invalid_param');
    }
    assert.equal(cp.deps.stores.runs.get('local', 'rplanted'), undefined);
    assert.ok(!cp.deps.stores.projects.list().some((p) => p.path.includes('.svc')));
  });

  it('never brings back a run the operator deleted in another source', async () => {
    const run = { run: 'rdel', status: 'succeeded', started_at: T0, updated_at: T0 };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: K8S, body: { source: 'k8s', runs: [run] } })).status, 200);
    assert.equal((await cp.request('DELETE', '/v1/runs/k8s/rdel', { token: MAIN })).status, 200);
    const project = forgedProject({ rdel: { source: 'k8s' } });
    folders.push(project);
    const res = await cp.request('POST', '/v1/import', { token: MAIN, body: { path: project } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.runs, 0);
    assert.equal(cp.deps.stores.runs.get('k8s', 'rdel'), undefined);
    assert.equal(cp.deps.stores.deletedRuns.has('k8s', 'rdel'), true);
  });

  it('skips a run this server holds for another project folder and keeps it as it was', async () => {
    const first = forgedProject({ rmine: { source: 'local', brief: 'mine' } });
    const second = forgedProject({ rmine: { source: 'local', brief: 'theirs' } });
    folders.push(first, second);
    assert.equal((await cp.request('POST', '/v1/import', { token: MAIN, body: { path: first } })).json.runs, 1);
    const res = await cp.request('POST', '/v1/import', { token: MAIN, body: { path: second } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.runs, 0);
    assert.deepEqual(res.json.skipped, [
      { entry: 'rmine', reason: `is already a run of another project (${JSON.stringify(first)})` },
    ]);
    const row = cp.deps.stores.runs.get('local', 'rmine')!;
    assert.equal(row.brief, 'mine');
    assert.equal(row.repo_path, first);
  });

  it('imports its own source\'s run again from the same folder named through a linked parent', async () => {
    const project = forgedProject({ ragain: {} });
    const link = join(mkdtempSync(join(tmpdir(), 'svc-link-')), 'parent');
    symlinkSync(dirname(project), link);
    folders.push(project, dirname(link));
    assert.equal((await cp.request('POST', '/v1/import', { token: MAIN, body: { path: project } })).json.runs, 1);
    const res = await cp.request('POST', '/v1/import', { token: MAIN, body: { path: join(link, basename(project)) } });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json.skipped, []);
    assert.equal(cp.deps.stores.runs.get('local', 'ragain')!.brief, 'forged');
  });
});

describe('POST /v1/ingest of a run held for another project', () => {
  let cp: TestControl;
  let first: string;
  let second: string;
  const folders: string[] = [];
  const held = { brief: 'mine', verdict: 'verified', pr_url: 'https://github.com/acme/a/pull/7' };
  before(async () => {
    cp = await startTestControl({ token: MAIN });
    first = realpathSync(forgedProject({ rheld: { source: 'local', ...held } }));
    second = realpathSync(forgedProject({}));
    folders.push(first, second);
    for (const path of [first, second]) {
      assert.equal((await cp.request('POST', '/v1/import', { token: MAIN, body: { path } })).status, 200);
    }
  });
  after(async () => {
    await cp.close();
    for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  });

  function assertUnchanged(): void {
    const row = cp.deps.stores.runs.get('local', 'rheld')!;
    assert.deepEqual({ repo_path: row.repo_path, brief: row.brief, verdict: row.verdict, pr_url: row.pr_url },
      { repo_path: first, ...held });
    assert.equal(cp.deps.stores.events.listAll({ after: 0, limit: 10, source: 'local', run: 'rheld' }).length, 0);
  }

  it('refuses `svc ship` of another registered project\'s folder naming the run, 403 forbidden_run, row unchanged', async () => {
    const folder = join(second, '.svc', 'runs', 'rheld');
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, 'state.json'), JSON.stringify({
      run: 'rheld', source: 'local', status: 'failed', started_at: T0, updated_at: Date.now(), brief: 'theirs',
      verdict: null, pr_url: null, repo_path: second,
    }));
    writeFileSync(join(folder, 'events.jsonl'), `${JSON.stringify({ seq: 1, ts: T1, kind: 'log', data: {} })}\n`);
    const failure = await createShipper(folder, { SVC_CONTROL_URL: cp.url, SVC_CONTROL_TOKEN: MAIN, HOME: second }).flush();
    assert.match(failure?.why ?? '', /answered 403 forbidden_run \(Run local\/rheld is a run of another project/);
    assertUnchanged();
  });

  it('takes a batch naming a folder that is no registered project, or none, and keeps the run\'s folder', async () => {
    // A project moved (mv) and imported at its new place ships state.json files naming its old, now missing, folder.
    const base = realpathSync(mkdtempSync(join(tmpdir(), 'svc-moved-')));
    folders.push(base);
    const oldPlace = join(base, 'code-proj');
    const newPlace = join(base, 'src-proj');
    const folder = join(oldPlace, '.svc', 'runs', 'rmoved');
    mkdirSync(folder, { recursive: true });
    execFileSync('git', ['init', '-q', oldPlace]);
    const state = { run: 'rmoved', source: 'local', status: 'succeeded', started_at: T0, updated_at: T1, repo_path: oldPlace };
    writeFileSync(join(folder, 'state.json'), JSON.stringify(state));
    renameSync(oldPlace, newPlace);
    assert.equal((await cp.request('POST', '/v1/import', { token: MAIN, body: { path: newPlace } })).status, 200);
    const moved = join(newPlace, '.svc', 'runs', 'rmoved');
    writeFileSync(join(moved, 'events.jsonl'), `${JSON.stringify({ seq: 1, ts: T1, kind: 'log', data: {} })}\n`);
    assert.equal(await createShipper(moved, { SVC_CONTROL_URL: cp.url, SVC_CONTROL_TOKEN: MAIN, HOME: newPlace }).flush(), null);
    assert.equal(cp.deps.stores.events.listAll({ after: 0, limit: 10, source: 'local', run: 'rmoved' }).length, 1);
    const now = Date.now();
    const bodies = [
      { source: 'local', runs: [{ run: 'rmoved', status: 'failed', started_at: T0, updated_at: now, repo_path: '/etc' }] },
      { source: 'local', runs: [{ run: 'rmoved', status: 'failed', started_at: T0, updated_at: now }] },
      { source: 'local', runs: [], events: [{ run: 'rmoved', seq: 2, ts: now, kind: 'log', data: {} }] },
    ];
    for (const body of bodies) {
      assert.equal((await cp.request('POST', '/v1/ingest', { token: MAIN, body })).status, 200);
      assert.equal(cp.deps.stores.runs.get('local', 'rmoved')!.repo_path, newPlace);
    }
    // Another registered project named for it is still refused, even while the run's own folder is missing.
    renameSync(newPlace, oldPlace);
    const claimed = { source: 'local', runs: [{ run: 'rmoved', status: 'failed', started_at: T0, updated_at: now, repo_path: second }] };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: MAIN, body: claimed })).json.error?.code, 'forbidden_run');
  });

  it('takes the run from its own folder, named through a linked parent too', async () => {
    const link = join(mkdtempSync(join(tmpdir(), 'svc-link-')), 'parent');
    symlinkSync(dirname(first), link);
    folders.push(dirname(link));
    const run = { run: 'rheld', status: 'succeeded', started_at: T0, updated_at: Date.now(), repo_path: join(link, basename(first)), brief: 'mine, again' };
    const res = await cp.request('POST', '/v1/ingest', { token: MAIN, body: { source: 'local', runs: [run] } });
    assert.equal(res.status, 200, res.text);
    assert.equal(cp.deps.stores.runs.get('local', 'rheld')!.brief, 'mine, again');
  });
});

describe('POST /v1/import of a run folder that holds its run-key', () => {
  let cp: TestControl;
  let first: string;
  let second: string;
  const key = 'k'.repeat(43);
  const folders: string[] = [];
  before(async () => {
    cp = await startTestControl({ token: MAIN });
    first = realpathSync(forgedProject({ rkeyed: { source: 'local', brief: 'mine' }, rbadkey: { source: 'local' } }));
    second = realpathSync(forgedProject({}));
    folders.push(first, second);
    writeFileSync(join(first, '.svc', 'runs', 'rkeyed', 'run-key'), `${key}\n`);
    writeFileSync(join(first, '.svc', 'runs', 'rbadkey', 'run-key'), 'short\n');
  });
  after(async () => {
    await cp.close();
    for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  });

  it('binds the run to that key, so another project claiming the run\'s folder in its state.json is refused', async () => {
    for (const path of [first, second]) {
      const res = await cp.request('POST', '/v1/import', { token: MAIN, body: { path } });
      assert.equal(res.status, 200, res.text);
      if (path === first) {
        assert.deepEqual(res.json.skipped, [{ entry: 'rbadkey/run-key', reason: 'must match ^[A-Za-z0-9_-]{32,128}$' }]);
      }
    }
    assert.deepEqual(Buffer.from(cp.deps.stores.runs.getKeyed('local', 'rkeyed')!.run_key_sha256!), runKeyDigest(key));
    assert.equal(cp.deps.stores.runs.getKeyed('local', 'rbadkey')!.run_key_sha256, null);
    const folder = join(second, '.svc', 'runs', 'rkeyed');
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, 'state.json'), JSON.stringify({
      run: 'rkeyed', source: 'local', status: 'failed', started_at: T0, updated_at: Date.now(), brief: 'theirs',
      repo_path: first,
    }));
    const forged = await createShipper(folder, { SVC_CONTROL_URL: cp.url, SVC_CONTROL_TOKEN: MAIN, HOME: second }).flush();
    assert.match(forged?.why ?? '', /answered 403 forbidden_run \(Run local\/rkeyed is bound to the key/);
    assert.equal(cp.deps.stores.runs.get('local', 'rkeyed')!.brief, 'mine');
    const own = join(first, '.svc', 'runs', 'rkeyed');
    writeFileSync(join(own, 'events.jsonl'), `${JSON.stringify({ seq: 1, ts: T1, kind: 'log', data: {} })}\n`);
    assert.equal(await createShipper(own, { SVC_CONTROL_URL: cp.url, SVC_CONTROL_TOKEN: MAIN, HOME: first }).flush(), null);
  });

  it('binds a run stored without a key to its folder\'s before verifying it there', async () => {
    const now = Date.now();
    const run = { run: 'rlate', status: 'succeeded', started_at: now, updated_at: now, repo_path: first };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: MAIN, body: { source: 'local', runs: [run] } })).status, 200);
    mkdirSync(join(first, '.svc', 'runs', 'rlate'), { recursive: true });
    writeFileSync(join(first, '.svc', 'runs', 'rlate', 'run-key'), `${key}\n`);
    assert.equal(cp.deps.stores.runs.getKeyed('local', 'rlate')!.run_key_sha256, null);
    assert.equal((await cp.request('POST', '/v1/runs/local/rlate/verify', { token: MAIN, body: {} })).status, 202);
    assert.deepEqual(Buffer.from(cp.deps.stores.runs.getKeyed('local', 'rlate')!.run_key_sha256!), runKeyDigest(key));
  });
});

describe('POST /v1/import of a run folder that is not where the run\'s runner made it', () => {
  let cp: TestControl;
  const folders: string[] = [];
  const key = 'k'.repeat(43);
  const other = 'o'.repeat(43);
  const forgedState = (run: string) => ({ source: 'local', run, status: 'blocked', started_at: T0, updated_at: T1,
    brief: 'forged', question: 'Paste the production database password to continue' });
  const identity = ['-c', 'user.name=T', '-c', 'user.email=t@e', '-c', 'protocol.file.allow=always'];
  const gitIn = (repo: string, ...args: string[]) => execFileSync('git', ['-C', repo, ...identity, ...args]);
  /** A real git repository whose .svc/runs holds `runs` (run → its run-key or null); those in `commit` committed. */
  function repository(runs: Record<string, string | null>, commit: string[], runsAt = '.svc/runs'): string {
    const repo = realpathSync(mkdtempSync(join(tmpdir(), 'svc-committed-')));
    folders.push(repo);
    const git = (...args: string[]) => gitIn(repo, ...args);
    git('init', '-q');
    writeFileSync(join(repo, 'README.md'), 'A repository\n');
    for (const [run, runKey] of Object.entries(runs)) {
      const dir = join(repo, runsAt, run);
      mkdirSync(join(dir, 'artifacts'), { recursive: true });
      writeFileSync(join(dir, 'state.json'), JSON.stringify(forgedState(run)));
      writeFileSync(join(dir, 'artifacts', 'receipt.json'), '{"forged":true}');
      if (runKey !== null) writeFileSync(join(dir, 'run-key'), `${runKey}\n`);
    }
    git('add', '--', 'README.md', ...commit.map((run) => join(runsAt, run)));
    git('commit', '-qm', 'runs');
    return repo;
  }
  /** A run shipped from elsewhere (a trigger job, an unregistered checkout): held for no folder. */
  async function shipped(run: string, runKey: string | null): Promise<void> {
    const real = { run, status: 'succeeded', started_at: T0, updated_at: T0, brief: 'real', run_key: runKey };
    const receipt = Buffer.from('{"real":true}').toString('base64');
    const body = { source: 'local', runs: [real], artifacts: [{ run, path: 'receipt.json', content_base64: receipt }] };
    assert.equal((await cp.request('POST', '/v1/ingest', { token: MAIN, body })).status, 200);
  }
  async function assertUnchanged(run: string): Promise<void> {
    const row = cp.deps.stores.runs.get('local', run)!;
    assert.deepEqual({ status: row.status, brief: row.brief, question: row.question, repo_path: row.repo_path },
      { status: 'succeeded', brief: 'real', question: null, repo_path: null });
    assert.equal((await cp.request('GET', `/v1/runs/local/${run}/artifact/receipt.json`)).text, '{"real":true}');
  }
  before(async () => {
    cp = await startTestControl({ token: MAIN });
  });
  after(async () => {
    await cp.close();
    for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  });

  it('skips a run folder the repository committed, as the engine does, and imports its runs svc made', async () => {
    await shipped('rpublic', null);
    const repo = repository({ rpublic: null, rnew: null, rmade: null }, ['rpublic', 'rnew']);
    const res = await cp.request('POST', '/v1/import', { token: MAIN, body: { path: repo } });
    assert.equal(res.status, 200, res.text);
    const committed = 'is committed to the repository: its content, not a run svc made here';
    assert.deepEqual(res.json.skipped, [{ entry: 'rnew', reason: committed }, { entry: 'rpublic', reason: committed }]);
    assert.equal(res.json.runs, 1);
    await assertUnchanged('rpublic');
    assert.equal(cp.deps.stores.runs.get('local', 'rnew'), undefined);
    assert.equal(cp.deps.stores.runs.get('local', 'rmade')!.repo_path, repo);
  });

  it('skips every run folder, git\'s reason given, when git cannot list what the repository tracks', async (t) => {
    if (process.getuid?.() !== 0) return t.skip('needs root to give the repository to another user');
    const repo = repository({ rother: null }, ['rother']);
    // Another user's repository: git refuses it ("dubious ownership"), as svc reads no global safe.directory.
    execFileSync('chown', ['-R', '12345', repo]);
    const res = await cp.request('POST', '/v1/import', { token: MAIN, body: { path: repo } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.runs, 0);
    assert.equal(res.json.skipped.length, 1);
    assert.equal(res.json.skipped[0].entry, 'rother');
    assert.match(res.json.skipped[0].reason,
      /^git could not list what the repository tracks \(git ls-files failed: fatal: detected dubious ownership/);
    assert.equal(cp.deps.stores.runs.get('local', 'rother'), undefined);
  });

  for (const at of ['.svc', '.svc/runs']) {
    it(`skips every run folder behind a submodule committed at ${at}`, async () => {
      // The submodule's own repository commits the run folder; the outer one lists only the submodule's gitlink.
      const inner = repository({ rsub: null }, ['rsub'], relative(at, '.svc/runs') || '.');
      const outer = repository({}, []);
      gitIn(outer, 'submodule', 'add', '-q', inner, at);
      gitIn(outer, 'commit', '-qm', 'a submodule where svc keeps its runs');
      const res = await cp.request('POST', '/v1/import', { token: MAIN, body: { path: outer } });
      assert.equal(res.status, 200, res.text);
      const committed = 'is committed to the repository: its content, not a run svc made here';
      const entries = at === '.svc' ? ['rsub'] : ['README.md', 'rsub']; // the submodule's own README.md there
      assert.deepEqual(res.json.skipped, entries.map((entry) => ({ entry, reason: committed })));
      assert.equal(res.json.runs, 0);
      assert.equal(cp.deps.stores.runs.get('local', 'rsub'), undefined);
    });
  }

  it('skips a bound run from a folder without its key, imports it from one with it, binds an unbound one', async () => {
    await shipped('rbound', key);
    await shipped('rfree', null);
    for (const runKey of [other, null]) {
      const repo = repository({ rbound: runKey }, []);
      const res = await cp.request('POST', '/v1/import', { token: MAIN, body: { path: repo } });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.json.skipped, [{ entry: 'rbound', reason: 'is bound to another runner\'s key' }]);
      assert.equal(res.json.runs, 0);
      await assertUnchanged('rbound');
    }
    const own = repository({ rbound: key, rfree: key }, []);
    const res = await cp.request('POST', '/v1/import', { token: MAIN, body: { path: own } });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json.skipped, []);
    assert.equal(res.json.runs, 2);
    for (const run of ['rbound', 'rfree']) {
      const row = cp.deps.stores.runs.getKeyed('local', run)!;
      assert.deepEqual({ status: row.status, repo_path: row.repo_path }, { status: 'blocked', repo_path: own });
      assert.deepEqual(Buffer.from(row.run_key_sha256!), runKeyDigest(key));
    }
  });
});
