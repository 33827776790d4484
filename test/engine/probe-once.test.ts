// The sandbox probe runs at most once per run, and once per boot while it works (src/spawn/sandbox-mode.ts):
// `svc start` probes the host (or takes this boot's cached result) before it makes the run and keeps the sandbox mode
// in the run's plan, so the worker and a verify run no second trial sandbox. Counted with a `bwrap` on PATH that logs
// every call and then runs the real one.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, readJson, CLI, EDIT_SCRIPT, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { probeSandbox } from '../../src/spawn/sandbox-mode.ts';

const probe = probeSandbox(process.env);
if (process.env.CI && !probe.ok) throw new Error('CI must run the sandbox tests: install the Debian package bubblewrap');

describe('the sandbox probe', { skip: probe.ok ? false : 'bwrap cannot run on this host (svc doctor says why)' }, () => {
  let repo: TestRepo;
  let log: string;
  let env: NodeJS.ProcessEnv;

  before(() => {
    repo = makeRepo({ providers: { fake: EDIT_SCRIPT } });
    const wrapperDir = join(repo.root, 'counting-bwrap');
    mkdirSync(wrapperDir);
    log = join(repo.root, 'bwrap-calls.log');
    writeFileSync(join(wrapperDir, 'bwrap'), `#!/bin/sh\necho "$*" >> "${log}"\nexec "${probe.bwrap}" "$@"\n`);
    chmodSync(join(wrapperDir, 'bwrap'), 0o755);
    env = { PATH: `${wrapperDir}:${process.env.PATH}`, HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0' };
  });
  after(() => repo.cleanup());

  /** The bwrap calls since the last look: trial sandboxes (they read CapEff) and the provider's sandboxes. */
  function calls(): { trials: number; others: number } {
    const lines = existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];
    writeFileSync(log, '');
    const trials = lines.filter((l) => l.includes('CapEff')).length;
    return { trials, others: lines.filter((l) => l.includes('fake.sh')).length };
  }

  it('runs once for a run: the worker takes the sandbox mode from the run\'s plan', async () => {
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--provider', 'fake'], { cwd: repo.repo, env });
    assert.equal(res.code, 0, res.stderr);
    const { run } = JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string };
    assert.equal(readJson(join(repo.repo, '.svc', 'runs', run, 'state.json')).status, 'succeeded');
    assert.deepEqual(calls(), { trials: 1, others: 1 }, 'one trial sandbox, then the provider\u2019s sandbox');
  });

  it('runs no trial again this boot once one worked: later runs and a verify take the cached result', async () => {
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--provider', 'fake', '--worktree'], { cwd: repo.repo, env });
    const { run } = JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string };
    assert.deepEqual(calls(), { trials: 0, others: 1 }, 'the first test\'s trial is cached in ~/.svc');
    const verify = await runChild(process.execPath, [CLI, 'start', '--verify', run], { cwd: repo.repo, env });
    assert.equal(verify.code, 0, verify.stderr);
    assert.equal(calls().trials, 0);
  });

  it('probes again when the cache does not match this boot, user and bwrap, or is gone', async () => {
    const cache = join(repo.home, '.svc', 'sandbox-probe.json');
    const saved = JSON.parse(readFileSync(cache, 'utf8')) as { key: string };
    writeFileSync(cache, JSON.stringify({ ...saved, key: `${saved.key}-another-boot` }));
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--provider', 'fake'], { cwd: repo.repo, env });
    assert.equal(res.code, 0, res.stderr);
    assert.equal(calls().trials, 1);
    rmSync(cache);
    await runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--provider', 'fake'], { cwd: repo.repo, env });
    assert.equal(calls().trials, 1);
  });

  it('probes again when the cache is not a good result of this key, as a file of its own', async () => {
    const cache = join(repo.home, '.svc', 'sandbox-probe.json');
    const good = readFileSync(cache, 'utf8');
    const saved = JSON.parse(good) as { key: string; probe: Record<string, unknown> };
    const elsewhere = join(repo.root, 'good-probe.json');
    writeFileSync(elsewhere, good);
    const bad: Array<[string, () => void]> = [
      ['bad JSON', () => writeFileSync(cache, '{"key":')],
      ['null', () => writeFileSync(cache, 'null')],
      ['[]', () => writeFileSync(cache, '[]')],
      ['probe: null', () => writeFileSync(cache, JSON.stringify({ key: saved.key, probe: null }))],
      ['ok: "true"', () => writeFileSync(cache, JSON.stringify({ key: saved.key, probe: { ...saved.probe, ok: 'true' } }))],
      // A good result behind a link is not taken: ~/.svc/sandbox-probe.json is read only as a file of its own.
      ['a link to a good cache', () => symlinkSync(elsewhere, cache)],
      ['a folder', () => mkdirSync(cache)],
    ];
    const start = () => runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--provider', 'fake'],
      { cwd: repo.repo, env });
    for (const [what, make] of bad) {
      rmSync(cache, { recursive: true, force: true });
      make();
      calls();
      const res = await start();
      assert.equal(res.code, 0, `${what}: ${res.stderr}`);
      assert.equal(calls().trials, 1, `${what}: probed again`);
    }
    rmSync(cache, { recursive: true, force: true });
    writeFileSync(cache, good);
    calls();
    assert.equal((await start()).code, 0);
    assert.equal(calls().trials, 0, 'a good cache: no trial');
  });
});
