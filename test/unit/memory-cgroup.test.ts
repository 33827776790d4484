// Where svc makes an agent sandbox's memory cgroup, and that a process started through it really runs inside it with
// the limit set. The memfd and /dev/shm floods that such a cgroup stops are in
// test/security-boundary/kernel-surface.test.ts.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { delegatingV2, memoryCgroupSupport, openMemoryCgroup } from '../../src/spawn/memory-cgroup.ts';
import { waitFor } from '../helpers/wait-for.ts';

/** A cgroup folder as cgroup2 shows it: cgroup.procs, and the controllers it hands its children. */
function cgroupDir(path: string, subtree: string): void {
  mkdirSync(path, { recursive: true });
  writeFileSync(join(path, 'cgroup.procs'), '');
  writeFileSync(join(path, 'cgroup.subtree_control'), subtree);
}

describe('cgroup v2 delegation', () => {
  it('uses svc\'s own cgroup when it delegates memory, else the parent its leaf sits in, else none', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-cgroup-'));
    try {
      cgroupDir(join(root, 'svc.service'), 'cpu memory pids\n');
      cgroupDir(join(root, 'svc.service', 'main'), '');
      assert.equal(delegatingV2(join(root, 'svc.service', 'main')), join(root, 'svc.service'));
      cgroupDir(join(root, 'svc.service', 'main'), 'memory\n');
      assert.equal(delegatingV2(join(root, 'svc.service', 'main')), join(root, 'svc.service', 'main'));
      cgroupDir(join(root, 'other.service'), 'cpu\n');
      cgroupDir(join(root, 'other.service', 'main'), 'pids\n');
      assert.equal(delegatingV2(join(root, 'other.service', 'main')), null);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

const support = memoryCgroupSupport();

describe('a sandbox memory cgroup on this host', {
  skip: support.version ? false : `no memory cgroup here: ${support.version === null ? support.reason : ''}`,
}, () => {
  it('puts the wrapped command in a fresh cgroup with the limit, and removes the cgroup afterwards', async () => {
    const cgroup = openMemoryCgroup(96 * 1024 * 1024);
    assert.ok(cgroup);
    try {
      const limitFile = cgroup.version === 'v1' ? 'memory.limit_in_bytes' : 'memory.max';
      assert.equal(readFileSync(join(cgroup.path, limitFile), 'utf8').trim(), String(96 * 1024 * 1024));
      const argv = cgroup.wrap(['/bin/cat', '/proc/self/cgroup']);
      const inside = execFileSync(argv[0]!, argv.slice(1), { encoding: 'utf8' });
      const name = cgroup.path.split('/').pop()!;
      assert.match(inside, new RegExp(`${cgroup.version === 'v1' ? 'memory' : '^0:'}.*/${name}$`, 'm'));
      assert.equal(cgroup.oomKills(), 0);
    } finally {
      cgroup.remove();
    }
    // The kernel may count the cgroup as populated for a moment after its last process was reaped: removal retries.
    await waitFor(() => !existsSync(cgroup.path), 'the cgroup to be removed');
  });
});
