// A project moved or copied elsewhere keeps its runs' state.json naming the old folder: stop, resume and verify there
// must act on the project they are run in, never on (or in) the folder the state names, and never crash.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, readJson, CLI, GIT_ENV, type TestRepo } from './fixtures.ts';
import { closedPort } from '../helpers/closed-port.ts';

describe('a run of a project that was moved or copied', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;
  let run: string;

  before(async () => {
    repo = makeRepo();
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: `http://127.0.0.1:${await closedPort()}` };
    const res = await svc(repo.repo, ['start', '--brief', 'append fixed', '--provider', 'fake']);
    assert.equal(res.status, 0, res.stderr);
    run = JSON.parse(res.stdout.trim().split('\n')[0]!).run;
  });
  after(() => repo.cleanup());

  function svc(cwd: string, args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
    const child = spawn(process.execPath, [CLI, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    return new Promise((resolve) => child.on('close', (status) => resolve({ status, stdout, stderr })));
  }

  it('refuses to verify a copy\'s run, leaving the original project\'s run alone', async () => {
    const copy = join(repo.root, 'copy');
    assert.equal(spawnSync('cp', ['-a', repo.repo, copy]).status, 0);
    const events = () => readFileSync(join(repo.repo, '.svc', 'runs', run, 'events.jsonl'), 'utf8');
    const before = events();
    const res = await svc(copy, ['start', '--verify', run]);
    assert.notEqual(res.status, 0);
    assert.match(res.stderr, new RegExp(`Run ${run} belongs to the project at ${repo.repo}, not this one`));
    assert.equal(events(), before, 'nothing was done in the original project');
  });

  it('refuses to verify or stop in a moved project with a clear error, never an unhandled error event', async () => {
    const moved = join(repo.root, 'moved');
    renameSync(repo.repo, moved);
    try {
      for (const flag of ['--verify', '--stop', '--resume']) {
        const res = await svc(moved, ['start', flag, run]);
        assert.notEqual(res.status, 0);
        assert.match(res.stderr, /the project was moved or copied/);
        assert.doesNotMatch(res.stderr, /Unhandled|ENOENT|\n\s+at /);
      }
      assert.equal(readJson(join(moved, '.svc', 'runs', run, 'state.json')).status, 'succeeded');
    } finally {
      renameSync(moved, repo.repo);
    }
  });
});
