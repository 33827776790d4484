// The agent sandbox's system-call filter (DESIGN §7a; each refused group's reason is beside it): a classic-BPF
// program built from REFUSED_SYSCALLS. Only the host's own ABI passes (a call through another table could dodge the
// list: ENOSYS); each listed number goes to its rule, everything else is allowed.
import { openSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { withScratch } from './svc-paths.ts';

/**
 * 'eperm' and 'enosys' always, 'personality' unless it sets PER_LINUX or queries (0xffffffff), `namespaces` with
 * EPERM when the flags (first argument) hold one of these bits, `families` with EPERM for those address families,
 * 'unix-datagram' with EPERM for an AF_UNIX pair of datagram sockets.
 */
type SyscallRule =
  'eperm' | 'enosys' | 'personality' | 'unix-datagram' | { namespaces: number } | { families: Record<string, number> };

/** The namespace flags of clone and unshare (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET). */
const CLONE_NEW_FLAGS = 0x7e020000;
/** CLONE_NEWTIME: unshare only (in clone's first argument those bits hold the exit signal). */
const CLONE_NEWTIME = 0x00000080;
/** socket(2)'s address families the sandbox refuses (why: beside the rule). */
const REFUSED_FAMILIES = { AF_UNIX: 1, AF_VSOCK: 40 };

/** Numbers per architecture: x86_64's table and aarch64's generic one. */
export const REFUSED_SYSCALLS: ReadonlyArray<{ name: string; x86_64: number; aarch64: number; rule: SyscallRule }> = [
  // Kernel attack surface no agent needs: the keyring (shared outside the namespaces), io_uring (bypasses per-call
  // filtering; libuv falls back), hardware counters, userfaultfd (stalls the kernel mid-copy to win races), bpf.
  { name: 'keyctl', x86_64: 250, aarch64: 219, rule: 'eperm' },
  { name: 'add_key', x86_64: 248, aarch64: 217, rule: 'eperm' },
  { name: 'request_key', x86_64: 249, aarch64: 218, rule: 'eperm' },
  { name: 'io_uring_setup', x86_64: 425, aarch64: 425, rule: 'eperm' },
  { name: 'io_uring_enter', x86_64: 426, aarch64: 426, rule: 'eperm' },
  { name: 'io_uring_register', x86_64: 427, aarch64: 427, rule: 'eperm' },
  { name: 'perf_event_open', x86_64: 298, aarch64: 241, rule: 'eperm' },
  { name: 'userfaultfd', x86_64: 323, aarch64: 282, rule: 'eperm' },
  { name: 'bpf', x86_64: 321, aarch64: 280, rule: 'eperm' },
  // Reading or rewriting another process of the sandbox, or svc's watchers in it.
  { name: 'ptrace', x86_64: 101, aarch64: 117, rule: 'eperm' },
  { name: 'process_vm_readv', x86_64: 310, aarch64: 270, rule: 'eperm' },
  { name: 'process_vm_writev', x86_64: 311, aarch64: 271, rule: 'eperm' },
  { name: 'pidfd_getfd', x86_64: 438, aarch64: 438, rule: 'eperm' },
  // Replacing or extending the kernel: ENOSYS, as if the kernel had none.
  { name: 'kexec_load', x86_64: 246, aarch64: 104, rule: 'enosys' },
  { name: 'kexec_file_load', x86_64: 320, aarch64: 294, rule: 'enosys' },
  { name: 'init_module', x86_64: 175, aarch64: 105, rule: 'enosys' },
  { name: 'finit_module', x86_64: 313, aarch64: 273, rule: 'enosys' },
  { name: 'delete_module', x86_64: 176, aarch64: 106, rule: 'enosys' },
  // Its flags (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC) switch off exploit mitigations.
  { name: 'personality', x86_64: 135, aarch64: 92, rule: 'personality' },
  // New namespaces expose kernel code written for privileged users; the sandbox already has its own.
  { name: 'unshare', x86_64: 272, aarch64: 97, rule: { namespaces: CLONE_NEW_FLAGS | CLONE_NEWTIME } },
  { name: 'setns', x86_64: 308, aarch64: 268, rule: 'eperm' },
  { name: 'clone', x86_64: 56, aarch64: 220, rule: { namespaces: CLONE_NEW_FLAGS } },
  // Its flags sit in memory a filter cannot read; ENOSYS makes libc fall back to clone, which is checked.
  { name: 'clone3', x86_64: 435, aarch64: 435, rule: 'enosys' },
  // Two kinds of socket no network namespace confines, each a route out beside the gate (DESIGN §7a). A Unix socket
  // reaches whatever host server has its socket file in a folder the sandbox sees: a devenv's Postgres with trust
  // login in the checkout, git's fsmonitor daemon in .git, an ssh or docker agent; a file is a door no namespace
  // closes. A vsock talks to the hypervisor's host (Firecracker, QEMU, Hyper-V); Docker's default profile refuses it
  // too. socketpair(2) stays allowed: its two ends reach no path (libuv's and node's child stdio use it).
  { name: 'socket', x86_64: 41, aarch64: 198, rule: { families: REFUSED_FAMILIES } },
  // A datagram end of a pair sends to any socket file by its path (sendto, or connect first): the same door. A stream
  // or seqpacket pair reaches only its other end.
  { name: 'socketpair', x86_64: 53, aarch64: 199, rule: 'unix-datagram' },
];

/** Where a sandboxed child finds the program: right after stdio. */
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
const AND_K = 0x54;
/** A socket type's SOCK_DGRAM, under SOCK_TYPE_MASK (the flags SOCK_NONBLOCK and SOCK_CLOEXEC sit above it). */
const SOCK_DGRAM = 2;
const SOCK_TYPE_MASK = 0xf;

// struct seccomp_data: nr, arch, instruction pointer, then six 64-bit arguments (little-endian: low half first).
const NR = 0;
const ARCH = 4;
const ARG0_LOW = 16;
const ARG1_LOW = 24;

interface Insn {
  code: number;
  k: number;
  jt?: string;
  jf?: string;
  label?: string;
}

/** Resolves labels into the forward offsets classic BPF jumps by; 8 bytes an instruction, little-endian. */
function assemble(insns: Insn[]): Buffer {
  const at = new Map<string, number>();
  insns.forEach((insn, i) => insn.label !== undefined && at.set(insn.label, i));
  const offset = (i: number, target: string | undefined): number => {
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
    code.push({ code: JEQ_K, k: nr, jt: typeof rule === 'string' ? rule : `argument-${i}` }));
  code.push({ code: RET_K, k: RET_ALLOW });
  code.push(
    { code: LD_W_ABS, k: ARG0_LOW, label: 'personality' },
    { code: JEQ_K, k: 0, jt: 'allow' }, // PER_LINUX
    { code: JEQ_K, k: 0xffffffff, jt: 'allow', jf: 'eperm' }, // a query: changes nothing
    { code: LD_W_ABS, k: ARG0_LOW, label: 'unix-datagram' },
    { code: JEQ_K, k: REFUSED_FAMILIES.AF_UNIX, jf: 'allow' },
    { code: LD_W_ABS, k: ARG1_LOW },
    { code: AND_K, k: SOCK_TYPE_MASK },
    { code: JEQ_K, k: SOCK_DGRAM, jt: 'eperm', jf: 'allow' },
  );
  REFUSED_SYSCALLS.forEach(({ rule }, i) => {
    if (typeof rule === 'string') return;
    code.push({ code: LD_W_ABS, k: ARG0_LOW, label: `argument-${i}` });
    // Each test jumps to EPERM or falls through to the next; past the last, the call is allowed.
    if ('namespaces' in rule) code.push({ code: JSET_K, k: rule.namespaces, jt: 'eperm' });
    else for (const family of Object.values(rule.families)) code.push({ code: JEQ_K, k: family, jt: 'eperm' });
    code.push({ code: RET_K, k: RET_ALLOW });
  });
  // The verdicts last: classic BPF jumps forward only.
  code.push(
    { code: RET_K, k: RET_ALLOW, label: 'allow' },
    { code: RET_K, k: RET_ERRNO | EPERM, label: 'eperm' },
    { code: RET_K, k: RET_ERRNO | ENOSYS, label: 'enosys' },
  );
  return assemble(code);
}

export type SyscallFilter = ReturnType<typeof describeFilter>;

let program: Buffer | null | undefined;
let anonymous: number | null = null;

function theProgram(): Buffer | null {
  program ??= buildFilter(process.arch);
  return program;
}

/** What this process's sandboxes get, for `svc doctor`: `arch`, the syscall table; null (and `reason`) without one. */
export function describeFilter() {
  const built = theProgram();
  if (!built) {
    return { arch: null, refused: [], instructions: 0,
      reason: `no system-call filter for architecture ${process.arch}: svc knows the x86_64 and aarch64 tables only` };
  }
  const arch = ARCH_NAME[process.arch as 'x64' | 'arm64'];
  const refused = REFUSED_SYSCALLS.map(({ name, rule }) => {
    if (rule === 'personality') return `${name} (unsafe flags)`;
    if (rule === 'unix-datagram') return `${name} (AF_UNIX datagrams)`;
    if (typeof rule !== 'string') {
      return 'namespaces' in rule ? `${name} (new namespaces)` : `${name} (${Object.keys(rule.families).join(', ')})`;
    }
    return rule === 'enosys' ? `${name} (ENOSYS)` : name;
  });
  return { arch, refused, instructions: built.length / 8, reason: null };
}

/** An unnamed file holding `bytes` (bwrap reads it, never a path): O_TMPFILE, else one unlinked at once. */
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

/** A fresh descriptor reading the filter from its start, for one sandbox start; null without a filter. */
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
