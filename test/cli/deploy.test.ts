import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CLI = join(import.meta.dirname, '../../dist/cli.js');

describe('svc deploy outside a git repository', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  function svc(args: string[]): Promise<{ code: number | null; stderr: string }> {
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [CLI, 'deploy', ...args], { cwd: dir, env: { PATH: process.env.PATH ?? '', HOME: dir, GIT_CEILING_DIRECTORIES: dir } });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c));
      child.on('close', (code) => resolve({ code, stderr }));
    });
  }

  it('exits 1 naming the folder: a runtime condition, not a usage mistake', async () => {
    for (const args of [['record', '--sha', 'abcdef1234567', '--health', 'ok'], ['last']]) {
      const r = await svc(args);
      assert.equal(r.code, 1, args.join(' '));
      assert.match(r.stderr, /^svc deploy: Not a git repository: "/, args.join(' '));
    }
  });

  it('still exits 2 for a usage mistake, checked before the repository', async () => {
    assert.equal((await svc(['record', '--sha', 'abcdef1234567'])).code, 2);
    assert.equal((await svc(['explode'])).code, 2);
  });
});
