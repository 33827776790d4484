import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, readFileSync, existsSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { createServer as createHttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runChild, type ChildResult } from '../helpers/run-child.ts';
import { closedPort } from '../helpers/closed-port.ts';
import { procStart } from '../../src/proc-stat.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');
const PKG = JSON.parse(readFileSync(join(import.meta.dirname, '../../package.json'), 'utf8')) as { version: string };
const dir = mkdtempSync(join(tmpdir(), 'svc-'));
const home = join(dir, 'home');
const children = new Set<ChildProcess>();

function baseEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH ?? '', HOME: home, ...extra };
}

function svc(args: string[], env: Record<string, string> = {}): Promise<ChildResult> {
  return runChild(process.execPath, [CLI, ...args], { env: baseEnv(env) });
}

interface Served {
  child: ChildProcess;
  url: string;
  stderr: () => string;
  exit: Promise<ChildResult>;
}

/** Starts `svc control serve` and resolves once it has printed its URL (the first stdout line). */
function serve(args: string[], env: Record<string, string> = {}): Promise<Served> {
  const child = spawn(process.execPath, [CLI, 'control', 'serve', '--port', '0', '--db', join(dir, `c-${children.size}.db`), ...args], { env: baseEnv(env) });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c));
  const exit = new Promise<ChildResult>((resolve) => {
    child.on('close', (code, signal) => {
      children.delete(child);
      resolve({ code, signal, stdout, stderr });
    });
  });
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      stdout += c;
      const line = stdout.split('\n')[0];
      if (stdout.includes('\n') && line) resolve({ child, url: line, stderr: () => stderr, exit });
    });
    exit.then((r) => reject(new Error(`serve exited ${r.code} before printing its URL: ${r.stderr}`)));
  });
}


const NO_STACK = /\n\s+at /;

/** server.json as {url, pid}, having checked the start time it records (what tells its server from a later pid's). */
function readRecord(file: string): { url: string; pid: number } {
  const { proc_start: started, ...record } = JSON.parse(readFileSync(file, 'utf8'));
  assert.match(started, /^\d+$/, 'server.json records its server\'s start time');
  return record;
}

after(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe('svc entry point', () => {
  it('prints the package version with --version', async () => {
    const r = await svc(['--version']);
    assert.deepEqual([r.code, r.stdout, r.stderr], [0, `${PKG.version}\n`, '']);
  });

  it('prints usage listing the commands with help', async () => {
    const r = await svc(['help']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /^Usage: svc <command>/);
    assert.match(r.stdout, /\n {2}control /);
  });

  it('prints control usage with control --help', async () => {
    const r = await svc(['control', '--help']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /svc control serve \[--host HOST\] \[--port PORT\] \[--db PATH\]/);
    assert.match(r.stdout, /svc control status \[--json\]/);
  });

  it('exits 2 on an unknown command', async () => {
    const r = await svc(['frobnicate']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /unknown command "frobnicate"\n/);
    // A subcommand given as a command is pointed to where it lives.
    const sub = await svc(['import']);
    assert.equal(sub.code, 2);
    assert.match(sub.stderr, /^svc: unknown command "import" \(did you mean svc control import\?\)\n/);
    const serve = await svc(['serve']);
    assert.match(serve.stderr, /"serve" \(did you mean svc control serve or svc trigger serve or svc gate serve\?\)/);
    // The runs subcommands are pointed to as well; a flag a summary mentions in parentheses is no subcommand.
    const logs = await svc(['logs']);
    assert.match(logs.stderr, /^svc: unknown command "logs" \(did you mean svc runs logs\?\)\n/);
    const stop = await svc(['stop']);
    assert.match(stop.stderr, /^svc: unknown command "stop" \(did you mean svc dashboard stop or svc runs stop\?\)\n/);
    for (const word of ['--list', 'a first run']) {
      const r = await svc([word]);
      assert.equal(r.code, 2, word);
      assert.match(r.stderr, new RegExp(`^svc: unknown command "${word}"\n`), word);
    }
  });

  it('exits 2 naming the command when asked for help on one that does not exist', async () => {
    const r = await svc(['help', 'bogus']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^svc: unknown command "bogus"/);
    assert.equal(r.stdout, '');
    const known = await svc(['help', 'control']);
    assert.equal(known.code, 0);
    assert.match(known.stdout, /svc control serve/);
  });

  it('exits 2 with a one-line message and no stack trace on usage errors', async () => {
    for (const args of [['control', 'serve', '--port', 'abc'], ['control', 'serve', '--bogus'], ['control', 'status', 'extra'], ['control', 'frobnicate']]) {
      const r = await svc(args);
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.stderr, /^svc control: /, args.join(' '));
      assert.doesNotMatch(r.stderr, NO_STACK, args.join(' '));
    }
  });
});

describe('svc control serve', () => {
  it('names the database it cannot open (a file that is not SQLite, a folder) and exits 1', async () => {
    const notDb = join(dir, 'not-a.db');
    writeFileSync(notDb, 'not a database\n');
    // The trigger server serves a git checkout: one to serve.
    const checkout = join(dir, 'served');
    spawnSync('git', ['init', '-q', checkout]);
    for (const [db, why] of [[notDb, 'file is not a database'], [dir, 'unable to open database file']] as const) {
      for (const server of ['control', 'trigger']) {
        const served = server === 'trigger' ? ['--repo', checkout] : [];
        const args = [CLI, server, 'serve', '--port', '0', '--db', db, ...served];
        const r = await runChild(process.execPath, args, { cwd: dir, env: baseEnv() });
        assert.equal(r.code, 1, r.stderr);
        assert.equal(r.stderr.split('\n').at(-2), `svc ${server}: Cannot open the database ${db}: ${why}`);
      }
    }
  });

  it('binds a free port with --port 0, prints the real URL, serves /health and exits 0 on SIGTERM', async () => {
    const s = await serve([]);
    assert.match(s.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(s.url.endsWith(':0'), true);
    const health = await fetch(`${s.url}/health`);
    assert.equal(health.status, 200);
    // Built, it serves the UI the SSE parser tsc compiled (the tests that run the sources get it type-stripped).
    const parser = await fetch(`${s.url}/client/sse-parse.js`);
    assert.equal(parser.status, 200);
    assert.match(await parser.text(), /^export function createSseParser\(\)/m);
    assert.deepEqual(readRecord(join(home, '.svc', 'control', 'server.json')), { url: s.url, pid: s.child.pid });
    s.child.kill('SIGTERM');
    const r = await s.exit;
    assert.equal(r.code, 0);
    assert.equal(existsSync(join(home, '.svc', 'control', 'server.json')), false, 'server.json is removed on shutdown');
  });

  it('leaves a running first server\'s server.json alone when a second binds elsewhere or fails to bind', async () => {
    const recordFile = join(home, '.svc', 'control', 'server.json');
    const first = await serve([]);
    const firstRecord = { url: first.url, pid: first.child.pid };
    assert.deepEqual(readRecord(recordFile), firstRecord);
    // A second one on another port: it serves, says how to reach it, and the record still names the first.
    const second = await serve([]);
    assert.equal((await fetch(`${second.url}/health`)).status, 200);
    assert.deepEqual(readRecord(recordFile), firstRecord);
    assert.match(second.stderr(), new RegExp(`SVC_CONTROL_URL=${second.url}`));
    second.child.kill('SIGTERM');
    assert.equal((await second.exit).code, 0);
    assert.deepEqual(readRecord(recordFile), firstRecord, 'the second removed only its own record');
    // A third on the first's port cannot bind: it exits and the record is untouched.
    const busy = await svc(['control', 'serve', '--port', new URL(first.url).port, '--db', join(dir, 'busy.db')]);
    assert.notEqual(busy.code, 0);
    assert.deepEqual(readRecord(recordFile), firstRecord);
    first.child.kill('SIGTERM');
    assert.equal((await first.exit).code, 0);
    assert.equal(existsSync(recordFile), false, 'the first removed its own record');
  });

  it('leaves a live first server\'s server.json alone while that server is slow to answer /health', async () => {
    const recordFile = join(home, '.svc', 'control', 'server.json');
    mkdirSync(join(home, '.svc', 'control'), { recursive: true });
    // The record's server is this process (alive by pid and start time), busy: its /health answers after 1.5 s.
    const slow = createHttpServer((_req, res) => {
      setTimeout(() => res.writeHead(200).end('{"status":"ok"}'), 1_500);
    });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    try {
      const address = slow.address();
      const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
      const record = { url, pid: process.pid, proc_start: procStart(process.pid) };
      writeFileSync(recordFile, JSON.stringify(record));
      const s = await serve([]);
      assert.deepEqual(JSON.parse(readFileSync(recordFile, 'utf8')), record);
      s.child.kill('SIGTERM');
      assert.equal((await s.exit).code, 0);
      assert.deepEqual(JSON.parse(readFileSync(recordFile, 'utf8')), record, 'the second removed no record of another');
    } finally {
      rmSync(recordFile, { force: true });
      slow.closeAllConnections();
      await new Promise((resolve) => slow.close(resolve));
    }
  });

  it('takes over a stale server.json whose pid is gone', async () => {
    const recordFile = join(home, '.svc', 'control', 'server.json');
    mkdirSync(join(home, '.svc', 'control'), { recursive: true });
    writeFileSync(recordFile, JSON.stringify({ url: `http://127.0.0.1:${await closedPort()}`, pid: 2 ** 22 + 1 }));
    const s = await serve([]);
    assert.deepEqual(readRecord(recordFile), { url: s.url, pid: s.child.pid });
    s.child.kill('SIGTERM');
    assert.equal((await s.exit).code, 0);
    assert.equal(existsSync(recordFile), false);
  });

  it('takes over a stale server.json naming its own URL, though its pid is alive (reused, or a zombie)', async () => {
    const recordFile = join(home, '.svc', 'control', 'server.json');
    mkdirSync(join(home, '.svc', 'control'), { recursive: true });
    const port = await closedPort();
    const reused = spawn('sleep', ['300']);
    children.add(reused);
    writeFileSync(recordFile, JSON.stringify({ url: `http://127.0.0.1:${port}`, pid: reused.pid }));
    const s = await serve(['--port', String(port)]);
    assert.deepEqual(readRecord(recordFile), { url: s.url, pid: s.child.pid });
    assert.doesNotMatch(s.stderr(), /another Control Plane is recorded/);
    s.child.kill('SIGTERM');
    assert.equal((await s.exit).code, 0);
    assert.equal(existsSync(recordFile), false);
    reused.kill('SIGKILL');
  });

  it('takes over an older svc\'s server.json (no start time) whose pid another program holds, though its URL answers',
    async () => {
      const recordFile = join(home, '.svc', 'control', 'server.json');
      mkdirSync(join(home, '.svc', 'control'), { recursive: true });
      // A server answering /health where the record points, and its pid now a sleep's: on a shared host, another
      // user's process could hold both, and kept this server out of the record clients find it by.
      const health = createHttpServer((_req, res) => res.writeHead(200).end('{"status":"ok"}'));
      await new Promise<void>((resolve) => health.listen(0, '127.0.0.1', resolve));
      const reused = spawn('sleep', ['300']);
      children.add(reused);
      try {
        const address = health.address();
        const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
        writeFileSync(recordFile, JSON.stringify({ url, pid: reused.pid }));
        const s = await serve([]);
        assert.deepEqual(readRecord(recordFile), { url: s.url, pid: s.child.pid });
        s.child.kill('SIGTERM');
        assert.equal((await s.exit).code, 0);
      } finally {
        reused.kill('SIGKILL');
        health.close();
      }
    });

  it('refuses a non-loopback bind without a token: exit 2 and a reason', async () => {
    const r = await svc(['control', 'serve', '--host', '0.0.0.0', '--port', '0', '--db', join(dir, 'refused.db')]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /Refusing to bind 0\.0\.0\.0 without SVC_CONTROL_TOKEN/);
    assert.doesNotMatch(r.stderr, NO_STACK);
    assert.equal(r.stdout, '');
  });

  it('starts on a non-loopback bind with SVC_CONTROL_ALLOW_INSECURE_BIND=1, warning loudly', async () => {
    const s = await serve(['--host', '0.0.0.0'], { SVC_CONTROL_ALLOW_INSECURE_BIND: '1' });
    assert.match(s.url, /^http:\/\/0\.0\.0\.0:\d+$/);
    assert.match(s.stderr(), /INSECURE/);
    const port = new URL(s.url).port;
    assert.equal((await fetch(`http://127.0.0.1:${port}/health`)).status, 200);
    s.child.kill('SIGTERM');
    assert.equal((await s.exit).code, 0);
  });
});

describe('a busy port', () => {
  /** A TCP listener on 127.0.0.1 that is not HTTP: it hangs up on every connection at once. */
  async function foreignListener(): Promise<{ port: number; close: () => Promise<void> }> {
    const server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
  }

  it('names the Control Plane already on the port, its pid, and --port 0', async () => {
    const s = await serve([]);
    const port = new URL(s.url).port;
    const r = await svc(['control', 'serve', '--port', port, '--db', join(dir, 'second.db')]);
    s.child.kill('SIGTERM');
    await s.exit;
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, `svc control: Port ${port} on 127.0.0.1 is already in use: ` +
      'a Control Plane already runs there ' +
      `(pid ${s.child.pid}, ${s.url}). Use it (svc control status, svc dashboard), stop it (kill ${s.child.pid}), ` +
      'or run this one on a free port: svc control serve --port 0\n');
  });

  it('says another program holds the port when it is not a Control Plane, and suggests --port 0', async () => {
    const other = await foreignListener();
    try {
      const r = await svc(['control', 'serve', '--port', String(other.port), '--db', join(dir, 'third.db')]);
      assert.equal(r.code, 1);
      assert.equal(r.stderr, `svc control: Port ${other.port} on 127.0.0.1 is already in use by another program. ` +
        'Stop it, or run this one on a free port: svc control serve --port 0\n');
    } finally {
      await other.close();
    }
  });

  it('tells svc trigger serve that a Control Plane holds its port, and suggests --port 0', async () => {
    const s = await serve([]);
    const port = new URL(s.url).port;
    spawnSync('git', ['init', '-q', dir]); // a served checkout must be a git work tree
    const r = await svc(['trigger', 'serve', '--port', port, '--db', join(dir, 'trigger-cp.db'), '--repo', dir]);
    s.child.kill('SIGTERM');
    await s.exit;
    assert.equal(r.code, 1);
    assert.equal(r.stderr, `svc trigger: Port ${port} on 127.0.0.1 is already in use: a Control Plane answers ` +
      `${s.url}. Stop it, or run this one on a free port: svc trigger serve --port 0\n`);
  });

  it('does not take a server that answers /health but is no Control Plane (a svc trigger serve) for one', async () => {
    // What a svc trigger serve answers: 200 on /health, 404 on /v1/openapi.json; after 1.5 s, as a busy one may.
    const other = createHttpServer((req, res) => {
      const status = req.url === '/health' ? 200 : 404;
      setTimeout(() => res.writeHead(status, { 'content-type': 'application/json' }).end('{}'), 1_500);
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const { port } = other.address() as { port: number };
    try {
      const r = await svc(['control', 'serve', '--port', String(port), '--db', join(dir, 'fourth.db')]);
      assert.equal(r.code, 1);
      assert.equal(r.stderr, `svc control: Port ${port} on 127.0.0.1 is already in use: a server that is not a ` +
        `Control Plane answers http://127.0.0.1:${port}. Stop it, or run this one on a free port: ` +
        'svc control serve --port 0\n');
    } finally {
      await new Promise<void>((resolve) => other.close(() => resolve()));
    }
  });

  it('gives svc trigger serve the same next step', async () => {
    const other = await foreignListener();
    try {
      spawnSync('git', ['init', '-q', dir]); // a served checkout must be a git work tree
      const args = ['--port', String(other.port), '--db', join(dir, 'trigger.db'), '--repo', dir];
      const r = await svc(['trigger', 'serve', ...args]);
      assert.equal(r.code, 1);
      // The real error is all it says: warnings about routes without secrets come only once a start succeeded.
      assert.equal(r.stderr, `svc trigger: Port ${other.port} on 127.0.0.1 is already in use ` +
        'by another program. Stop it, or run this one on a free port: svc trigger serve --port 0\n');
      assert.doesNotMatch(r.stderr, NO_STACK);
    } finally {
      await other.close();
    }
  });
});

describe('svc control status', () => {
  let server: Served;
  before(async () => {
    server = await serve([], { SVC_CONTROL_TOKEN: 'status-token' });
  });
  after(async () => {
    server.child.kill('SIGTERM');
    await server.exit;
  });

  it('reports the server found through server.json and its run count', async () => {
    const r = await svc(['control', 'status'], { SVC_CONTROL_TOKEN: 'status-token' });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `reachable ${server.url} — 0 runs\n`);
  });

  it('prints one JSON object with --json', async () => {
    const r = await svc(['control', 'status', '--json'], { SVC_CONTROL_URL: server.url, SVC_CONTROL_TOKEN: 'status-token' });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { reachable: true, url: server.url, via: 'SVC_CONTROL_URL', runs: 0 });
  });

  it('exits 1 and says the token is wrong on a 401, without printing the token', async () => {
    const r = await svc(['control', 'status'], { SVC_CONTROL_URL: server.url, SVC_CONTROL_TOKEN: 'not-the-token' });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /refused the token svc sent \(401 unauthorized\)/);
    assert.equal(r.stderr.includes('not-the-token'), false);
    const missing = await svc(['control', 'status'], { SVC_CONTROL_URL: server.url });
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /set SVC_CONTROL_TOKEN/);
  });

  it('exits 1 with a clear message when nothing answers', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const r = await svc(['control', 'status'], { SVC_CONTROL_URL: url });
    assert.equal(r.code, 1);
    const hint = 'start the server SVC_CONTROL_URL names, or unset SVC_CONTROL_URL to use a local one';
    const refused = `(connect ECONNREFUSED ${url.slice('http://'.length)})`;
    assert.equal(r.stderr, `svc control: no Control Plane answered at ${url} ${refused}: ${hint}\n`);
    const j = await svc(['control', 'status', '--json'], { SVC_CONTROL_URL: url });
    assert.equal(j.code, 1);
    assert.equal(JSON.parse(j.stdout).reachable, false);
  });

  it('falls back to SVC_CONTROL_PORT on 127.0.0.1 when there is no URL and no live server.json', async () => {
    const port = await closedPort();
    const r = await svc(['control', 'status'], { HOME: join(dir, 'empty-home'), SVC_CONTROL_PORT: String(port) });
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`http://127\\.0\\.0\\.1:${port}`));
    const hint = ': start one with "svc control serve" (in this terminal) or "svc dashboard" (in the background), '
      + 'or set SVC_CONTROL_URL to where yours listens\n';
    assert.ok(r.stderr.endsWith(hint), r.stderr);
  });
});

/** A git project NAME holding one ended run ID in .svc/runs, as svc start leaves it. */
function projectWithRun(name: string, id: string): { project: string; run: string; at: string } {
  const project = join(dir, name);
  const run = join(project, '.svc', 'runs', id);
  mkdirSync(run, { recursive: true });
  spawnSync('git', ['init', '-q', project]);
  const at = '2026-02-01T10:00:00.000Z';
  writeFileSync(join(run, 'state.json'), JSON.stringify({ source: 'local', run: id, status: 'succeeded',
    started_at: at, ended_at: at, updated_at: at, repo: 'acme/api' }));
  return { project, run, at };
}

describe('svc control import', () => {
  let server: Served;
  before(async () => {
    server = await serve([], { SVC_CONTROL_TOKEN: 'import-token' });
  });
  after(async () => {
    server.child.kill('SIGTERM');
    await server.exit;
  });
  const env = () => ({ SVC_CONTROL_URL: server.url, SVC_CONTROL_TOKEN: 'import-token' });

  it('registers the current directory (a relative DIR made absolute) and lists a half-written run folder it skipped', async () => {
    const project = join(dir, 'import-project');
    mkdirSync(join(project, '.svc', 'runs', 'r01half'), { recursive: true });
    spawnSync('git', ['init', '-q', project]);
    const here = await runChild(process.execPath, [CLI, 'control', 'import'], { cwd: project, env: baseEnv(env()) });
    assert.equal(here.code, 0, here.stderr);
    assert.equal(here.stdout, `Imported ${project} into the Control Plane at ${server.url}: 0 runs, 0 events, `
      + '0 artifacts; runs may now be started there\n  skipped r01half/state.json: is missing\n');
    const relative = await runChild(process.execPath, [CLI, 'control', 'import', 'import-project', '--json'],
      { cwd: dir, env: baseEnv(env()) });
    assert.equal(relative.code, 0, relative.stderr);
    assert.deepEqual(JSON.parse(relative.stdout).skipped, [{ entry: 'r01half/state.json', reason: 'is missing' }]);
    const projects = await fetch(`${server.url}/v1/projects`, { headers: { authorization: 'Bearer import-token' } });
    assert.deepEqual(((await projects.json()) as { items: { path: string }[] }).items.map((p) => p.path), [project]);
  });

  it('counts the events the Control Plane already had apart from those the import stored', async () => {
    const { project, run, at } = projectWithRun('import-shipped', 'r01shipped');
    writeFileSync(join(run, 'events.jsonl'), `${JSON.stringify({ seq: 1, ts: at, kind: 'run.status',
      data: { from: null, to: 'queued' } })}\n`);
    const first = await svc(['control', 'import', project], env());
    assert.match(first.stdout, /: 1 run, 1 event, 0 artifacts;/);
    const again = await svc(['control', 'import', project], env());
    assert.match(again.stdout, /: 1 run, 0 events \(and 1 it already had\), 0 artifacts;/);
  });

  it('exits 2 with the server\'s reason for a folder with no repository or runs, and 1 on a 401', async () => {
    const empty = join(dir, 'import-empty');
    mkdirSync(empty, { recursive: true });
    const r = await svc(['control', 'import', empty], env());
    assert.equal(r.code, 2);
    assert.equal(r.stderr, `svc control: Not imported: the Control Plane at ${server.url} answered 400 invalid_param `
      + '(Field "path" is neither a git repository nor a folder with .svc/runs)\n');
    const denied = await svc(['control', 'import', empty], { SVC_CONTROL_URL: server.url });
    assert.equal(denied.code, 1);
    assert.match(denied.stderr, /needs a token \(401 unauthorized\): set SVC_CONTROL_TOKEN/);
  });

  it('exits 2 naming a DIR that is not a folder (or empty) before it asks the Control Plane anything', async () => {
    const file = join(dir, 'import-file');
    writeFileSync(file, 'not a folder\n');
    // Nothing listens here: a request would exit 1 (unreachable), not 2.
    const nowhere = { SVC_CONTROL_URL: `http://127.0.0.1:${await closedPort()}` };
    for (const given of [file, join(dir, 'import-missing'), '']) {
      const r = await svc(['control', 'import', given], nowhere);
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stderr, `svc control: Not imported: "${given}" is not a directory; give the project's folder\n`);
    }
  });

  it('imports the project of a run folder (or of its .svc/runs, or .svc) it is given, and says so', async () => {
    const { project, run } = projectWithRun('import-of-run', 'r01given');
    for (const given of [run, join(project, '.svc', 'runs'), join(project, '.svc')]) {
      const r = await svc(['control', 'import', given], env());
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, new RegExp(`^Imported ${project} \\(the project of ${given}\\) into the Control Plane`));
    }
    const projects = await fetch(`${server.url}/v1/projects`, { headers: { authorization: 'Bearer import-token' } });
    const paths = ((await projects.json()) as { items: { path: string }[] }).items.map((p) => p.path);
    assert.ok(paths.includes(project), paths.join(' '));
  });

  it('imports a project named .svc as itself, and the project of a run folder reached through a link', async () => {
    const project = join(dir, 'import-outer', '.svc');
    mkdirSync(project, { recursive: true });
    spawnSync('git', ['init', '-q', project]);
    for (const args of [[], [project]]) {
      const r = await runChild(process.execPath, [CLI, 'control', 'import', ...args, '--json'],
        { cwd: project, env: baseEnv(env()) });
      assert.equal(r.code, 0, r.stderr);
    }
    const { project: linked, run } = projectWithRun('import-linked', 'r01linked');
    const link = join(dir, 'import-latest-run');
    symlinkSync(run, link);
    const r = await svc(['control', 'import', link], env());
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^Imported ${linked} \\(the project of ${link}\\) into the Control Plane`));
    const projects = await fetch(`${server.url}/v1/projects`, { headers: { authorization: 'Bearer import-token' } });
    const paths = ((await projects.json()) as { items: { path: string }[] }).items.map((p) => p.path);
    assert.ok(paths.includes(project) && paths.includes(linked) && !paths.includes(join(dir, 'import-outer')),
      paths.join(' '));
  });

  it('imports the work tree the current directory is in by default, as svc start finds it', async () => {
    const project = join(dir, 'import-nested');
    mkdirSync(join(project, 'src', 'deep'), { recursive: true });
    spawnSync('git', ['init', '-q', project]);
    const r = await runChild(process.execPath, [CLI, 'control', 'import', '--json'],
      { cwd: join(project, 'src', 'deep'), env: baseEnv(env()) });
    assert.equal(r.code, 0, r.stderr);
    const projects = await fetch(`${server.url}/v1/projects`, { headers: { authorization: 'Bearer import-token' } });
    const paths = ((await projects.json()) as { items: { path: string }[] }).items.map((p) => p.path);
    assert.ok(paths.includes(project), paths.join(' '));
  });
});
