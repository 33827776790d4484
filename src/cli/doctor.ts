// `svc doctor`: says whether agent runs can be sandboxed on this host, and why not. Exit 0 when they can.
import type { CliIo } from './io.ts';
import { parseFlags, wantsHelp } from './io.ts';
import { probeSandbox, BWRAP_HINT } from '../spawn/index.ts';
import { safeJson } from '../safe-json.ts';

const HELP = `Usage: svc doctor [--json]

Checks that agent runs can be sandboxed here: bwrap (Debian package bubblewrap)
on PATH, unprivileged user namespaces, and a trial sandbox (own PID namespace,
read-only root). Exits 0 when sandboxing works, 1 when it does not.
`;

export default async function doctor(io: CliIo): Promise<number> {
  if (wantsHelp(io.argv)) {
    io.stdout(HELP);
    return 0;
  }
  const { values } = parseFlags(io.argv, { json: { type: 'boolean' } }, false);
  const probe = probeSandbox(io.env);
  if (values.json) {
    io.stdout(`${safeJson({ sandbox: probe })}\n`);
  } else {
    io.stdout(`bwrap:           ${probe.bwrap ?? 'not found'}\n`);
    io.stdout(`user namespaces: ${probe.userNamespaces ?? 'unknown'}\n`);
    io.stdout(probe.ok ? 'sandbox:         works\n' : `sandbox:         does not work: ${probe.reason}\nfix:             ${BWRAP_HINT}\n`);
  }
  return probe.ok ? 0 : 1;
}
