// `svc doctor`: says whether agent runs can be sandboxed on this host, and why not. Exit 0 when they can.
import { dirname } from 'node:path';
import { parseFlags, type CliIo } from './io.ts';
import {
  probeSandbox, BWRAP_HINT, NAMESPACES_HINT, namespacesRefused, type SandboxProbe,
} from '../spawn/sandbox-mode.ts';
import { which } from '../spawn/svc-paths.ts';
import { describeFilter, type SyscallFilter } from '../spawn/seccomp.ts';
import { memoryBound } from '../spawn/memory-cgroup.ts';
import { PRLIMIT_DIRS, PRLIMIT_HINT } from '../spawn/limits.ts';
import { safeJson } from '../safe-json.ts';

export const HELP = `Usage: svc doctor [--json]

Checks that agent runs can be sandboxed here: bwrap (Debian package bubblewrap)
on PATH, prlimit (Debian package util-linux), which sets the sandbox's kernel
limits, in /usr/bin, /bin, /usr/sbin or /sbin, user namespaces, and a trial
sandbox shaped like an agent's (own user, PID and network namespaces, no
capability left whoever runs svc, the kernel limits, and the system-call
filter). Says which system calls the filter refuses, what bounds an
agent's memory here (a memory cgroup, or svc's watchdog), and whether svc runs
as root and what that means. Exits 0 when sandboxing works, 1 when it does not.
`;

/** What running as root changes for an agent (the sandbox holds either way; docs/engine.md "The agent sandbox"). */
const ROOT_NOTE = 'svc runs as root: the agent still gets no capability (own user namespace, all dropped, no ' +
  'new privileges), but the kernel does not apply the process limit (RLIMIT_NPROC) to root, so svc\'s watchdog ' +
  'ends a sandbox past limits.processes within about 250 ms; running svc as an ordinary user lets the kernel ' +
  'refuse the forks instead';

/** Looked at only to tell "bwrap not installed" from "installed, but not on PATH". */
const SYSTEM_BIN_DIRS = ['/usr/bin', '/bin', '/usr/local/bin', '/usr/sbin', '/sbin'];

/** The next step: a PATH without the system folders hides an installed bwrap, so say where it is, not "install". */
export function fixFor(probe: SandboxProbe, path: string | undefined, offPath: string | null): string | null {
  if (probe.ok) return null;
  // Both missing: both are said, so installing bwrap is not followed by a second refusal.
  const andPrlimit = probe.prlimit === null ? `; and ${PRLIMIT_HINT}` : '';
  if (probe.bwrap === null && offPath !== null) {
    return `bwrap is installed at ${offPath} but ${dirname(offPath)} is not on PATH (PATH=${path ?? ''}): ` +
      `add it, e.g. PATH="$PATH:${dirname(offPath)}"${andPrlimit}`;
  }
  if (probe.bwrap === null) return `${BWRAP_HINT}${andPrlimit}`;
  if (probe.prlimit === null) return PRLIMIT_HINT;
  return namespacesRefused(probe) ? NAMESPACES_HINT : BWRAP_HINT;
}

function filterLine(filter: SyscallFilter): string {
  if (filter.arch === null) return `none: ${filter.reason}`;
  const calls = filter.refused.join(', ');
  return `${filter.refused.length} calls refused (${filter.arch}; every other ABI refused): ${calls}`;
}

export default async function doctor(io: CliIo): Promise<number> {
  const { values } = parseFlags(io.argv, { json: { type: 'boolean' } }, 0);
  const probe = probeSandbox(io.env);
  const offPath = probe.bwrap === null ? which('bwrap', SYSTEM_BIN_DIRS.join(':')) : null;
  const fix = fixFor(probe, io.env.PATH, offPath);
  const root = process.getuid?.() === 0;
  const filter = describeFilter();
  const memory = memoryBound();
  if (values.json) {
    const report = { sandbox: probe, fix, syscall_filter: filter, memory, root, root_note: root ? ROOT_NOTE : null };
    io.stdout(`${safeJson(report)}\n`);
  } else {
    const found = probe.bwrap ?? (offPath ? `not on PATH (installed at ${offPath})` : 'not found');
    io.stdout(`bwrap:           ${found}\n`);
    io.stdout(`prlimit:         ${probe.prlimit ?? `not found in ${PRLIMIT_DIRS.join(', ')}`}\n`);
    io.stdout(`user namespaces: ${probe.userNamespaces ?? 'unknown'}\n`);
    const filtered = filter.arch ? ', system-call filter' : '';
    const works = `works (no capabilities, own network namespace, kernel limits${filtered})`;
    if (fix === null) io.stdout(`sandbox:         ${works}\n`);
    else io.stdout(`sandbox:         does not work: ${probe.reason}\nfix:             ${fix}\n`);
    io.stdout(`system calls:    ${filterLine(filter)}\n`);
    io.stdout(`memory:          ${memory.mechanism}: ${memory.detail}\n`);
    io.stdout(`user:            ${root ? `root (uid 0). ${ROOT_NOTE}` : `uid ${process.getuid?.() ?? '?'}`}\n`);
  }
  return probe.ok ? 0 : 1;
}
