import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { missingServerFlags, SERVER_NODE_FLAGS, serverNodeFlags } from '../../src/cli/node-setup.ts';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

describe('server V8 flags', () => {
  const dirs: string[] = [];
  const children: ChildProcess[] = [];
  after(() => {
    for (const c of children) c.kill('SIGKILL');
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('asks for each server flag unless the command line or NODE_OPTIONS already sets it', () => {
    const saver = ['--min-semi-space-size=4', '--memory-saver-mode', '--no-allocation-site-pretenuring'];
    assert.deepEqual(missingServerFlags([], undefined), [...SERVER_NODE_FLAGS]);
    assert.deepEqual(missingServerFlags(['--max-semi-space-size=16'], undefined), saver);
    assert.deepEqual(missingServerFlags(['--max_semi_space_size=2'], undefined), saver);
    assert.deepEqual(missingServerFlags([], '--trace-warnings  --max-semi-space-size=4'), saver);
    assert.deepEqual(missingServerFlags(['--cpu-prof'], '--trace-warnings'), [...SERVER_NODE_FLAGS]);
    // An operator's "off" is a value too: the re-exec must not turn the mode back on after it.
    const noSaver = ['--max-semi-space-size=8', '--min-semi-space-size=4', '--no-allocation-site-pretenuring'];
    assert.deepEqual(missingServerFlags(['--no-memory-saver-mode'], undefined), noSaver);
    assert.deepEqual(missingServerFlags(['--no_memory_saver_mode', '--max-semi-space-size=4'], undefined),
      ['--min-semi-space-size=4', '--no-allocation-site-pretenuring']);
    assert.deepEqual(missingServerFlags(['--nomemory-saver-mode', '--min-semi-space-size=1'], undefined),
      ['--max-semi-space-size=8', '--no-allocation-site-pretenuring']);
    assert.deepEqual(missingServerFlags(['--allocation-site-pretenuring'], undefined),
      ['--max-semi-space-size=8', '--min-semi-space-size=4', '--memory-saver-mode']);
  });

  it('asks only for flags the running node accepts, and no memory saver before Node 24', () => {
    // A V8 without a flag refuses to start, and after the re-exec there is nothing left to fall back to.
    const run = spawnSync(process.execPath, [...SERVER_NODE_FLAGS, '-e', '0'], { encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(serverNodeFlags(22), ['--max-semi-space-size=8']);
    const flags24 = [
      '--max-semi-space-size=8', '--min-semi-space-size=4', '--memory-saver-mode', '--no-allocation-site-pretenuring',
    ];
    assert.deepEqual(serverNodeFlags(24), flags24);
  });

  it('keeps a young generation of 4 MB under memory saver, which alone starts it at 1 MB', () => {
    // Memory saver's 1 MB young generation made the fan-in scavenge ~25 times a second and promote into old space
    // what requests still held, mark-compacted every ~0.5 s (docs/bench-history.md, "The fan-in: the young generation
    // under memory saver").
    const newSpace = 'process.stdout.write(String(require("v8").getHeapSpaceStatistics()' +
      '.find((s) => s.space_name === "new_space").space_size))';
    const run = spawnSync(process.execPath, [...SERVER_NODE_FLAGS, '-e', newSpace], { encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.ok(Number(run.stdout) >= 4 * 1024 * 1024, run.stdout);
  });

  it('leaves no code site allocating into old space after a bulk batch', { timeout: 60_000 }, () => {
    // A batch whose rows all live until it is done makes V8 pretenure their allocation sites; the short-lived rows
    // the same code makes afterwards then filled old space, which memory saver collects at a small limit: a
    // worked-in server mark-compacted every ~0.5 s under the fan-in (docs/bench.md, "A worked-in server: pretenuring").
    const script = `
      const { PerformanceObserver, constants } = require('node:perf_hooks');
      let majors = 0;
      new PerformanceObserver((list) => {
        for (const e of list.getEntries()) if (e.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majors++;
      }).observe({ entryTypes: ['gc'] });
      function row(i) { return { id: i, tags: [i, i + 1], data: { seq: i } }; }
      for (let r = 0; r < 30; r++) { const batch = []; for (let i = 0; i < 50000; i++) batch.push(row(i)); }
      setTimeout(() => {
        majors = 0;
        const ring = new Array(1024);
        for (let i = 0; i < 1e6; i++) ring[i & 1023] = row(i);
        setTimeout(() => process.stdout.write(String(majors)), 50);
      }, 50);`;
    // With pretenuring most processes mark-compact 13-43 times while the short-lived rows are made, but some do not
    // (V8 decides when its background compiler finishes): four processes, so the old flags pass ~1.5 % of the time.
    // Without it: 0 or 1 each.
    for (let round = 0; round < 4; round++) {
      const run = spawnSync(process.execPath, [...SERVER_NODE_FLAGS, '-e', script], { encoding: 'utf8' });
      assert.equal(run.status, 0, run.stderr);
      assert.ok(Number(run.stdout) <= 3, `mark-compacts: ${run.stdout} (process ${round + 1} of 4)`);
    }
  });

  /** Starts `svc control serve` and returns the argv of the process once it prints its URL (same pid throughout). */
  function serveArgv(env: NodeJS.ProcessEnv): Promise<{ argv: string[]; child: ChildProcess }> {
    const dir = mkdtempSync(join(tmpdir(), 'svc-'));
    dirs.push(dir);
    const child = spawn(process.execPath, [CLI, 'control', 'serve', '--port', '0', '--db', join(dir, 'c.db')], {
      env: { PATH: process.env.PATH, HOME: dir, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    return new Promise((resolve, reject) => {
      let out = '';
      let err = '';
      child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      child.once('exit', (code) => reject(new Error(`serve exited ${code}: ${err}`)));
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (!/http:\/\/\S+/.test(out)) return;
        const argv = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
        child.removeAllListeners('exit');
        child.kill('SIGTERM');
        resolve({ argv, child });
      });
    });
  }

  it('serves with its V8 flags in its own process when started without them', { skip: process.platform !== 'linux' }, async () => {
    const { argv } = await serveArgv({});
    assert.ok(argv.includes('--max-semi-space-size=8') && argv.includes('--memory-saver-mode'), argv.join(' '));
    assert.ok(argv.includes(CLI) && argv.slice(-6).join(' ').startsWith('control serve'), argv.join(' '));
  });

  it('keeps an operator-chosen value from NODE_OPTIONS and adds only the missing flag', { skip: process.platform !== 'linux' }, async () => {
    const { argv } = await serveArgv({ NODE_OPTIONS: '--max-semi-space-size=16' });
    assert.ok(!argv.some((a) => a.startsWith('--max-semi-space-size')), argv.join(' '));
    assert.ok(argv.includes('--memory-saver-mode'), argv.join(' '));
  });
});
