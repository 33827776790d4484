import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs, {
  closeSync, mkdtempSync, mkdirSync, openSync, readdirSync, rmSync, symlinkSync, writeFileSync, readFileSync,
  existsSync, statSync,
} from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stopLocalRun } from '../../src/engine/run-context.ts';
import { signalGroup } from '../../src/engine/proc-group.ts';
import { procStart } from '../../src/proc-stat.ts';
import { writeState, readState, type RunState } from '../../src/engine/run-state.ts';
import { openEventLog } from '../../src/engine/run-state.ts';
import { openRunContext } from '../../src/engine/run-context.ts';
import { writePlan, type RunPlan } from '../../src/engine/run-plan.ts';
import { UnsafePathError, writeNoFollow } from '../../src/engine/safe-fs.ts';
import { processAlive, stateFor } from './fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { idleNode } from '../helpers/run-child.ts';

const CLI_TS = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));

describe('stopping a run from outside its worker', () => {
  let repo: string;
  const children: ChildProcess[] = [];

  /** Its command line and environment readable in /proc once it is returned (idleNode). */
  async function sleeper(args: string[] = [], env: NodeJS.ProcessEnv = {}): Promise<ChildProcess> {
    const child = await idleNode(args, { detached: true, env: { PATH: process.env.PATH, ...env } });
    children.push(child);
    return child;
  }

  function runFolder(run: string, over: Partial<RunState>): string {
    const dir = join(repo, '.svc', 'runs', run);
    mkdirSync(join(dir, 'artifacts'), { recursive: true });
    writeState(dir, stateFor(repo, run, over));
    return dir;
  }

  before(() => {
    repo = mkdtempSync(join(tmpdir(), 'svc-'));
  });
  after(() => {
    for (const c of children) if (c.pid && processAlive(c.pid)) process.kill(-c.pid, 'SIGKILL');
    rmSync(repo, { recursive: true, force: true });
  });

  it('does not signal a recorded pid whose command line is not our worker for that run', async () => {
    const victim = await sleeper();
    const pid = victim.pid!;
    runFolder('rvictim', { pid, pgid: pid, proc_start: procStart(pid) });
    const state = await stopLocalRun(repo, 'rvictim', 'the test');
    assert.equal(state?.status, 'stopped');
    assert.equal(processAlive(pid), true, 'a process that is not our worker survives the stop');
  });

  it('does not signal a worker of another run, nor a provider child that lacks SVC_RUN_ID of the run', async () => {
    const other = await sleeper([CLI_TS, 'worker', 'start', '--run-id', 'rsomeoneelse']);
    const child = await sleeper();
    runFolder('rmismatch', {
      pid: other.pid!, pgid: other.pid!, proc_start: procStart(other.pid!),
      child: { pid: child.pid!, pgid: child.pid!, proc_start: procStart(child.pid!) },
    });
    await stopLocalRun(repo, 'rmismatch', 'the test');
    assert.equal(processAlive(other.pid!), true);
    assert.equal(processAlive(child.pid!), true);
  });

  it('does not signal a worker of the same run id in another project', async () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'svc-other-'));
    try {
      const other = await sleeper([CLI_TS, 'worker', 'start', '--run-id', 'rtwin', '--repo', elsewhere]);
      runFolder('rtwin', { pid: other.pid!, pgid: other.pid!, proc_start: procStart(other.pid!) });
      await stopLocalRun(repo, 'rtwin', 'the test');
      assert.equal(processAlive(other.pid!), true, 'the other project\'s worker of its own run rtwin survives');
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it('stops the worker and the provider child that really belong to the run', async () => {
    const worker = await sleeper([CLI_TS, 'worker', 'start', '--run-id', 'rmine', '--repo', repo]);
    const child = await sleeper([], { SVC_RUN_ID: 'rmine' });
    runFolder('rmine', {
      pid: worker.pid!, pgid: worker.pid!, proc_start: procStart(worker.pid!),
      child: { pid: child.pid!, pgid: child.pid!, proc_start: procStart(child.pid!) },
    });
    await stopLocalRun(repo, 'rmine', 'the test');
    await waitFor(() => !processAlive(worker.pid!) && !processAlive(child.pid!), 'worker and child to exit');
  });

  it('stops a run whose worker has not recorded itself yet: the worker sees "stopping" and ends it, the stopper named', async () => {
    const dir = runFolder('rqueued', { status: 'queued' });
    // The worker stops before it reads anything of its plan but that there is one.
    writeFileSync(join(dir, 'plan.json'), JSON.stringify({ policy: {}, provider: {}, passed_env: [], sandbox: { kind: 'none' }, push_target: null, notes: [] }));
    const stopping = stopLocalRun(repo, 'rqueued', 'the test');
    assert.equal(readState(dir).status, 'stopping');
    const worker = spawn(process.execPath, [CLI_TS, 'worker', 'start', '--run-id', 'rqueued', '--repo', repo],
      { stdio: 'ignore', env: { PATH: process.env.PATH, HOME: repo, SVC_SHIP: '0' } });
    const code = await new Promise((resolve) => worker.on('close', resolve));
    assert.equal(code, 1);
    const state = (await stopping)!;
    assert.equal(state.status, 'stopped');
    assert.deepEqual(state.failure, { class: 'stopped', reason: 'stopped by the test', retryable: false });
    assert.equal(state.pid, null, 'the worker never recorded itself');
  });

  it('refuses to signal a group whose recorded start time is null', async () => {
    const own = await sleeper();
    assert.equal(signalGroup({ pid: own.pid!, pgid: own.pid!, proc_start: null }, 'SIGTERM'), false);
    assert.equal(signalGroup({ pid: own.pid!, pgid: 1, proc_start: procStart(own.pid!) }, 'SIGTERM'), false);
    assert.equal(processAlive(own.pid!), true);
  });
});

describe('run folder writes', () => {
  let root: string;
  let outside: string;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'svc-'));
    outside = join(root, 'outside.txt');
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  function folder(run: string): string {
    const dir = join(root, 'repo', '.svc', 'runs', run);
    mkdirSync(join(dir, 'artifacts'), { recursive: true });
    writeState(dir, stateFor(join(root, 'repo'), run));
    return dir;
  }

  it('refuses to append events through a symbolic link named events.jsonl', () => {
    writeFileSync(outside, 'keep\n');
    const dir = folder('rlink');
    symlinkSync(outside, join(dir, 'events.jsonl'));
    assert.throws(() => openEventLog(dir).append('log', { text: 'x' }), /symbolic link/);
    assert.equal(readFileSync(outside, 'utf8'), 'keep\n');
  });

  it('refuses to write state or events into a run folder that is a symbolic link', () => {
    const real = join(root, 'elsewhere');
    mkdirSync(real);
    const dir = join(root, 'repo', '.svc', 'runs', 'rdirlink');
    symlinkSync(real, dir);
    assert.throws(() => writeState(dir, stateFor(join(root, 'repo'), 'rdirlink')), /not a plain directory/);
    assert.throws(() => openEventLog(dir).append('log', {}), /not a plain directory/);
    assert.equal(existsSync(join(real, 'state.json')), false);
    assert.equal(existsSync(join(real, 'events.jsonl')), false);
  });

  it('refuses every run file write when a folder above the run folder is a link, and writes nothing behind it', () => {
    // The run folder itself is a plain folder; the link is at .svc/runs (checking only the last name let it through).
    const project = join(root, 'above');
    const elsewhere = join(root, 'elsewhere-runs');
    mkdirSync(join(elsewhere, 'rabove', 'artifacts'), { recursive: true });
    mkdirSync(join(project, '.svc'), { recursive: true });
    symlinkSync(elsewhere, join(project, '.svc', 'runs'));
    const dir = join(project, '.svc', 'runs', 'rabove');
    const refused = /Refusing to write into ".*\/\.svc\/runs": it is a symbolic link, not a plain directory/;
    assert.throws(() => writeState(dir, stateFor(project, 'rabove')), refused);
    assert.throws(() => openEventLog(dir).append('log', {}), refused);
    assert.throws(() => writePlan(dir, {} as RunPlan, false, { HOME: root }), refused);
    assert.deepEqual(readdirSync(join(elsewhere, 'rabove')), ['artifacts']);
  });

  it('replaces a state.json link with a file instead of writing through it', () => {
    writeFileSync(outside, 'keep\n');
    const dir = folder('rstate');
    rmSync(join(dir, 'state.json'));
    symlinkSync(outside, join(dir, 'state.json'));
    writeState(dir, stateFor(join(root, 'repo'), 'rstate'));
    assert.equal(readFileSync(outside, 'utf8'), 'keep\n');
    assert.equal(readState(dir).run, 'rstate');
  });

  it('refuses answer, prompt and artifact files that are symbolic links', async () => {
    writeFileSync(outside, 'keep\n');
    const dir = folder('rart');
    symlinkSync(outside, join(dir, 'answer.txt'));
    assert.throws(() => writeNoFollow(join(dir, 'answer.txt'), 'postgres'), /symbolic link/);
    symlinkSync(root, join(dir, 'artifacts', 'checks'));
    const ctx = openRunContext(dir, {}, { ship: false });
    assert.throws(() => ctx.saveArtifact('checks/unit.log', 'x'), /not a plain directory/);
    symlinkSync(outside, join(dir, 'artifacts', 'provider.log'));
    assert.throws(() => ctx.saveArtifact('provider.log', 'x'), /symbolic link/);
    await ctx.close();
    assert.equal(readFileSync(outside, 'utf8'), 'keep\n');
    assert.equal(existsSync(join(root, 'unit.log')), false);
  });

  it('writes no artifact whose name carries a credential, and names it with the credential cut', async () => {
    const dir = folder('rcredname');
    const ctx = openRunContext(dir, {}, { ship: false });
    assert.throws(() => ctx.saveArtifact('checks/Authorization: Bearer name-secret-34.log', 'x'), (err: Error) => {
      assert.match(err.message, /"checks\/Authorization: Bearer \*\*\*" is no artifact name/);
      return true;
    });
    await ctx.close();
    assert.deepEqual(readdirSync(join(dir, 'artifacts')), []);
  });

  it('writes an artifact readable as the umask allows, and names the path the user knows when it cannot', async () => {
    const dir = folder('rmode');
    const ctx = openRunContext(dir, {}, { ship: false });
    const umask = process.umask(0o077);
    try {
      ctx.saveArtifact('diff.patch', 'x');
    } finally {
      process.umask(umask);
    }
    assert.equal(statSync(join(dir, 'artifacts', 'diff.patch')).mode & 0o777, 0o600);
    // A folder at the name: the rename onto it fails, and says so of the run's folder, not of /proc/self/fd/<n>.
    mkdirSync(join(dir, 'artifacts', 'receipt.json'));
    const shown = join(dir, 'artifacts', 'receipt.json');
    assert.throws(() => ctx.saveArtifact('receipt.json', 'x'), (err: NodeJS.ErrnoException & { dest?: string }) => {
      assert.ok(!err.message.includes('/proc/self/fd') && err.message.includes(`'${shown}'`), err.message);
      assert.deepEqual([err.dest, err.path?.startsWith(`${shown}.`)], [shown, true]);
      return true;
    });
    await ctx.close();
  });

  it("says a linked artifact the worker's shipper leaves out once, to the worker's log and the run's, even unshipped", async () => {
    writeFileSync(outside, 'keep\n');
    const dir = folder('rskip');
    symlinkSync(outside, join(dir, 'artifacts', 'secret.txt'));
    const said: string[] = [];
    const env = { SVC_CONTROL_URL: 'http://127.0.0.1:9', HOME: root };
    const ctx = openRunContext(dir, env, { ship: true, say: (text) => said.push(text) });
    await ctx.close();
    const line = 'not shipped: artifacts/secret.txt is a symbolic link (never followed)';
    assert.deepEqual(said.filter((t) => t.includes('secret.txt')), [`[svc rskip] ${line}\n`]);
    const logged = readFileSync(join(dir, 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l).data);
    assert.deepEqual(logged.filter((d) => d.text?.includes('secret.txt')), [{ stream: 'svc', text: line }]);
  });
});

describe('the event log, its run folder and events.jsonl held open (openEventLog)', () => {
  let root: string;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'svc-'));
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  function runFolder(run: string): string {
    const dir = join(root, 'repo', '.svc', 'runs', run);
    mkdirSync(dir, { recursive: true });
    return dir;
  }
  const seqs = (dir: string) => readFileSync(join(dir, 'events.jsonl'), 'utf8').trim().split('\n')
    .map((l) => (JSON.parse(l) as { seq: number }).seq);

  it('refuses an append once its run folder was removed, as when each append opened it, writing nowhere', () => {
    const dir = runFolder('rgone');
    const log = openEventLog(dir);
    log.append('log', { text: 'one' });
    rmSync(dir, { recursive: true });
    const missing = new UnsafePathError(`Run folder "${dir}" is missing (ENOENT)`);
    assert.throws(() => log.append('log', { text: 'two' }), missing);
    log.close();
  });

  it('starts events.jsonl again when only it was removed, its seq going on', () => {
    const dir = runFolder('rfile');
    const log = openEventLog(dir);
    log.append('log', { text: 'one' });
    log.append('log', { text: 'two' });
    rmSync(join(dir, 'events.jsonl'));
    log.append('log', { text: 'three' });
    log.append('log', { text: 'four' });
    log.close();
    assert.deepEqual(seqs(dir), [3, 4]);
  });

  it('refuses an append after close, never writing through the number its folder fd had', () => {
    const dir = runFolder('rclosed');
    const other = runFolder('rother');
    const log = openEventLog(dir);
    log.append('log', { text: 'one' });
    log.close();
    const taken = openSync(other, 'r'); // most likely the number the closed folder had
    try {
      assert.throws(() => log.append('log', { text: 'two' }), /The event log of ".*rclosed" is closed/);
    } finally {
      closeSync(taken);
    }
    assert.equal(existsSync(join(other, 'events.jsonl')), false);
    assert.deepEqual(seqs(dir), [1]);
  });

  it('numbers on from the last seq ingest takes, never a non-integer, unsafe or negative one', () => {
    const dir = runFolder('rbadseq');
    const lines = ['{"seq":2}', '{"seq":1e999}', '"a string"', '{"seq":-5}', '{"seq":2.5}', '{"seq":"9"}', 'null'];
    writeFileSync(join(dir, 'events.jsonl'), `${lines.join('\n')}\n`);
    const log = openEventLog(dir);
    log.append('log', { text: 'next' });
    log.close();
    const last = readFileSync(join(dir, 'events.jsonl'), 'utf8').trim().split('\n').at(-1)!;
    assert.equal((JSON.parse(last) as { seq: number }).seq, 3);
  });

  it('refuses a log whose last seq leaves no room for safe integer seqs after it, closing its folder', () => {
    const dir = runFolder('rnoroom');
    writeFileSync(join(dir, 'events.jsonl'), `{"seq":${Number.MAX_SAFE_INTEGER - 5}}\n`);
    const fds = () => readdirSync('/proc/self/fd').length;
    const before = fds();
    assert.throws(() => openEventLog(dir), { name: 'RefusedError', message: /no room/ });
    assert.throws(() => openEventLog(runFolder('rnoroom2'), undefined, Number.MAX_SAFE_INTEGER), /no room/);
    assert.equal(fds(), before);
  });

  it('closes its run folder when reading events.jsonl throws', (t) => {
    const dir = runFolder('rread');
    writeFileSync(join(dir, 'events.jsonl'), '{"seq":1}\n');
    const fds = () => readdirSync('/proc/self/fd').length;
    const before = fds();
    t.mock.method(fs, 'readSync', () => {
      throw Object.assign(new Error('EIO: i/o error, read'), { code: 'EIO' });
    });
    syncBuiltinESMExports();
    try {
      assert.throws(() => openEventLog(dir), /EIO/);
    } finally {
      t.mock.restoreAll();
      syncBuiltinESMExports();
    }
    assert.equal(fds(), before);
  });
});
