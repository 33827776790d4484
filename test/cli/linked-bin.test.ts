// `npm link` makes the global `svc` a link to dist/cli.js, run by its shebang: every build must leave it executable.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runChild } from '../helpers/run-child.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');

describe('the built svc as a linked command', () => {
  it('runs by its own path after a build, as `npm link` runs it', async () => {
    const home = mkdtempSync(join(tmpdir(), 'svc-linked-'));
    try {
      const r = await runChild(CLI, ['--version'], { cwd: home, env: { PATH: process.env.PATH, HOME: home } });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^\d+\.\d+\.\d+\n$/);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
