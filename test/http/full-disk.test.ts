// The Control Plane's answer folder on a full disk (a 1 MiB tmpfs, mounted as root): an answer is refused 503 with
// Retry-After and leaves nothing behind (no event, no file), and the same answer is taken once there is space.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestControl, seedRuns, type TestControl } from '../helpers/control-server.ts';

const mount = mkdtempSync(join(tmpdir(), 'svc-control-full-'));
const mounted = process.getuid?.() === 0 &&
  spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', mount]).status === 0;

describe('an answer on a full disk', { skip: mounted ? false : 'needs root to mount a small tmpfs' }, () => {
  let cp: TestControl;
  before(async () => {
    cp = await startTestControl({ settings: { answerDir: join(mount, 'answers') } });
  });
  after(async () => {
    await cp.close();
    spawnSync('umount', ['--lazy', mount]);
    rmSync(mount, { recursive: true, force: true });
  });

  it('is refused 503 unavailable, changing nothing, and taken once the disk has space', async () => {
    const source = cp.deps.settings.source;
    seedRuns(cp.deps, 1, { run: 'r-full', status: 'blocked', repo_path: cp.dir }, source);
    const path = `/v1/runs/${source}/r-full/answer`;
    const fill = join(mount, 'fill');
    try {
      for (;;) writeFileSync(fill, Buffer.alloc(4096), { flag: 'a' });
    } catch {
      // ENOSPC: the disk is full.
    }
    const answer = { answer: 'x'.repeat(8000) };
    const refused = await cp.request('POST', path, { body: answer });
    assert.equal(refused.status, 503, refused.text);
    assert.equal((refused.json as { error: { code: string } }).error.code, 'unavailable');
    assert.equal(refused.headers.get('retry-after'), '60');
    const answers = () => cp.deps.stores.events.listAll({ after: 0, limit: 100, source, run: 'r-full' })
      .filter((e) => e.kind === 'answer').length;
    assert.equal(answers(), 0, 'the refused answer left no event');
    assert.deepEqual(readdirSync(join(mount, 'answers', source)), [], 'nor a file, whole or partial');
    rmSync(fill);
    assert.equal((await cp.request('POST', path, { body: answer })).status, 202);
    assert.equal(answers(), 1);
    assert.equal(existsSync(join(mount, 'answers', source, 'r-full.json')), true);
  });
});
