// The agent sandbox's system-call filter (DESIGN §7a; docs/engine.md): a classic-BPF program built from the list in
// syscall-policy.ts. Only the host's own ABI passes (a call through another table could dodge the list: ENOSYS); each
// listed number goes to its rule, everything else is allowed. bwrap reads it from an anonymous file, never a path.
import { openSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REFUSED_SYSCALLS } from './syscall-policy.ts';
import { withScratch } from './svc-paths.ts';

/** The descriptor a sandboxed child finds the program on: right after stdin, stdout and stderr. */
const SECCOMP_FD = 3;

const AUDIT_ARCH = { x64: 0xc000003e, arm64: 0xc00000b7 } as const;
const ARCH_NAME = { x64: 'x86_64', arm64: 'aarch64' } as const;
/** O_TMPFILE | O_RDWR: O_DIRECTORY differs between the two (0200000 on x86_64, 040000 on aarch64). */
const O_TMPFILE_RDWR = { x64: 0o20200002, arm64: 0o20040002 } as const;
/** x32 calls are x86_64's ABI with this bit set in the number. */
const X32_SYSCALL_BIT = 0x40000000;

const RET_ALLOW = 0x7fff0000;
const RET_ERRNO = 0x00050000;
const EPERM = 1;
const ENOSYS = 38;

// Classic BPF opcodes (linux/bpf_common.h).
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const JSET_K = 0x45;
const RET_K = 0x06;

// struct seccomp_data: nr, arch, instruction pointer, then six 64-bit arguments (little-endian: low half first).
const NR = 0;
const ARCH = 4;
const ARG0_LOW = 16;

type Label = string;
interface Insn {
  code: number;
  k: number;
  jt?: Label;
  jf?: Label;
  label?: Label;
}

/** Resolves labels into the forward offsets classic BPF jumps by; 8 bytes an instruction, little-endian. */
function assemble(insns: Insn[]): Buffer {
  const at = new Map<Label, number>();
  insns.forEach((insn, i) => insn.label !== undefined && at.set(insn.label, i));
  const offset = (i: number, target: Label | undefined): number => {
    if (target === undefined) return 0;
    const to = at.get(target);
    const jump = to === undefined ? -1 : to - i - 1;
    if (jump < 0 || jump > 255) throw new RangeError(`seccomp program: no forward jump to ${target}`);
    return jump;
  };
  const out = Buffer.alloc(insns.length * 8);
  insns.forEach((insn, i) => {
    out.writeUInt16LE(insn.code, i * 8);
    out.writeUInt8(offset(i, insn.jt), i * 8 + 2);
    out.writeUInt8(offset(i, insn.jf), i * 8 + 3);
    out.writeUInt32LE(insn.k >>> 0, i * 8 + 4);
  });
  return out;
}

/** The filter for `arch` (Node's process.arch); null for an architecture whose syscall table svc does not know. */
export function buildFilter(arch: string): Buffer | null {
  if (arch !== 'x64' && arch !== 'arm64') return null;
  const table = ARCH_NAME[arch];
  const code: Insn[] = [
    { code: LD_W_ABS, k: ARCH },
    { code: JEQ_K, k: AUDIT_ARCH[arch], jf: 'enosys' },
    { code: LD_W_ABS, k: NR },
  ];
  if (arch === 'x64') code.push({ code: JGE_K, k: X32_SYSCALL_BIT, jt: 'enosys' });
  REFUSED_SYSCALLS.forEach(({ rule, [table]: nr }, i) =>
    code.push({ code: JEQ_K, k: nr, jt: typeof rule === 'string' ? rule : `namespaces-${i}` }));
  code.push({ code: RET_K, k: RET_ALLOW });
  if (REFUSED_SYSCALLS.some((c) => c.rule === 'personality')) {
    code.push(
      { code: LD_W_ABS, k: ARG0_LOW, label: 'personality' },
      { code: JEQ_K, k: 0, jt: 'allow' }, // PER_LINUX
      { code: JEQ_K, k: 0xffffffff, jt: 'allow', jf: 'eperm' }, // a query: changes nothing
    );
  }
  REFUSED_SYSCALLS.forEach(({ rule }, i) => {
    if (typeof rule === 'string') return;
    code.push(
      { code: LD_W_ABS, k: ARG0_LOW, label: `namespaces-${i}` },
      { code: JSET_K, k: rule.namespaces, jt: 'eperm', jf: 'allow' },
    );
  });
  // The verdicts last: classic BPF jumps forward only.
  code.push(
    { code: RET_K, k: RET_ALLOW, label: 'allow' },
    { code: RET_K, k: RET_ERRNO | EPERM, label: 'eperm' },
    { code: RET_K, k: RET_ERRNO | ENOSYS, label: 'enosys' },
  );
  return assemble(code);
}

export interface SyscallFilter {
  /** The syscall table it was built for ('x86_64', 'aarch64'), or null: no filter on this architecture. */
  arch: string | null;
  /** The calls it refuses, by name (with the condition where it refuses only some uses); empty without a filter. */
  refused: string[];
  /** Instructions in the program (0 without one). */
  instructions: number;
  /** Why there is none (null when there is one). */
  reason: string | null;
}

let program: Buffer | null | undefined;
let anonymous: number | null = null;

function theProgram(): Buffer | null {
  program ??= buildFilter(process.arch);
  return program;
}

/** What this process's sandboxes get, for `svc doctor` and the docs. */
export function describeFilter(): SyscallFilter {
  const built = theProgram();
  if (!built) {
    return { arch: null, refused: [], instructions: 0,
      reason: `no system-call filter for architecture ${process.arch}: svc knows the x86_64 and aarch64 tables only` };
  }
  const arch = ARCH_NAME[process.arch as 'x64' | 'arm64'];
  const refused = REFUSED_SYSCALLS.map(({ name, rule }) => {
    if (rule === 'personality') return `${name} (unsafe flags)`;
    if (typeof rule !== 'string') return `${name} (new namespaces)`;
    return rule === 'enosys' ? `${name} (ENOSYS)` : name;
  });
  return { arch, refused, instructions: built.length / 8, reason: null };
}

/** An unnamed file holding `bytes`: O_TMPFILE, or (where a filesystem lacks it) one unlinked at once in a 0700 dir. */
function anonymousFile(bytes: Buffer): number {
  let fd: number | null = null;
  for (const dir of new Set([tmpdir(), '/tmp', '/dev/shm'])) {
    try {
      fd = openSync(dir, O_TMPFILE_RDWR[process.arch as 'x64' | 'arm64'], 0o600);
      break;
    } catch {
      // no such folder, or its filesystem has no O_TMPFILE
    }
  }
  if (fd === null) {
    // Named for a moment, in a fresh 0700 folder no sandbox sees: only a process of svc's own user outside any
    // sandbox could race for it, and such a process could already trace svc itself.
    fd = withScratch('seccomp', (dir) => openSync(join(dir, 'filter.bpf'), 'wx+', 0o600));
  }
  writeSync(fd, bytes, 0, bytes.length, 0);
  return fd;
}

/**
 * A fresh descriptor reading this process's filter from its start, for one sandbox start (stdio slot SECCOMP_FD); the
 * caller closes it once the child has started. Null when there is no filter on this architecture.
 */
export function openFilterFd(): number | null {
  const built = theProgram();
  if (!built) return null;
  anonymous ??= anonymousFile(built);
  return openSync(`/proc/self/fd/${anonymous}`, 'r');
}

/** bwrap's arguments that install the filter from SECCOMP_FD; [] without a filter. */
export function filterArgv(): string[] {
  return theProgram() ? ['--seccomp', String(SECCOMP_FD)] : [];
}
