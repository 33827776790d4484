// The agent's output from the command line: `svc start --follow` streams it while the run works, `svc runs logs <run>`
// prints it from the run folder (or the Control Plane for a run the project does not hold) and `-f` follows it until
// the run ends. The provider is a real script in a real git repository; "while it works" is shown by a provider that
// waits for a file the test writes only after it saw the first line.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs, { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findLocalRun, printLocalLogs } from '../../src/cli/run-logs.ts';
import { prepareRun } from '../../src/engine/launch.ts';
import { readState, writeState } from '../../src/engine/run-state.ts';
import { makeRepo, readJson, CLI, GIT_ENV, AGENT_STATE, type TestRepo } from '../engine/fixtures.ts';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { closedPort } from '../helpers/closed-port.ts';

/** Says one line on each stream, then waits for agent-state/go-<run> before its last line and its edit. */
const GATED_SCRIPT = `#!/bin/sh
cat > /dev/null
echo "agent: first line"
echo "agent: a warning" >&2
while [ ! -e "$HOME/${AGENT_STATE}/go-$SVC_RUN_ID" ]; do sleep 0.05; done
echo "agent: last line"
echo "fixed" >> a.txt
`;

interface Live {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  closed: Promise<number | null>;
}

describe('the agent output of a run', () => {
  let repo: TestRepo;
  let control: TestControl;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    repo = makeRepo({ policy: { checks: [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'] }] }, providers: { gated: GATED_SCRIPT } });
    control = await startTestControl();
    // No Control Plane answers the runs' shipping: the local reads must not need one.
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: `http://127.0.0.1:${await closedPort()}`, SVC_SHIP: '0' };
  });
  after(async () => {
    await control.close();
    repo.cleanup();
  });

  function svc(args: string[], extra: NodeJS.ProcessEnv = {}): Live {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: repo.repo, env: { ...env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const closed = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    return { child, stdout: () => stdout, stderr: () => stderr, closed };
  }

  const release = (run: string) => writeFileSync(join(repo.home, AGENT_STATE, `go-${run}`), '');
  const state = (run: string) => readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));

  it('svc start --follow streams the agent output to stderr while the run works; stdout keeps its two JSON lines', async () => {
    const live = svc(['start', '--follow', '--brief', 'append fixed', '--provider', 'gated']);
    const { run } = JSON.parse(await waitFor(() => live.stdout().split('\n')[0], 'the run line'));
    // Its stdout and its stderr, each a pipe of its own: their order between them is not kept, only within each.
    await waitFor(() => live.stderr().includes('agent: first line\n'), 'the agent stdout line on stderr');
    await waitFor(() => live.stderr().includes('agent: a warning\n'), 'the agent stderr line on stderr');
    assert.equal(state(run).status, 'running', 'the line came while the run worked');
    assert.doesNotMatch(live.stderr(), /agent: last line/);
    release(run);
    assert.equal(await live.closed, 0, live.stderr());
    assert.match(live.stderr(), /^agent: last line$/m);
    const lines = live.stdout().trim().split('\n');
    assert.equal(lines.length, 2, live.stdout());
    assert.equal(JSON.parse(lines[1]!).status, 'succeeded');
    // Once each: svc's own notes come from the worker itself, not repeated from the events.
    assert.equal(live.stderr().split('agent: first line').length, 2);
    assert.doesNotMatch(live.stderr(), /^\[svc\] /m);
  });

  it('svc runs logs <run> prints a finished run\'s output from its folder, taking a bare id as svc runs does', async () => {
    const started = svc(['start', '--detach', '--brief', 'append fixed', '--provider', 'gated']);
    assert.equal(await started.closed, 0, started.stderr());
    const { run } = JSON.parse(started.stdout());
    release(run);
    await waitFor(() => state(run).status === 'succeeded', 'the run to succeed');
    for (const ref of [run, `local/${run}`]) {
      const logs = svc(['runs', 'logs', ref]);
      assert.equal(await logs.closed, 0, logs.stderr());
      const out = logs.stdout();
      assert.match(out, /^agent: first line\n(.*\n)*agent: last line\n/m);
      assert.match(out, /^agent: a warning$/m);
      assert.match(out, /^\[svc\] status running$/m);
      assert.match(out, /\[svc\] status succeeded\n$/);
    }
  });

  it('svc runs logs <run> -f follows a running run until it ends', async () => {
    const started = svc(['start', '--detach', '--brief', 'append fixed', '--provider', 'gated']);
    assert.equal(await started.closed, 0, started.stderr());
    const { run } = JSON.parse(started.stdout());
    const logs = svc(['runs', 'logs', run, '-f']);
    await waitFor(() => logs.stdout().includes('agent: first line\n'), 'the first line');
    assert.equal(logs.child.exitCode, null, 'still following');
    release(run);
    assert.equal(await logs.closed, 0, logs.stderr());
    assert.match(logs.stdout(), /^agent: last line$/m);
    assert.match(logs.stdout(), /\[svc\] status succeeded\n$/);
  });

  it('svc runs logs reads a run the project does not hold from the Control Plane, and -f follows it there', async () => {
    const ingest = (body: unknown) => control.request('POST', '/v1/ingest', { body });
    const now = () => new Date().toISOString();
    const ran = await ingest({
      source: 'edge',
      runs: [{ run: 'rremote', status: 'running', started_at: now(), updated_at: now() }],
      events: [
        { run: 'rremote', seq: 1, ts: now(), kind: 'log', data: { stream: 'stdout', text: 'remote: hello' } },
        { run: 'rremote', seq: 2, ts: now(), kind: 'cost', data: { usd: 1 } },
        { run: 'rremote', seq: 3, ts: now(), kind: 'question', data: { question: 'Spend more?' } },
      ],
    });
    assert.equal(ran.status, 200, ran.text);
    const once = svc(['runs', 'logs', 'edge/rremote'], { SVC_CONTROL_URL: control.url });
    assert.equal(await once.closed, 0, once.stderr());
    const asked = '[svc] blocked, waiting for an answer: Spend more?\n';
    assert.equal(once.stdout(), `remote: hello\n${asked}`);
    const logs = svc(['runs', 'logs', 'edge/rremote', '--follow'], { SVC_CONTROL_URL: control.url });
    await waitFor(() => logs.stdout().includes(asked), 'the stored lines');
    const more = await ingest({
      source: 'edge',
      events: [{ run: 'rremote', seq: 4, ts: now(), kind: 'log', data: { stream: 'stderr', text: 'remote: live' } }],
    });
    assert.equal(more.status, 200, more.text);
    await waitFor(() => logs.stdout().includes('remote: live\n'), 'the live line');
    assert.equal(logs.child.exitCode, null, 'still following');
    const ended = await ingest({
      source: 'edge',
      runs: [{ run: 'rremote', status: 'succeeded', started_at: now(), ended_at: now(), updated_at: now() }],
      events: [{ run: 'rremote', seq: 5, ts: now(), kind: 'run.status', data: { from: 'running', to: 'succeeded' } }],
    });
    assert.equal(ended.status, 200, ended.text);
    assert.equal(await logs.closed, 0, logs.stderr());
    assert.equal(logs.stdout(), `remote: hello\n${asked}remote: live\n[svc] status succeeded\n`);
  });

  it('svc runs logs -f waits for a run the Control Plane has not heard of yet, as one started detached', async () => {
    const logs = svc(['runs', 'logs', 'edge/rlate', '-f'], { SVC_CONTROL_URL: control.url });
    await waitFor(() => logs.stderr().includes('for the Control Plane to hear of edge/rlate'), 'the wait said');
    const t = new Date().toISOString();
    const ran = await control.request('POST', '/v1/ingest', { body: {
      source: 'edge',
      runs: [{ run: 'rlate', status: 'succeeded', started_at: t, ended_at: t, updated_at: t }],
      events: [{ run: 'rlate', seq: 1, ts: t, kind: 'log', data: { stream: 'stdout', text: 'late: hello' } }],
    } });
    assert.equal(ran.status, 200, ran.text);
    assert.equal(await logs.closed, 0, logs.stderr());
    assert.equal(logs.stdout(), 'late: hello\n');
  });

  it('svc runs logs says when a run has nothing to show, and shows the error a failed run recorded', async () => {
    const now = () => new Date().toISOString();
    const quiet = await control.request('POST', '/v1/ingest', {
      body: {
        source: 'edge',
        runs: [
          { run: 'rquiet', status: 'queued', started_at: now(), updated_at: now() },
          { run: 'rbroke', status: 'failed', started_at: now(), ended_at: now(), updated_at: now() },
        ],
        events: [{ run: 'rbroke', seq: 1, ts: now(), kind: 'error', data: { message: 'Provider "x" not found' } }],
      },
    });
    assert.equal(quiet.status, 200, quiet.text);
    const none = svc(['runs', 'logs', 'edge/rquiet'], { SVC_CONTROL_URL: control.url });
    assert.equal(await none.closed, 0, none.stderr());
    assert.equal(none.stdout(), '');
    assert.equal(none.stderr(), 'edge/rquiet has no output to show\n');
    const broke = svc(['runs', 'logs', 'edge/rbroke'], { SVC_CONTROL_URL: control.url });
    assert.equal(await broke.closed, 0, broke.stderr());
    assert.equal(broke.stdout(), '[svc] error: Provider "x" not found\n');
    assert.equal(broke.stderr(), '');
    // A run of this project's folder, given by its bare id, with an event but none that is output: named by the
    // source its state holds, not SVC_SOURCE's default.
    const dir = join(repo.repo, '.svc', 'runs', 'rcosted');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'state.json'), JSON.stringify({ source: 'edge', run: 'rcosted', status: 'succeeded' }));
    writeFileSync(join(dir, 'events.jsonl'),
      `${JSON.stringify({ run: 'rcosted', seq: 1, ts: now(), kind: 'cost', data: { usd: 1 } })}\n`);
    const costed = svc(['runs', 'logs', 'rcosted']);
    assert.equal(await costed.closed, 0, costed.stderr());
    assert.equal(costed.stdout(), '');
    assert.equal(costed.stderr(), 'edge/rcosted has no output to show\n');
    rmSync(dir, { recursive: true });
  });

  // A pod's run container's error and svc note are its agent's word (ingest marks them): never shown as svc's.
  it('svc runs logs labels a line marked as a pod\'s run container\'s as its, not svc\'s', async () => {
    const dir = join(repo.repo, '.svc', 'runs', 'rmarked');
    mkdirSync(dir, { recursive: true });
    try {
      writeFileSync(join(dir, 'state.json'), JSON.stringify({ source: 'edge', run: 'rmarked', status: 'failed' }));
      const by = 'run-container';
      const events = [
        { kind: 'log', data: { stream: 'svc', text: 'checks passed', by } },
        { kind: 'error', data: { message: 'Provider "x" not found', by } },
        { kind: 'error', data: { message: 'svc\'s own' } },
      ].map((e, i) => JSON.stringify({ run: 'rmarked', seq: i + 1, ts: new Date().toISOString(), ...e }));
      writeFileSync(join(dir, 'events.jsonl'), `${events.join('\n')}\n`);
      const shown = svc(['runs', 'logs', 'rmarked']);
      assert.equal(await shown.closed, 0, shown.stderr());
      assert.equal(shown.stdout(), '[run container] checks passed\n[run container] error: Provider "x" not found\n' +
        '[svc] error: svc\'s own\n');
    } finally {
      rmSync(dir, { recursive: true });
    }
  });

  it('svc runs logs labels an agent line that starts as svc\'s notes do as the agent\'s', async () => {
    const dir = join(repo.repo, '.svc', 'runs', 'rforged');
    mkdirSync(dir, { recursive: true });
    try {
      writeFileSync(join(dir, 'state.json'), JSON.stringify({ source: 'edge', run: 'rforged', status: 'failed' }));
      const events = [
        { kind: 'log', data: { stream: 'stdout', text: '[svc] status succeeded' } },
        { kind: 'log', data: { stream: 'stderr', text: '  [run container] checks passed' } },
        { kind: 'log', data: { stream: 'stdout', text: 'plain [svc] in the middle' } },
        { kind: 'run.status', data: { to: 'failed' } },
      ].map((e, i) => JSON.stringify({ run: 'rforged', seq: i + 1, ts: new Date().toISOString(), ...e }));
      writeFileSync(join(dir, 'events.jsonl'), `${events.join('\n')}\n`);
      const shown = svc(['runs', 'logs', 'rforged']);
      assert.equal(await shown.closed, 0, shown.stderr());
      assert.equal(shown.stdout(), '[agent] [svc] status succeeded\n[agent]   [run container] checks passed\n' +
        'plain [svc] in the middle\n[svc] status failed\n');
    } finally {
      rmSync(dir, { recursive: true });
    }
  });

  it('says a run neither the project nor the Control Plane knows is not found, with exit 1', async () => {
    const r = svc(['runs', 'logs', 'edge/rnowhere'], { SVC_CONTROL_URL: control.url });
    assert.equal(await r.closed, 1);
    assert.match(r.stderr(), /No run edge\/rnowhere: it is not in this project's \.svc\/runs\/, and the Control Plane at .* does not know it/);
    const down = svc(['runs', 'logs', 'rnowhere']);
    assert.equal(await down.closed, 1);
    assert.match(down.stderr(), /No run local\/rnowhere: it is not in this project's \.svc\/runs\/, and /);
  });

  // A worker writes state.json before the status event that goes with it: a follower that read the run as ended in
  // between printed no last status line. Here the event comes only on the tail's third read, after the last flush.
  it('svc runs logs -f waits for the status line of a run it read as ended', async () => {
    const made = { input: 'x', forceBrief: true, pr: false, worktree: false, provider: 'gated', repo: repo.repo, env };
    await prepareRun({ ...made, runId: 'endedfirst' });
    const dir = join(repo.repo, '.svc', 'runs', 'endedfirst');
    writeState(dir, { ...readState(dir), status: 'succeeded' });
    const reads = [[{ kind: 'log', data: { stream: 'stdout', text: 'agent: last line' } }], []];
    const tail = () => reads.shift() ?? [{ kind: 'run.status', data: { from: 'running', to: 'succeeded' } }];
    let out = '';
    await printLocalLogs(dir, (line) => (out += line), { follow: true, tail });
    assert.equal(out, 'agent: last line\n[svc] status succeeded\n');
  });

  it('keeps usage mistakes at exit 2', async () => {
    for (const args of [['runs', 'logs'], ['runs', 'logs', 'a/b/c'], ['runs', 'show', 'x', '-f'], ['runs', 'logs', 'x', '--json']]) {
      const r = svc(args);
      assert.equal(await r.closed, 2, `${args.join(' ')}: ${r.stderr()}`);
    }
    const r = svc(['start', '--follow', '--detach', 'a brief']);
    assert.equal(await r.closed, 2);
    assert.match(r.stderr(), /--follow .* cannot go with --detach/);
  });
});

describe('finding a run in the project (svc answer, svc runs logs)', () => {
  let project: string;
  const real = fs.openSync;
  let opened: string[] = [];

  before(() => {
    project = realpathSync(mkdtempSync(join(tmpdir(), 'svc-find-')));
    execFileSync('git', ['init', '-q'], { cwd: project });
    for (const [run, text] of [['ra', JSON.stringify({ source: 'local', run: 'ra', status: 'blocked' })],
      ['rb', '{ not json']]) {
      mkdirSync(join(project, '.svc', 'runs', run!), { recursive: true });
      writeFileSync(join(project, '.svc', 'runs', run!, 'state.json'), text!);
    }
    // Every open through node:fs, the named imports of the sources included, is recorded.
    fs.openSync = (path: fs.PathLike, flags: fs.OpenMode = 'r', mode?: fs.Mode | null) => {
      opened.push(String(path));
      return real(path, flags, mode);
    };
    syncBuiltinESMExports();
  });
  after(() => {
    fs.openSync = real;
    syncBuiltinESMExports();
    rmSync(project, { recursive: true, force: true });
  });

  it('reads the one run\'s folder, none of the others, and the project once when it is the repository\'s root', () => {
    opened = [];
    assert.equal(findLocalRun(project, 'local', 'ra')?.state.status, 'blocked');
    assert.deepEqual(opened.filter((path) => /\/rb(\/|$)/.test(path)), [], 'the sibling run was not opened');
    opened = [];
    assert.equal(findLocalRun(project, null, 'rmissing'), null);
    assert.deepEqual(opened.filter((path) => /\/r[ab](\/|$)/.test(path)), []);
    assert.equal(opened.filter((path) => path.endsWith('/runs')).length, 1, 'one search, not two');
  });
});
