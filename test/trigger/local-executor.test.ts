// The trigger's local executor starts each job's `svc start`; one that hangs is ended with everything it started in
// its group, through the one process-lifetime module (engine/proc-group.ts), never by a bare pid.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalExecutor } from '../../src/trigger/local-executor.ts';
import { silentLogger } from '../../src/log.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { processAlive } from '../engine/fixtures.ts';

describe('the local executor', () => {
  it('ends a launcher that never finishes, and the process it started in its group', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-local-exec-'));
    try {
      const hang = join(dir, 'hang.sh');
      // Stands in for a `svc start` that hangs: a child of its own in the same group, then waits forever.
      writeFileSync(hang, `#!/bin/sh\nsleep 300 &\necho $! > "${dir}/child.pid"\nwait\n`);
      chmodSync(hang, 0o755);
      const executor = createLocalExecutor({
        cliPath: hang, execPath: '/bin/sh', env: { PATH: process.env.PATH }, log: silentLogger, launchTimeoutMs: 500,
      });
      const result = await executor.launch({ id: 'job-1', args: ['start'], workdir: dir });
      assert.equal(result.run, null);
      assert.match(result.error ?? '', /did not finish within 500 ms/);
      const child = Number(readFileSync(join(dir, 'child.pid'), 'utf8'));
      await waitFor(() => !processAlive(child), 'the hung launcher\'s child to be ended with it');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
