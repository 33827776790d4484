// `svc` on a machine whose system Node is older than svc needs: a global `svc` (npm link) starts on
// the system Node, which hands the command to the Node the checkout pins. Run from another folder, as a user would.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runChild } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { readServerRecordFile } from '../../src/client/server-record.ts';
import { isPidAlive } from '../../src/proc-stat.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');

/** A Node on this machine older than 22.13 (the system one here is 20), or null. */
function oldNode(): string | null {
  for (const path of ['/usr/bin/node', '/usr/local/bin/node', '/bin/node']) {
    if (!existsSync(path)) continue;
    const version = execFileSync(path, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
    const [major = 0, minor = 0] = version.split('.').map(Number);
    if (major < 22 || (major === 22 && minor < 13)) return path;
  }
  return null;
}

const old = oldNode();

describe('svc started by an older system Node', { skip: old ? false : 'no Node older than 22.13 on this machine' }, () => {
  it('runs on the pinned Node from any folder, with the exit status and output of the real command', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-old-node-'));
    try {
      const version = await runChild(old!, [CLI, '--version'], { cwd: dir, env: { PATH: process.env.PATH, HOME: dir } });
      assert.equal(version.code, 0, version.stderr);
      assert.match(version.stdout, /^\d+\.\d+\.\d+\n$/);
      const unknown = await runChild(old!, [CLI, 'no-such-command'], { cwd: dir, env: { PATH: process.env.PATH, HOME: dir } });
      assert.equal(unknown.code, 2);
      assert.match(unknown.stderr, /no-such-command/);
      assert.doesNotMatch(unknown.stderr, /needs Node\.js/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  /** `svc control serve` on port 0 through the launcher; resolves with the launcher and the real server's pid. */
  async function launchServer(home: string) {
    const launcher = spawn(old!, [CLI, 'control', 'serve', '--port', '0'], {
      cwd: home, env: { PATH: process.env.PATH, HOME: home }, stdio: ['ignore', 'ignore', 'pipe'],
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      launcher.once('exit', (code, signal) => resolve({ code, signal }));
    });
    const record = await waitFor(() => readServerRecordFile(join(home, '.svc', 'control', 'server.json')),
      'the Control Plane to write server.json');
    assert.notEqual(record.pid, launcher.pid, 'the server runs in the pinned Node, a child of the launcher');
    return { launcher, exited, serverPid: record.pid };
  }

  it('hands SIGTERM to the server it started and exits with its status', async () => {
    const home = mkdtempSync(join(tmpdir(), 'svc-old-node-'));
    try {
      const { launcher, exited, serverPid } = await launchServer(home);
      launcher.kill('SIGTERM');
      assert.deepEqual(await exited, { code: 0, signal: null });
      await waitFor(() => !isPidAlive(serverPid), 'the server to end with its launcher');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it('never leaves the server running when the launcher itself is killed outright', async () => {
    const home = mkdtempSync(join(tmpdir(), 'svc-old-node-'));
    try {
      const { launcher, exited, serverPid } = await launchServer(home);
      launcher.kill('SIGKILL');
      assert.equal((await exited).signal, 'SIGKILL');
      await waitFor(() => !isPidAlive(serverPid), 'the orphaned server to notice and stop');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
