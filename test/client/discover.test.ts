import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn, spawnSync, type SpawnOptions } from 'node:child_process';
import { readServerRecordFile, serverRecordFile } from '../../src/client/server-record.ts';
import { discoverControlUrl, isOwnControlServe } from '../../src/engine/control-url.ts';

const homes: string[] = [];
function home(record?: unknown): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-'));
  homes.push(dir);
  if (record !== undefined) {
    mkdirSync(join(dir, '.svc', 'control'), { recursive: true });
    writeFileSync(join(dir, '.svc', 'control', 'server.json'), typeof record === 'string' ? record : JSON.stringify(record));
  }
  return dir;
}

function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
  return Number(child.stdout.toString());
}

after(() => {
  for (const dir of homes) rmSync(dir, { recursive: true, force: true });
});

describe('discoverControlUrl', () => {
  it('prefers SVC_CONTROL_URL over a live server.json and strips a trailing slash', () => {
    const env = { HOME: home({ url: 'http://127.0.0.1:5000', pid: process.pid }), SVC_CONTROL_URL: 'https://cp.example:8443/' };
    assert.deepEqual(discoverControlUrl(env), { url: 'https://cp.example:8443', via: 'SVC_CONTROL_URL' });
  });

  it('takes the SVC_CONTROL_URL forms people set: spaces from an env file, any case, IPv6, a path, a compose name',
    () => {
      const forms: Array<[string, string]> = [
        [' http://127.0.0.1:47821/ \r', 'http://127.0.0.1:47821'], ['HTTP://LOCALHOST:47821', 'HTTP://LOCALHOST:47821'],
        ['http://[::1]:47821', 'http://[::1]:47821'], ['https://cp.example/svc/', 'https://cp.example/svc'],
        ['http://svc_control:47821', 'http://svc_control:47821'],
      ];
      for (const [set, url] of forms) {
        assert.deepEqual(discoverControlUrl({ HOME: home(), SVC_CONTROL_URL: set }), { url, via: 'SVC_CONTROL_URL' });
      }
    });

  it('uses server.json while its pid has the start time it recorded', () => {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const started = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    const env = { HOME: home({ url: 'http://127.0.0.1:5000', pid: process.pid, proc_start: started }) };
    assert.deepEqual(discoverControlUrl(env), { url: 'http://127.0.0.1:5000', via: 'server.json' });
  });

  it('ignores server.json whose pid is gone and falls back to the default port', () => {
    const env = { HOME: home({ url: 'http://127.0.0.1:5000', pid: deadPid() }) };
    assert.deepEqual(discoverControlUrl(env), { url: 'http://127.0.0.1:47821', via: 'default' });
  });

  it('honours SVC_CONTROL_PORT for the default and refuses a bad one naming it, never falling back to 47821', () => {
    assert.equal(discoverControlUrl({ HOME: home(), SVC_CONTROL_PORT: '5123' }).url, 'http://127.0.0.1:5123');
    for (const bad of ['abc', '0', '70000', '8080x']) {
      assert.throws(() => discoverControlUrl({ HOME: home(), SVC_CONTROL_PORT: bad }), /SVC_CONTROL_PORT/, bad);
    }
  });
});

const procs: ReturnType<typeof spawn>[] = [];
after(() => {
  for (const child of procs) child.kill('SIGKILL');
});

/** A shell whose command line reads `sh -c read svc ARGS…` (its builtin read waits on stdin: no child to leave). */
function lookalike(args: string[], options: SpawnOptions = {}) {
  const child = spawn('sh', ['-c', 'read line', 'svc', ...args], { ...options, stdio: ['pipe', 'ignore', 'ignore'] });
  procs.push(child);
  return child.pid!;
}

describe('isOwnControlServe: what vouches for a server.json without a start time', () => {
  it("is this user's process whose command line says control serve, a --verbose anywhere aside", () => {
    assert.equal(isOwnControlServe(lookalike(['control', 'serve'])), true);
    assert.equal(isOwnControlServe(lookalike(['control', 'serve', '--port', '0'])), true);
    assert.equal(isOwnControlServe(lookalike(['--verbose', 'control', '--verbose', 'serve'])), true);
    assert.equal(isOwnControlServe(lookalike(['control', 'status'])), false);
    assert.equal(isOwnControlServe(lookalike(['serve', 'control'])), false);
    assert.equal(isOwnControlServe(deadPid()), false);
  });

  it("is never another user's control serve (root starts one as nobody)",
    { skip: process.getuid?.() === 0 ? false : 'only root can start a process as another user' }, () => {
      assert.equal(isOwnControlServe(lookalike(['control', 'serve'], { uid: 65534, gid: 65534 })), false);
    });
});

describe('readServerRecordFile', () => {
  it('returns null for a missing, malformed or mistyped record', () => {
    assert.equal(readServerRecordFile(serverRecordFile({ HOME: home() })), null);
    assert.equal(readServerRecordFile(serverRecordFile({ HOME: home('{not json') })), null);
    assert.equal(readServerRecordFile(serverRecordFile({ HOME: home({ url: 1, pid: 2 }) })), null);
    assert.equal(readServerRecordFile(serverRecordFile({ HOME: home({ url: 'x', pid: -1 }) })), null);
  });

  it('reads the {url,pid} record main.ts writes', () => {
    const env = { HOME: home({ url: 'http://127.0.0.1:1', pid: 42 }) };
    assert.deepEqual(readServerRecordFile(serverRecordFile(env)), { url: 'http://127.0.0.1:1', pid: 42 });
  });
});
