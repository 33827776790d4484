// Which host folders limits.disk_mb walks (sandbox.ts watchedLimits): every folder the sandbox binds writable, each
// byte counted once however the folders nest.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { watchedLimits } from '../../src/engine/sandbox.ts';
import { DEFAULT_LIMITS } from '../../src/engine/policy.ts';
import type { SandboxPlan } from '../../src/spawn/bwrap-argv.ts';

const files = (io: string) => ({
  taskFile: `${io}/prompt.md`, answerFile: `${io}/answer/answer.txt`, questionFile: `${io}/ask/question.txt`,
  ioDir: io, askDir: `${io}/ask`, answerDir: `${io}/answer`,
});

function planWith(writable: string[], homeMounts: SandboxPlan['homeMounts'] = []): { plan: SandboxPlan } {
  return { plan: { readable: [], writable, protect: [], hidden: [], protocolReadable: [], protocolWritable: [],
    home: '/h', homeMounts, cwd: writable[0]!, limits: { processes: 1, memoryBytes: 1, fileBytes: 1, tmpBytes: 1 },
    network: 'none' } };
}

describe('the folders limits.disk_mb counts', () => {
  it('are the worktree, the question and answer folders, and each folder declared writable for the provider', () => {
    const watched = watchedLimits(DEFAULT_LIMITS, '/w/tree', files('/w/runs/r/io'),
      planWith(['/w/tree', '/h/.cache/tool', '/w/tree/inside']));
    assert.deepEqual(watched.diskDirs, ['/w/tree', '/w/runs/r/io/ask', '/w/runs/r/io/answer', '/h/.cache/tool']);
    assert.match(watched.diskWhat, /the provider's folders/);
  });

  it('walk a declared folder that holds the worktree and the run folder once, not the worktree again', () => {
    const watched = watchedLimits(DEFAULT_LIMITS, '/srv/work/tree', files('/srv/work/runs/r/io'),
      planWith(['/srv/work/tree', '/srv/work']));
    assert.deepEqual(watched.diskDirs, ['/srv/work']);
  });

  it('are the worktree alone when the run folder lies in it and nothing else is writable', () => {
    const watched = watchedLimits(DEFAULT_LIMITS, '/w', files('/w/.svc/runs/r/io'), planWith(['/w']));
    assert.deepEqual(watched.diskDirs, ['/w']);
    assert.equal(watched.diskWhat, 'the worktree');
  });
});
