// `svc` on a machine whose system Node is older than svc needs (issue 23 item 1): a global `svc` (npm link) starts on
// the system Node, which hands the command to the Node the checkout pins. Run from another folder, as a user would.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runChild } from '../helpers/run-child.ts';

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
});
