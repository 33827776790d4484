// A setting with a value svc cannot use stops a server before it listens, with exit status 2 (the person must change
// what they set) and the variable named — wherever in start-up the setting happens to be read.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runChild } from '../helpers/run-child.ts';
import { serve, stop, type Served } from '../helpers/serve-cli.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');

describe('a bad setting', () => {
  const cases: Array<[string, string[], string]> = [
    ['control', ['control', 'serve', '--port', '0'], 'SVC_CONTROL_MAX_CONNECTIONS'],
    ['control', ['control', 'serve', '--port', '0'], 'SVC_CONTROL_MAX_STREAMS'],
    ['trigger', ['trigger', 'serve', '--port', '0'], 'SVC_TRIGGER_MAX_CONNECTIONS'],
    ['trigger', ['trigger', 'serve', '--port', '0'], 'SVC_TRIGGER_CONCURRENCY'],
    ['control', ['control', 'serve'], 'SVC_CONTROL_PORT'],
    ['control', ['control', 'serve', '--port', '0'], 'SVC_CONTROL_ALLOW_INSECURE_BIND'],
    ['trigger', ['trigger', 'serve', '--port', '0'], 'SVC_TRIGGER_EXECUTOR'],
    ['trigger', ['trigger', 'serve', '--port', '0'], 'SVC_TRIGGER_DEDUPE_DAYS'],
    // Read by every run it starts (to ship to the Control Plane), where a bad value would fail each one.
    ['trigger', ['trigger', 'serve', '--port', '0'], 'SVC_CONTROL_PORT'],
  ];
  for (const [server, args, name] of cases) {
    it(`${name}=x stops the ${server} server with exit 2, naming the variable`, async () => {
      const home = mkdtempSync(join(tmpdir(), 'svc-bad-setting-'));
      try {
        // The trigger server serves its current directory, which must be a git work tree.
        spawnSync('git', ['init', '-q', home]);
        const env = { PATH: process.env.PATH, HOME: home, [name]: 'x' };
        const r = await runChild(process.execPath, [CLI, ...args], { cwd: home, env });
        assert.equal(r.code, 2, r.stderr);
        assert.match(r.stderr, new RegExp(name));
      } finally {
        rmSync(home, { recursive: true, force: true });
      }
    });
  }

  it('SVC_CONTROL_PORT=x stops a client (svc runs) and svc start, before a run is made, with exit 2', async () => {
    const home = mkdtempSync(join(tmpdir(), 'svc-bad-setting-'));
    try {
      spawnSync('git', ['init', '-q', home]);
      const env = { PATH: process.env.PATH, HOME: home, SVC_CONTROL_PORT: 'x' };
      for (const args of [['runs'], ['start', '--brief', 'x']]) {
        const r = await runChild(process.execPath, [CLI, ...args], { cwd: home, env });
        assert.equal(r.code, 2, r.stderr);
        assert.match(r.stderr, /SVC_CONTROL_PORT/);
      }
      assert.equal(existsSync(join(home, '.svc', 'runs')), false, 'no run was made');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it('SVC_CONTROL_PORT=x stops a client with exit 2 even where a live server.json names the server', async () => {
    const home = mkdtempSync(join(tmpdir(), 'svc-bad-setting-'));
    let control: Served | undefined;
    try {
      control = await serve(['control', 'serve', '--port', '0'], { PATH: process.env.PATH, HOME: home });
      const env = { PATH: process.env.PATH, HOME: home };
      const found = await runChild(process.execPath, [CLI, 'control', 'status'], { cwd: home, env });
      assert.equal(found.code, 0, found.stderr);
      const bad = { ...env, SVC_CONTROL_PORT: 'x' };
      const r = await runChild(process.execPath, [CLI, 'control', 'status'], { cwd: home, env: bad });
      assert.equal(r.code, 2, r.stdout + r.stderr);
      assert.match(r.stderr, /SVC_CONTROL_PORT must be/);
    } finally {
      await stop(control);
      rmSync(home, { recursive: true, force: true });
    }
  });
});
