// A resume of an ended run starts only once the worker of its last attempt has exited: that worker's status ends
// before it does, and its last write (no child, no pid) puts back its own copy of state.json (launch.ts
// afterLastWorker).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, readJson, CLI, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';

// Fails its first invocation; the resumed one edits a file and succeeds.
const FAILS_ONCE = `#!/bin/sh
cat > /dev/null
if [ -f tried ]; then echo fixed > a.txt; exit 0; fi
touch tried
exit 1
`;

// Stands in for a worker between its run's end and its last write: once its stdin closes it keeps state.json as it
// is then, watches it for 3 s, puts its copy back without a pid as worker.ts does, and says whether another process
// wrote the file meanwhile.
const FINISHING_WORKER = `
const { readFileSync, writeFileSync } = require('node:fs');
const [path] = process.argv.slice(1);
process.stdin.resume();
process.stdin.on('end', () => {
  const kept = readFileSync(path, 'utf8');
  const until = Date.now() + 3000;
  const timer = setInterval(() => {
    const now = readFileSync(path, 'utf8');
    if (now === kept && Date.now() < until) return;
    clearInterval(timer);
    writeFileSync(path, JSON.stringify({ ...JSON.parse(kept), pid: null, proc_start: null }));
    process.stdout.write(now === kept ? 'untouched' : 'written meanwhile');
  }, 20);
});
`;

describe('svc start --resume of a run whose worker is still finishing', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;
  before(() => {
    repo = makeRepo({ providers: { 'fails-once': FAILS_ONCE } });
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
      SVC_SANDBOX: 'none' };
  });
  after(() => repo.cleanup());

  const svc = (args: string[]) => runChild(process.execPath, [CLI, ...args], { cwd: repo.repo, env });

  it('waits for that worker to exit before it queues the run again, then resumes it', async () => {
    const started = await svc(['start', '--brief', 'fix', '--worktree', '--detach', '--provider', 'fails-once']);
    assert.equal(started.code, 0, started.stderr);
    const run: string = JSON.parse(started.stdout).run;
    const path = join(repo.repo, '.svc', 'runs', run, 'state.json');
    const failed = await waitFor(() => {
      const s = readJson(path);
      return s.status === 'failed' && s.pid === null ? s : null;
    }, 'the run to fail and its worker to go');
    // The run as its worker left it at its end, that worker still there.
    const worker = spawn(process.execPath, ['-e', FINISHING_WORKER, path], { stdio: ['pipe', 'pipe', 'inherit'] });
    let said = '';
    worker.stdout.setEncoding('utf8').on('data', (text: string) => (said += text));
    writeFileSync(path, JSON.stringify({ ...failed, pid: worker.pid, proc_start: null }));
    worker.stdin.end();
    const resumed = await svc(['start', '--resume', run, '--detach']);
    assert.equal(resumed.code, 0, resumed.stderr);
    if (worker.exitCode === null) await once(worker, 'exit');
    assert.equal(said, 'untouched', 'nothing wrote state.json while the run\'s worker was still there');
    const ended = await waitFor(() => {
      const s = readJson(path);
      return s.status === 'succeeded' || s.status === 'failed' ? s : null;
    }, 'the resumed run to end');
    assert.equal(ended.status, 'succeeded', ended.error);
  });
});
