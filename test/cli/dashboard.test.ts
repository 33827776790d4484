// `svc dashboard`: reuses a running Control Plane or starts one in the background, prints or opens its URL.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, existsSync, chmodSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { spawn } from 'node:child_process';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { runChild, type ChildResult } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { isPidAlive } from '../../src/proc-stat.ts';
import { startTestTrigger } from '../trigger/helpers.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';

const CLI = join(process.cwd(), 'dist', 'cli.js');

function run(args: string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<ChildResult> {
  return runChild(process.execPath, [CLI, ...args], { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** This process's start time (/proc/self/stat field 22), as a Control Plane records its own in server.json. */
function ownProcStart(): string {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]!;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const address = s.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      s.close(() => resolve(port));
    });
  });
}

describe('svc dashboard', () => {
  let control: TestControl;
  let dir: string;
  let baseEnv: NodeJS.ProcessEnv;
  const started: number[] = [];

  before(async () => {
    control = await startTestControl();
    dir = mkdtempSync(join(tmpdir(), 'svc-'));
    baseEnv = { PATH: process.env.PATH, HOME: join(dir, 'home') };
    mkdirSync(join(dir, 'home'), { recursive: true });
  });

  after(async () => {
    for (const pid of started) {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
    // Ended before their folder goes: a server still closing writes its log and database there, and its folder stays.
    for (const pid of started) await waitFor(() => !isPidAlive(pid), `the Control Plane ${pid} to end`);
    await control?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('prints the URL of the server named by SVC_CONTROL_URL with --no-open', async () => {
    const r = await run(['dashboard', '--no-open'], { ...baseEnv, SVC_CONTROL_URL: control.url });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `${control.url}\n`);
    assert.match(r.stderr, /found via SVC_CONTROL_URL/);
  });

  it('reuses the server recorded in ~/.svc/control/server.json while its pid has the start time recorded', async () => {
    const home = join(dir, 'home-record');
    mkdirSync(join(home, '.svc', 'control'), { recursive: true });
    const record = { url: control.url, pid: process.pid, proc_start: ownProcStart() };
    writeFileSync(join(home, '.svc', 'control', 'server.json'), JSON.stringify(record));
    const r = await run(['dashboard', 'open', '--no-open'], { ...baseEnv, HOME: home });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `${control.url}\n`);
    assert.match(r.stderr, /found via server\.json/);
  });

  it('refuses a svc trigger serve on the Control Plane\'s port, which answers /health too, and starts nothing', async () => {
    const trigger = await startTestTrigger();
    try {
      const home = join(dir, 'home-trigger');
      mkdirSync(home, { recursive: true });
      const port = new URL(trigger.url).port;
      const r = await run(['dashboard', '--no-open'], { ...baseEnv, HOME: home, SVC_CONTROL_PORT: port });
      assert.equal(r.code, 1, r.stderr);
      assert.equal(r.stdout, '');
      assert.equal(r.stderr, `svc dashboard: http://127.0.0.1:${port} (found via SVC_CONTROL_PORT) ` +
        'is not a Control Plane: another ' +
        'program answers there (a svc trigger serve?). Stop it, or start the Control Plane on a free port: ' +
        'SVC_CONTROL_PORT=0 svc dashboard\n');
      assert.equal(existsSync(join(home, '.svc', 'control', 'server.json')), false);
    } finally {
      await trigger.cleanup();
    }
  });

  it('reuses a Control Plane on the default port that no server.json records, sending its pending runs no home token',
    { skip: bwrapWorks ? false : 'bwrap cannot run here (a network namespace of its own holds the default port)' },
    async () => {
      const home = join(dir, 'home-unrecorded');
      mkdirSync(join(home, '.svc', 'control'), { recursive: true });
      writeFileSync(join(home, '.svc', 'control', 'token'), 'own-home-token\n');
      // A run made while no Control Plane ran, waiting in the project the command runs in to be sent.
      const project = join(dir, 'project-unrecorded');
      mkdirSync(join(project, '.svc', 'runs', 'r1'), { recursive: true });
      mkdirSync(join(project, '.svc', 'ship-pending'), { recursive: true });
      const state = { run: 'r1', status: 'succeeded' };
      writeFileSync(join(project, '.svc', 'runs', 'r1', 'state.json'), JSON.stringify(state));
      writeFileSync(join(project, '.svc', 'ship-pending', 'r1'), '');
      // No SVC_CONTROL_PORT: the default port, where another user's server (the stand-in) may listen while the
      // person's own is down. The namespace gives 47821 to the stand-in without reaching the host's.
      const standIn = join(process.cwd(), 'test', 'helpers', 'default-port-stand-in.ts');
      const inside = [process.execPath, standIn, process.execPath, CLI, 'dashboard', '--no-open'];
      const bwrap = ['--dev-bind', '/', '/', '--unshare-net', '--die-with-parent', '--', ...inside];
      const outer = await runChild('bwrap', bwrap, { env: { ...baseEnv, HOME: home }, cwd: project });
      assert.equal(outer.code, 0, outer.stderr);
      const r = JSON.parse(outer.stdout) as ChildResult & { seen: string[] };
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, 'http://127.0.0.1:47821\n');
      assert.ok(r.seen.length > 1, `its pending run was offered: ${r.seen.join(', ')}`);
      assert.deepEqual(r.seen.filter((line) => !line.endsWith(' -')), [], 'no token of any kind');
      assert.match(r.stderr, /^Using the Control Plane at http:\/\/127\.0\.0\.1:47821 \(found via default\)\n/);
      const withheld = 'svc: ~/.svc/control/token is not sent to http://127.0.0.1:47821: no Control Plane is known';
      assert.ok(r.stderr.includes(withheld), r.stderr);
    });

  it('reuses a Control Plane that has a token, without sending it before it knows the server is one', async () => {
    const guarded = await startTestControl({ token: 'dashboard-token-123456' });
    try {
      const env = { ...baseEnv, SVC_CONTROL_URL: guarded.url, SVC_CONTROL_TOKEN: 'dashboard-token-123456' };
      const r = await run(['dashboard', '--no-open'], env);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, `${guarded.url}\n`);
    } finally {
      await guarded.close();
    }
  });

  it('fails with exit 1 and starts nothing when SVC_CONTROL_URL points at a dead address', async () => {
    const port = await freePort();
    const r = await run(['dashboard', '--no-open'], { ...baseEnv, SVC_CONTROL_URL: `http://127.0.0.1:${port}` });
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /Nothing answers at SVC_CONTROL_URL/);
  });

  it('starts a Control Plane in the background when none runs and prints its URL', async () => {
    const home = join(dir, 'home-start');
    mkdirSync(home, { recursive: true });
    const port = await freePort();
    const env = { ...baseEnv, HOME: home, SVC_CONTROL_PORT: String(port), SVC_CONTROL_DB: join(dir, 'started.db') };
    const r = await run(['dashboard', 'start', '--no-open'], env);
    const record = join(home, '.svc', 'control', 'server.json');
    if (existsSync(record)) started.push(JSON.parse(readFileSync(record, 'utf8')).pid);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `http://127.0.0.1:${port}\n`);
    assert.match(r.stderr, /Started the Control Plane/);
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    assert.equal(health.status, 200);
    // The started server outlives the command, and a second call reuses it.
    const again = await run(['dashboard', '--no-open'], env);
    assert.equal(again.stdout, `http://127.0.0.1:${port}\n`);
    assert.match(again.stderr, /found via server\.json/);
  });

  it('starts a Control Plane on a free port when SVC_CONTROL_PORT=0 (no default server to probe)', async () => {
    const home = join(dir, 'home-port0');
    mkdirSync(home, { recursive: true });
    const env = { ...baseEnv, HOME: home, SVC_CONTROL_PORT: '0', SVC_CONTROL_DB: join(dir, 'port0.db') };
    const r = await run(['dashboard', 'start', '--no-open'], env);
    const record = join(home, '.svc', 'control', 'server.json');
    if (existsSync(record)) started.push(JSON.parse(readFileSync(record, 'utf8')).pid);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /Started the Control Plane/);
    const url = r.stdout.trim();
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(url, 'http://127.0.0.1:0');
    assert.equal((await fetch(`${url}/health`)).status, 200);
  });

  it('hands the Control Plane it starts its token through a pipe: not in its environment, not in a file', async () => {
    const home = join(dir, 'home-token');
    mkdirSync(home, { recursive: true });
    const token = 'dash-token-91f3c2';
    // Port 0: a port taken from the kernel and given back could be another's by the time the server binds it.
    const env = { ...baseEnv, HOME: home, SVC_CONTROL_PORT: '0', SVC_CONTROL_DB: join(dir, 'token.db'), SVC_CONTROL_TOKEN: token };
    const r = await run(['dashboard', 'start', '--no-open'], env);
    const url = r.stdout.trim();
    const record = join(home, '.svc', 'control', 'server.json');
    const pid = existsSync(record) ? (JSON.parse(readFileSync(record, 'utf8')).pid as number) : null;
    if (pid) started.push(pid);
    assert.equal(r.code, 0, r.stderr);
    assert.equal((await fetch(`${url}/v1/runs`)).status, 401);
    const runs = await fetch(`${url}/v1/runs`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(runs.status, 200, 'the server holds the token it was handed');
    assert.ok(pid, 'the server recorded its pid');
    assert.equal(readFileSync(`/proc/${pid}/environ`, 'utf8').includes(token), false, 'not in its environment');
    assert.equal(readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(token), false, 'not in its argv');
    const handoff = join(home, '.svc', 'handoff');
    assert.equal(existsSync(handoff), false, 'no handoff file was ever written (the folder is made on first use)');
  });

  it('opens the URL with $BROWSER, passing it as one argument without a shell', async () => {
    const out = join(dir, 'browser-argv.txt');
    const script = join(dir, 'fake browser.sh');
    writeFileSync(script, `#!/bin/sh\nprintf '%s\\n' "$#" "$@" > '${out}'\n`);
    chmodSync(script, 0o755);
    const r = await run(['dashboard'], { ...baseEnv, SVC_CONTROL_URL: control.url, BROWSER: script });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '');
    const argv = await waitFor(() => (existsSync(out) ? readFileSync(out, 'utf8') : null), 'the browser script to run');
    assert.equal(argv, `1\n${control.url}/\n`);
    assert.match(r.stderr, /^Opened .* in the browser \(.*fake browser\.sh\)$/m);
  });

  it('prints the URL when no browser can be started', async () => {
    const r = await run(['dashboard'], { ...baseEnv, SVC_CONTROL_URL: control.url, BROWSER: join(dir, 'no-such-browser') });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `${control.url}\n`);
    assert.match(r.stderr, /^Could not open a browser: \/.*\/no-such-browser could not be started \(ENOENT\)\. Set /m);
    assert.doesNotMatch(r.stderr, /Opened/);
  });

  it('says the browser failed and prints the URL when the opener exits non-zero, as xdg-open does', async () => {
    const script = join(dir, 'failing-opener.sh');
    writeFileSync(script, '#!/bin/sh\necho "xdg-open: no method available for opening $1" >&2\nexit 3\n');
    chmodSync(script, 0o755);
    const r = await run(['dashboard'], { ...baseEnv, SVC_CONTROL_URL: control.url, BROWSER: script });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `${control.url}\n`);
    const said = /^Could not open a browser: .*failing-opener\.sh exited with code 3\. Set BROWSER to choose one, or open /m;
    assert.match(r.stderr, said);
    assert.doesNotMatch(r.stderr, /Opened/);
  });

  it('stop ends the Control Plane it started, and only while that process is the one it started', async () => {
    const home = join(dir, 'home-stop');
    mkdirSync(home, { recursive: true });
    const env = { ...baseEnv, HOME: home, SVC_CONTROL_PORT: '0', SVC_CONTROL_DB: join(dir, 'stop.db') };
    const r = await run(['dashboard', 'start', '--no-open'], env);
    assert.equal(r.code, 0, r.stderr);
    const url = r.stdout.trim();
    const pid = JSON.parse(readFileSync(join(home, '.svc', 'control', 'server.json'), 'utf8')).pid as number;
    started.push(pid);
    const stopped = await run(['dashboard', 'stop'], env);
    assert.equal(stopped.code, 0, stopped.stderr);
    assert.equal(stopped.stderr, `Stopped the Control Plane at ${url} (pid ${pid})\n`);
    // Gone, or a zombie its new parent has yet to reap: it has exited either way.
    assert.equal(isPidAlive(pid), false, 'the server process is gone');
    assert.equal(existsSync(join(home, '.svc', 'control', 'server.json')), false, 'it removed its record on the way out');
    assert.equal(existsSync(join(home, '.svc', 'control', 'dashboard.json')), false);
    const again = await run(['dashboard', 'stop'], env);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stderr, 'No Control Plane started by svc dashboard is running\n');
  });

  it('stop leaves a Control Plane it did not start running, even when a record names its pid', async () => {
    const home = join(dir, 'home-not-ours');
    mkdirSync(join(home, '.svc', 'control'), { recursive: true });
    // server.json of a Control Plane started elsewhere (this test process stands in for it), and a dashboard record
    // whose pid is that live process but whose start time is not: a recycled pid.
    const record = { url: control.url, pid: process.pid, proc_start: ownProcStart() };
    writeFileSync(join(home, '.svc', 'control', 'server.json'), JSON.stringify(record));
    writeFileSync(join(home, '.svc', 'control', 'dashboard.json'), JSON.stringify({ pid: process.pid, proc_start: '1', url: control.url }));
    const r = await run(['dashboard', 'stop'], { ...baseEnv, HOME: home });
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`The Control Plane at .* \\(pid ${process.pid}\\) was not started by svc dashboard`));
    assert.equal((await fetch(`${control.url}/health`)).status, 200, 'still serving');
    assert.equal(existsSync(join(home, '.svc', 'control', 'dashboard.json')), false, 'the stale record is dropped');
  });

  it('stop never signals another program, even one whose pid and start time a planted record names exactly', async () => {
    const home = join(dir, 'home-planted');
    mkdirSync(join(home, '.svc', 'control'), { recursive: true });
    const victim = spawn('sleep', ['300'], { stdio: 'ignore' });
    try {
      const pid = victim.pid!;
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const procStart = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
      writeFileSync(join(home, '.svc', 'control', 'dashboard.json'), JSON.stringify({ pid, proc_start: procStart, url: 'http://127.0.0.1:1' }));
      const r = await run(['dashboard', 'stop'], { ...baseEnv, HOME: home });
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stderr, 'No Control Plane started by svc dashboard is running\n');
      assert.equal(victim.exitCode, null);
      assert.equal(victim.signalCode, null, 'the other program got no signal');
    } finally {
      victim.kill('SIGKILL');
    }
  });

  it('rejects an unknown subcommand with exit 2', async () => {
    const r = await run(['dashboard', 'launch'], baseEnv);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /Unknown subcommand "dashboard launch"/);
  });
});
