// Whether bwrap can run here, for the tests that need the real sandbox. Under CI a sandbox test must never skip (it
// would prove nothing): there a host without a working bwrap fails the suite instead.
import { probeSandbox } from '../../src/spawn/sandbox-mode.ts';

export const bwrapWorks = probeSandbox(process.env).ok;

if (process.env.CI && !bwrapWorks) {
  throw new Error('CI must run the sandbox tests: install the Debian package bubblewrap (svc doctor says why)');
}
