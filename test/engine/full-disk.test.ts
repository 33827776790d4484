// A run folder on a full disk (a 2 MiB tmpfs, mounted as root): a write that cannot complete leaves what was there
// whole, and what is written once space is back reads as svc wrote it.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openEventLog, writeState } from '../../src/engine/run-state.ts';
import { openRunContext } from '../../src/engine/run-context.ts';
import { stateFor } from './fixtures.ts';

const mount = mkdtempSync(join(tmpdir(), 'svc-full-disk-'));
const mounted = process.getuid?.() === 0 &&
  spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', mount]).status === 0;
const NOT_ROOT = mounted ? false : 'needs root to mount a small tmpfs';

/** Fills the tmpfs to its last byte; the returned function frees it again. */
function fillDisk(): () => void {
  const fill = join(mount, 'fill');
  const block = Buffer.alloc(4096);
  try {
    for (;;) writeFileSync(fill, block, { flag: 'a' });
  } catch (err) {
    assert.equal((err as NodeJS.ErrnoException).code, 'ENOSPC');
  }
  return () => rmSync(fill, { force: true });
}

describe('a run folder on a full disk', { skip: NOT_ROOT }, () => {
  let repo: string;

  before(() => {
    repo = join(mount, 'repo');
  });
  after(() => {
    spawnSync('umount', ['--lazy', mount]);
    rmSync(mount, { recursive: true, force: true });
  });

  function runFolder(run: string): string {
    const dir = join(repo, '.svc', 'runs', run);
    mkdirSync(join(dir, 'artifacts'), { recursive: true });
    writeState(dir, stateFor(repo, run));
    return dir;
  }

  it('keeps the next event whole after an event that did not fit (events.jsonl)', () => {
    const dir = runFolder('rtorn');
    const log = openEventLog(dir);
    log.append('log', { stream: 'svc', text: 'first' });
    const free = fillDisk();
    // Larger than what is left of the file's last page: part of its line is written, then ENOSPC.
    assert.throws(() => log.append('log', { stream: 'svc', text: 'x'.repeat(64 * 1024) }), /ENOSPC/);
    free();
    log.append('log', { stream: 'svc', text: 'after' });
    log.close();
    // And a log opened again (a resume) after a torn last line.
    const again = fillDisk();
    const reopened = openEventLog(dir);
    assert.throws(() => reopened.append('log', { stream: 'svc', text: 'y'.repeat(64 * 1024) }), /ENOSPC/);
    reopened.close();
    again();
    const resumed = openEventLog(dir);
    resumed.append('log', { stream: 'svc', text: 'resumed' });
    resumed.close();
    const texts: string[] = [];
    for (const line of readFileSync(join(dir, 'events.jsonl'), 'utf8').split('\n')) {
      try {
        texts.push((JSON.parse(line) as { data: { text: string } }).data.text);
      } catch {
        // the torn lines
      }
    }
    assert.deepEqual(texts, ['first', 'after', 'resumed']);
  });

  it('leaves the receipt as it was when a new one cannot be written (a --verify on a full disk)', async () => {
    const dir = runFolder('rreceipt');
    const ctx = openRunContext(dir, { HOME: mount, PATH: process.env.PATH }, { ship: false });
    const old = JSON.stringify({ verdict: 'verified', pad: 'p'.repeat(3000) }, null, 2) + '\n';
    ctx.saveArtifact('receipt.json', old);
    const free = fillDisk();
    try {
      const fresh = JSON.stringify({ verdict: 'failed', pad: 'q'.repeat(64 * 1024) });
      assert.throws(() => ctx.saveArtifact('receipt.json', fresh), /ENOSPC/);
    } finally {
      free();
    }
    await ctx.close();
    const kept = readFileSync(join(dir, 'artifacts', 'receipt.json'), 'utf8');
    assert.ok(kept === old, `the receipt is now ${kept.length} bytes of ${JSON.stringify(kept.slice(0, 40))}…`);
  });
});
