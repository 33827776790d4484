// Where a run's gate socket folder goes (src/engine/egress.ts gateFolderBase): under TMPDIR, which the systemd units
// keep across a restart, unless the socket path would pass the ~107 bytes a Unix socket address holds.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { gateFolderBase } from '../../src/engine/egress.ts';

describe('the gate socket folder', () => {
  it('goes under TMPDIR when the socket path fits, else under /tmp', () => {
    assert.equal(gateFolderBase('/tmp'), '/tmp');
    assert.equal(gateFolderBase('/var/lib/svc/tmp'), '/var/lib/svc/tmp');
    const fits = `/${'d'.repeat(80)}`;
    assert.equal(gateFolderBase(fits), fits);
    assert.ok(`${fits}/svc-gate-XXXXXX/gate.sock`.length <= 107);
    assert.equal(gateFolderBase(`/${'d'.repeat(81)}`), '/tmp');
  });
});
