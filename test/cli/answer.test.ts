import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync, existsSync, readFileSync, readdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { runChild, type ChildResult } from '../helpers/run-child.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');


/** A port nothing listens on: bound, then closed. */
async function deadUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

describe('svc answer', () => {
  let dir: string;
  let project: string;
  let answers: string;
  let control: TestControl;
  let nowhere: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-'));
    project = join(dir, 'project');
    answers = join(dir, 'answers');
    mkdirSync(join(dir, 'home'), { recursive: true });
    for (const [run, status] of [['rblocked', 'blocked'], ['rdone', 'succeeded']] as const) {
      mkdirSync(join(project, '.svc', 'runs', run), { recursive: true });
      writeFileSync(join(project, '.svc', 'runs', run, 'state.json'), JSON.stringify({ source: 'local', run, status }));
    }
    control = await startTestControl();
    control.deps.stores.runs.upsert('edge', { run: 'rremote', status: 'blocked', started_at: Date.now(), question: 'Which DB?' });
    control.deps.stores.runs.upsert('edge', { run: 'rended', status: 'failed', started_at: Date.now() });
    nowhere = await deadUrl();
  });
  after(async () => {
    await control.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function svc(args: string[], env: Record<string, string> = {}): Promise<ChildResult> {
    return runChild(process.execPath, [CLI, 'answer', ...args], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', HOME: join(dir, 'home'), SVC_CONTROL_ANSWER_DIR: answers, SVC_CONTROL_URL: nowhere, ...env },
    });
  }

  it('writes the answer file for a blocked run in the project, as the operator\'s or as an origin\'s', async () => {
    const r = await svc(['local/rblocked', 'use', 'postgres', '--repo', project]);
    assert.equal(r.code, 0, r.stderr);
    const written = JSON.parse(readFileSync(join(answers, 'local', 'rblocked.json'), 'utf8'));
    assert.deepEqual([written.answer, written.by], ['use postgres', 'cli']);
    const relayed = await svc(['--origin', 'chata:U1', 'local/rblocked', 'use', 'sqlite', '--repo', project]);
    assert.equal(relayed.code, 0, relayed.stderr);
    assert.equal(JSON.parse(readFileSync(join(answers, 'local', 'rblocked.json'), 'utf8')).by, 'origin:chata:U1');
    assert.equal((await svc(['--origin', 'a\nb', 'local/rblocked', 'x', '--repo', project])).code, 2);
  });

  it('exits 1 for a project run that is not blocked and writes nothing', async () => {
    const r = await svc(['local/rdone', 'hi', '--repo', project]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /Run local\/rdone is succeeded, not blocked/);
    assert.equal(existsSync(join(answers, 'local', 'rdone.json')), false);
  });

  it('exits 1 for a run neither the project nor an unreachable Control Plane knows, and writes nothing', async () => {
    const r = await svc(['local/rnope', 'hi']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /No run local\/rnope: it is not in this project's \.svc\/runs\/ \(use --repo DIR\), and /);
    assert.match(r.stderr, /\(use --repo DIR\), and no Control Plane answered at http/);
    assert.equal(existsSync(join(answers, 'local', 'rnope.json')), false);
  });

  it('exits 1 for a run the Control Plane does not know either', async () => {
    const r = await svc(['local/rnope', 'hi', '--repo', project], { SVC_CONTROL_URL: control.url });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /No run local\/rnope: .*does not know it/);
  });

  it('answers a run only the Control Plane knows through it, and refuses one that is not blocked', async () => {
    const r = await svc(['edge/rremote', 'postgres'], { SVC_CONTROL_URL: control.url });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /Answered edge\/rremote through the Control Plane/);
    assert.deepEqual(control.deps.stores.controlRequests.pending('edge').map((p) => [p.run, p.payload?.answer, p.payload?.by]),
      [['rremote', 'postgres', 'control:local']]);
    // Relayed from an origin (a pod's run, under the Kubernetes executor): the Control Plane records it as theirs.
    const relayed = await svc(['--origin=webhook:ada', 'edge/rremote', 'mysql'], { SVC_CONTROL_URL: control.url });
    assert.equal(relayed.code, 0, relayed.stderr);
    assert.deepEqual(control.deps.stores.controlRequests.pending('edge').at(-1)?.payload,
      { answer: 'mysql', by: 'origin:webhook:ada' });
    const ended = await svc(['edge/rended', 'x'], { SVC_CONTROL_URL: control.url });
    assert.equal(ended.code, 1);
    assert.match(ended.stderr, /Run edge\/rended is failed, not blocked/);
  });

  it('takes a bare run id for a project run, as svc runs does', async () => {
    const r = await svc(['rblocked', 'use', 'sqlite', '--repo', project]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(readFileSync(join(answers, 'local', 'rblocked.json'), 'utf8')).answer, 'use sqlite');
    const ended = await svc(['rdone', 'hi', '--repo', project]);
    assert.equal(ended.code, 1);
    assert.match(ended.stderr, /Run local\/rdone is succeeded, not blocked/);
  });

  it('sends a bare run id to the Control Plane as $SVC_SOURCE/<run>, as svc runs does', async () => {
    const r = await svc(['rremote', 'mysql'], { SVC_CONTROL_URL: control.url, SVC_SOURCE: 'edge' });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /Answered edge\/rremote through the Control Plane/);
    const local = await svc(['rremote', 'mysql'], { SVC_CONTROL_URL: control.url });
    assert.equal(local.code, 1);
    assert.match(local.stderr, /No run local\/rremote: .*does not know it/);
  });

  it('never takes a run folder the repository committed, nor a source it names, for a run svc made here', async () => {
    // A cloned repository's .svc/runs/<run>/state.json is whoever pushed it's: its "source" would be where svc writes.
    const repo = join(dir, 'cloned');
    const escape = join(dir, 'escape');
    mkdirSync(escape, { recursive: true });
    const runs: Array<[string, string]> = [['rplanted', relative(answers, escape)], ['rtracked', 'local']];
    for (const [run, source] of runs) {
      mkdirSync(join(repo, '.svc', 'runs', run), { recursive: true });
      writeFileSync(join(repo, '.svc', 'runs', run, 'state.json'), JSON.stringify({ source, run, status: 'blocked' }));
    }
    const git = (...args: string[]) => execFileSync('git', ['-C', repo, ...args], { stdio: 'ignore' });
    git('init', '-q');
    git('add', '.svc/runs/rtracked');
    git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'runs');
    for (const [run] of runs) {
      const r = await svc([run, 'yes', '--repo', repo]);
      assert.equal(r.code, 1, r.stdout);
      assert.match(r.stderr, new RegExp(`No run local/${run}: it is not in this project's`));
    }
    assert.deepEqual(readdirSync(escape), []);
    assert.equal(existsSync(join(answers, 'local', 'rtracked.json')), false);
  });

  it('keeps usage mistakes at exit 2', async () => {
    assert.equal((await svc(['a/b/c', 'x'])).code, 2);
    assert.equal((await svc(['bad!', 'x'])).code, 2);
    assert.equal((await svc(['local/rblocked'])).code, 2);
    assert.equal((await svc(['rblocked', '--repo', project])).code, 2);
  });
});
