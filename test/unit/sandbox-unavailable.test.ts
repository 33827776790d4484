// What `svc start` says when the agent sandbox cannot run (src/spawn/sandbox-mode.ts resolveSandbox): an installed
// bwrap whose namespaces are refused is fixed in the unit or the host, not by installing it or turning it off.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveSandbox, SandboxUnavailableError } from '../../src/spawn/sandbox-mode.ts';
import { fixFor } from '../../src/cli/doctor.ts';

const REFUSED = 'bwrap: No permissions to create new namespace, likely because the kernel does not allow ' +
  'non-privileged user namespaces.';

describe('the sandbox refusal', () => {
  const root = mkdtempSync(join(tmpdir(), 'svc-sandbox-refusal-'));
  after(() => rmSync(root, { recursive: true, force: true }));

  function refusal(env: NodeJS.ProcessEnv): string {
    let message = '';
    assert.throws(() => resolveSandbox(null, { HOME: root, ...env }), (e) => {
      message = (e as Error).message;
      return e instanceof SandboxUnavailableError;
    });
    return message;
  }

  it('names bwrap\'s own reason and where namespaces are refused when bwrap is installed and fails', () => {
    // A bwrap that fails as the real one does under RestrictNamespaces or with user namespaces off.
    writeFileSync(join(root, 'bwrap'), `#!/bin/sh\necho '${REFUSED}' >&2\nexit 1\n`);
    chmodSync(join(root, 'bwrap'), 0o755);
    const message = refusal({ PATH: `${root}:/usr/bin:/bin`, SVC_ORIGIN: 'webhook' });
    assert.ok(message.includes(`${join(root, 'bwrap')} could not set it up here`), message);
    assert.ok(message.includes(REFUSED), message);
    assert.match(message, /bwrap could not create its namespaces: under systemd the unit must allow them/);
    assert.match(message, /RestrictNamespaces must list every namespace bwrap creates/);
    assert.match(message, /RestrictAddressFamilies AF_NETLINK/);
    assert.match(message, /user\.max_user_namespaces/);
    assert.doesNotMatch(message, /apt-get install bubblewrap/);
    assert.ok(message.indexOf('RestrictNamespaces') < message.indexOf('SVC_SERVER_SANDBOX=none'), message);
  });

  it('still says to install bubblewrap when there is none on PATH', () => {
    const message = refusal({ PATH: join(root, 'nothing-here'), SVC_ORIGIN: 'webhook' });
    assert.match(message, /\(bwrap not found on PATH\)\. Install the Debian package "bubblewrap"/);
    assert.match(message, /or opt out with SVC_SERVER_SANDBOX=none/);
  });

  it('gives `svc doctor` the same next step', () => {
    const reason = `a trial bwrap sandbox failed: ${REFUSED}`;
    const probe = { ok: false, bwrap: '/usr/bin/bwrap', prlimit: '/usr/bin/prlimit', userNamespaces: null, reason };
    assert.match(fixFor(probe, '/usr/bin', null) ?? '', /^bwrap could not create its namespaces: /);
  });
});
