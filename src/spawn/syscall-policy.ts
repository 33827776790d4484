// The system calls an agent's sandbox refuses, each with its reason: the whole policy (seccomp.ts compiles it into
// the filter; docs/engine.md lists it). Numbers are per architecture: x86_64 and aarch64's generic table.

/**
 * How a call is refused: 'eperm' and 'enosys' always (docs/engine.md says why ENOSYS), 'personality' unless it sets
 * PER_LINUX or queries (0xffffffff), `namespaces` with EPERM when the flags (first argument) hold one of these bits.
 */
type SyscallRule = 'eperm' | 'enosys' | 'personality' | { namespaces: number };

/** The namespace flags of clone and unshare (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET). */
const CLONE_NEW_FLAGS = 0x7e020000;
/** CLONE_NEWTIME: unshare only (in clone's first argument those bits hold the exit signal). */
export const CLONE_NEWTIME = 0x00000080;

interface RefusedSyscall {
  name: string;
  x86_64: number;
  aarch64: number;
  rule: SyscallRule;
  reason: string;
}

export const REFUSED_SYSCALLS: readonly RefusedSyscall[] = [
  { name: 'keyctl', x86_64: 250, aarch64: 219, rule: 'eperm',
    reason: 'the kernel keyring is shared state outside the sandbox\'s namespaces and a long list of kernel bugs' },
  { name: 'add_key', x86_64: 248, aarch64: 217, rule: 'eperm', reason: 'the kernel keyring (see keyctl)' },
  { name: 'request_key', x86_64: 249, aarch64: 218, rule: 'eperm', reason: 'the kernel keyring (see keyctl)' },
  { name: 'io_uring_setup', x86_64: 425, aarch64: 425, rule: 'eperm',
    reason: 'io_uring bypasses per-call filtering and is a frequent kernel exploit path; libuv and others fall back ' +
      'to ordinary calls' },
  { name: 'io_uring_enter', x86_64: 426, aarch64: 426, rule: 'eperm', reason: 'io_uring (see io_uring_setup)' },
  { name: 'io_uring_register', x86_64: 427, aarch64: 427, rule: 'eperm', reason: 'io_uring (see io_uring_setup)' },
  { name: 'perf_event_open', x86_64: 298, aarch64: 241, rule: 'eperm',
    reason: 'hardware counters and kernel tracing: side channels and kernel bugs, no use to an agent' },
  { name: 'userfaultfd', x86_64: 323, aarch64: 282, rule: 'eperm',
    reason: 'lets a process stall the kernel mid-copy, the standard tool for winning kernel races' },
  { name: 'bpf', x86_64: 321, aarch64: 280, rule: 'eperm', reason: 'loads programs into the kernel' },
  { name: 'ptrace', x86_64: 101, aarch64: 117, rule: 'eperm',
    reason: 'reads and rewrites other processes in the sandbox (the egress forwarder among them)' },
  { name: 'process_vm_readv', x86_64: 310, aarch64: 270, rule: 'eperm',
    reason: 'reads another process\'s memory (see ptrace)' },
  { name: 'process_vm_writev', x86_64: 311, aarch64: 271, rule: 'eperm',
    reason: 'writes another process\'s memory (see ptrace)' },
  { name: 'pidfd_getfd', x86_64: 438, aarch64: 438, rule: 'eperm',
    reason: 'copies another process\'s descriptors, such as the CLI\'s own output, wherever ptrace_scope is 0 ' +
      '(see ptrace)' },
  { name: 'kexec_load', x86_64: 246, aarch64: 104, rule: 'enosys', reason: 'replaces the running kernel' },
  { name: 'kexec_file_load', x86_64: 320, aarch64: 294, rule: 'enosys', reason: 'replaces the running kernel' },
  { name: 'init_module', x86_64: 175, aarch64: 105, rule: 'enosys', reason: 'loads code into the kernel' },
  { name: 'finit_module', x86_64: 313, aarch64: 273, rule: 'enosys', reason: 'loads code into the kernel' },
  { name: 'delete_module', x86_64: 176, aarch64: 106, rule: 'enosys', reason: 'unloads kernel code' },
  { name: 'personality', x86_64: 135, aarch64: 92, rule: 'personality',
    reason: 'flags such as ADDR_NO_RANDOMIZE or READ_IMPLIES_EXEC switch off exploit mitigations; setting PER_LINUX ' +
      'and querying stay allowed' },
  { name: 'unshare', x86_64: 272, aarch64: 97, rule: { namespaces: CLONE_NEW_FLAGS | CLONE_NEWTIME },
    reason: 'new namespaces expose kernel code written for privileged users; the sandbox already has its own' },
  { name: 'setns', x86_64: 308, aarch64: 268, rule: 'eperm', reason: 'joins another namespace (see unshare)' },
  { name: 'clone', x86_64: 56, aarch64: 220, rule: { namespaces: CLONE_NEW_FLAGS },
    reason: 'a clone that asks for a new namespace (see unshare); fork, vfork and threads stay allowed' },
  { name: 'clone3', x86_64: 435, aarch64: 435, rule: 'enosys',
    reason: 'its flags sit in memory a filter cannot read; ENOSYS makes libc fall back to clone, which is checked' },
];
