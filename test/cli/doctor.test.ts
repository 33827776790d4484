import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runChild } from '../helpers/run-child.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');

describe('svc doctor', () => {
  it('reports a working sandbox on this host (CI installs bubblewrap)', async () => {
    const r = await runChild(process.execPath, [CLI, 'doctor', '--json']);
    const report = JSON.parse(r.stdout) as { sandbox: { ok: boolean; bwrap: string | null; reason: string | null } };
    assert.equal(report.sandbox.reason, null);
    assert.equal(report.sandbox.ok, true);
    assert.equal(r.code, 0);
  });

  it('exits 1 naming the bubblewrap package and the opt-out when bwrap is not on PATH', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'svc-doctor-'));
    try {
      const r = await runChild(process.execPath, [CLI, 'doctor'], { env: { PATH: empty, HOME: empty } });
      assert.equal(r.code, 1);
      assert.match(r.stdout, /bwrap:\s+not found/);
      assert.match(r.stdout, /bubblewrap/);
      assert.match(r.stdout, /SVC_SANDBOX=none/);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
