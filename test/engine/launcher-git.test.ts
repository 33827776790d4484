// `svc start`'s launcher reads the checkout with as few git processes as it can: each one is a fork and an exec on
// every run's way to its agent (docs/bench-history.md, "`svc start`'s way to the agent: where a bwrap start goes,
// and one git less").
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, makeRepo, processesEnded, readJson, svcEnv } from './fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';

describe("svc start's launcher", () => {
  it('reads the checkout\'s root, then its HEAD, branch and git directories by one git more', async () => {
    const repo = makeRepo();
    try {
      // A git on PATH that notes who started it and what for, then runs the real one.
      // Committed, as the bench's project commits it: a clean checkout, whose start snapshots no working tree.
      execFileSync('git', ['add', '.svc'], { cwd: repo.repo });
      execFileSync('git', ['commit', '-qm', 'svc'], { cwd: repo.repo, env: svcEnv(repo) });
      const real = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
      const log = join(repo.root, 'git.log');
      writeFileSync(join(repo.bin, 'git'), `#!/bin/sh\necho "$PPID $*" >> '${log}'\nexec '${real}' "$@"\n`);
      chmodSync(join(repo.bin, 'git'), 0o755);
      const env = svcEnv(repo, { SVC_SANDBOX: 'none', PATH: `${repo.bin}:${process.env.PATH}` });
      const res = spawnSync(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--provider', 'fake',
        '--detach'], { cwd: repo.repo, env, encoding: 'utf8' });
      assert.equal(res.status, 0, res.stderr);
      const { run } = JSON.parse(res.stdout) as { run: string };
      const state = join(repo.repo, '.svc', 'runs', run, 'state.json');
      await waitFor(() => ['succeeded', 'failed'].includes(readJson(state).status), 'the run to end');
      const launcher = readFileSync(log, 'utf8').split('\n').filter((line) => line.startsWith(`${res.pid} `));
      const subcommands = launcher.map((line) => line.split(' ').find((word, i, all) =>
        i > 0 && !word.startsWith('-') && all[i - 1] !== '-c'));
      assert.deepEqual(subcommands, ['rev-parse', 'rev-parse', 'ls-files', 'config', 'status', 'remote', 'ls-files']);
    } finally {
      await processesEnded(repo.root);
      repo.cleanup();
    }
  });
});
