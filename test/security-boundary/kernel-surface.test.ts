// The agent cannot hold the host's memory past limits.memory_mb by ways no resident set shows, and cannot reach the
// kernel calls no coding agent needs (DESIGN §7a), black-box: real `svc start` runs whose `command` provider plays the
// attacker. Run as whoever runs the tests (root here: the sandbox gets a memory cgroup) and, when that is root, again
// as nobody through setpriv (no cgroup can be made: svc's watchdog counts memfds and tmpfs instead).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { makeRepo, readJson, CLI, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { letNobodyReach } from '../helpers/nobody-reach.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';
import { memoryCgroupSupport } from '../../src/spawn/memory-cgroup.ts';

const isRoot = process.getuid?.() === 0;
const NOBODY = 65534;
const x86 = process.arch === 'x64';

/** Fills a memfd with write() (never mapped: no resident set shows it) up to 1 GiB, then holds it. */
const MEMFD_FLOOD = `#!/bin/sh
cat > /dev/null
/usr/bin/python3 - <<'PY' > flood.txt 2>&1
import os, time
fd = os.memfd_create('hoard')
chunk = b'x' * (1 << 20)
for i in range(1024):
    os.write(fd, chunk)
print('held 1 GiB', flush=True)
time.sleep(60)
PY
echo "exit $?" >> flood.txt
echo fixed >> a.txt
`;

/** The same hoard in a file under /dev/shm, then held. */
const SHM_FLOOD = `#!/bin/sh
cat > /dev/null
head -c 536870912 /dev/zero > /dev/shm/hoard; echo "exit $?" > flood.txt
sleep 60
echo fixed >> a.txt
`;

/**
 * Each call as an attacker would make it, with arguments that the kernel without the filter answers differently
 * (success, EBADF, EFAULT, EINVAL, ENOKEY, ENOSPC), so EPERM/ENOSYS can only be the filter's. x86_64 numbers.
 */
const PROBE_CALLS = `
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
buf = ctypes.create_string_buffer(256)
def call(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    e = ctypes.get_errno()
    print(f"{name}:{'ok' if r >= 0 else errno.errorcode.get(e, str(e))}")
call('keyctl', 250, 0, -3, 0)
call('add_key', 248, b'user', b'svc', b'x', 1, -2)
call('request_key', 249, b'user', b'svc-missing', None, 0)
call('io_uring_setup', 425, 4, buf)
call('io_uring_enter', 426, -1, 0, 0, 0, None, 0)
call('io_uring_register', 427, -1, 0, None, 0)
call('perf_event_open', 298, None, 0, -1, -1, 0)
call('userfaultfd', 323, 0xffffffff)
call('bpf', 321, 9999, None, 0)
call('ptrace', 101, 0, 0, 0, 0)
call('process_vm_readv', 310, os.getpid(), None, 0, None, 0, 0)
call('process_vm_writev', 311, os.getpid(), None, 0, None, 0, 0)
call('pidfd_getfd', 438, -1, 1, 0)
call('kexec_load', 246, 0, 0, None, 0)
call('kexec_file_load', 320, -1, -1, 0, None, 0)
call('init_module', 175, None, 0, b'')
call('finit_module', 313, -1, b'', 0)
call('delete_module', 176, b'svc_missing', 0x800)
call('personality-unsafe', 135, 0x0040000)
call('unshare-user', 272, 0x10000000)
call('unshare-net', 272, 0x40000000)
call('setns', 308, -1, 0)
call('clone-newuser', 56, 0x10000000 | 17, None, None, None, None)
call('clone3', 435, None, 0)
call('x32-getpid', 0x40000000 | 39)
call('personality-query', 135, 0xffffffff)
call('unshare-files', 272, 0x400)
call('socket-vsock', 41, 40, 1, 0)
call('socket-unix', 41, 1, 1, 0)
call('socketpair-unix', 53, 1, 1, 0, buf)
call('socketpair-unix-dgram', 53, 1, 2, 0, buf)
call('socket-inet', 41, 2, 1, 0)
`;

/** Every refused call, then what a coding agent does run: git, node, python and npm, each starting a child. */
const SYSCALLS = `#!/bin/sh
cat > /dev/null
{
  grep -E '^Seccomp:' /proc/self/status
  /usr/bin/python3 -c "$(cat "$HOME/agent-state/probe.py")"
  git init -q scratch && git -C scratch -c user.email=a@b -c user.name=a commit -q --allow-empty -m x && echo git:works
  node -e 'require("child_process").execFileSync("true"); require("fs").writeFileSync("/tmp/n", "x"); console.log("node:works")'
  /usr/bin/python3 -c 'import subprocess; subprocess.run(["true"], check=True); print("python:works")'
  npm --version > /dev/null && echo npm:works
} > found.txt 2>&1
rm -rf scratch
echo fixed >> a.txt
`;

const PROVIDERS = { memfd: MEMFD_FLOOD, shm: SHM_FLOOD, syscalls: SYSCALLS };

/** The calls and what the filter answers; those answering `ok` must pass it. A vsock (family 40) reaches the
 * hypervisor's host, which the sandbox's network namespace does not confine: without the filter a VM's kernel with a
 * vsock transport (Firecracker, QEMU, Hyper-V) makes one, and a kernel without answers EAFNOSUPPORT, not EPERM. A Unix
 * socket (family 1) reaches a host server by its file (unix-sockets.test.ts); a stream socketpair reaches
 * only its other end, but a datagram one sends to any socket file by its path. */
const EXPECTED: Record<string, string> = {
  'keyctl': 'EPERM', 'add_key': 'EPERM', 'request_key': 'EPERM', 'io_uring_setup': 'EPERM',
  'io_uring_enter': 'EPERM', 'io_uring_register': 'EPERM', 'perf_event_open': 'EPERM', 'userfaultfd': 'EPERM',
  'bpf': 'EPERM', 'ptrace': 'EPERM', 'process_vm_readv': 'EPERM', 'process_vm_writev': 'EPERM',
  'pidfd_getfd': 'EPERM', 'kexec_load': 'ENOSYS', 'kexec_file_load': 'ENOSYS', 'init_module': 'ENOSYS',
  'finit_module': 'ENOSYS',
  'delete_module': 'ENOSYS', 'personality-unsafe': 'EPERM', 'unshare-user': 'EPERM', 'unshare-net': 'EPERM',
  'setns': 'EPERM', 'clone-newuser': 'EPERM', 'clone3': 'ENOSYS', 'x32-getpid': 'ENOSYS',
  'socket-vsock': 'EPERM', 'socket-unix': 'EPERM', 'socketpair-unix-dgram': 'EPERM',
  'personality-query': 'ok', 'unshare-files': 'ok', 'socketpair-unix': 'ok', 'socket-inet': 'ok',
};

function suite(asNobody: boolean): void {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;

  before(() => {
    if (asNobody) letNobodyReach(CLI);
    repo = makeRepo({ providers: PROVIDERS, policy: { checks: [{ name: 'exists', run: ['test', '-f', 'a.txt'] }] } });
    writeFileSync(join(repo.home, 'agent-state', 'probe.py'), PROBE_CALLS);
    env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0' };
    delete env.SVC_SANDBOX;
    delete env.SVC_ORIGIN;
    if (asNobody) execFileSync('chown', ['-R', `${NOBODY}:${NOBODY}`, repo.root]);
  });
  after(() => repo.cleanup());

  function setPolicy(policy: unknown): void {
    writeFileSync(join(repo.repo, '.svc', 'policy.json'), JSON.stringify(policy));
    if (asNobody) execFileSync('chown', [`${NOBODY}:${NOBODY}`, join(repo.repo, '.svc', 'policy.json')]);
  }

  function cli(argv: string[]) {
    return asNobody
      ? runChild('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', process.execPath, CLI,
        ...argv], { cwd: repo.repo, env })
      : runChild(process.execPath, [CLI, ...argv], { cwd: repo.repo, env });
  }

  async function start(provider: string) {
    const res = await cli(['start', '--brief', `attack: ${provider}`, '--provider', provider, '--worktree']);
    const line = res.stdout.trim().split('\n')[0] ?? '';
    assert.ok(line.startsWith('{'), `svc start printed no run: ${res.stderr}`);
    const { run } = JSON.parse(line) as { run: string };
    return { run, state: readJson(join(repo.repo, '.svc', 'runs', run, 'state.json')) as any };
  }

  // How each shows that the hoarder was stopped: the kernel (a cgroup) kills the writer of the memfd and svc ends the
  // run once the agent exits; the file in /dev/shm outlives its writer, and svc ends the agent while it holds it.
  const HOARDS = [
    { provider: 'memfd', where: 'a memfd filled with write()', file: 'flood.txt', never: /exit 0/ },
    { provider: 'shm', where: 'a file in /dev/shm', file: 'a.txt', never: /fixed/ },
  ];
  for (const { provider, where, file, never } of HOARDS) {
    it(`ends a run whose agent holds 1 GiB in ${where} as a limits.memory_mb failure (limit 64 MiB)`, async () => {
      setPolicy({ limits: { memory_mb: 64 }, checks: [{ name: 'exists', run: ['test', '-f', 'a.txt'] }] });
      try {
        const s = await start(provider);
        assert.equal(s.state.status, 'failed');
        assert.match(s.state.error, /limits\.memory_mb/);
        // Which mechanism stopped it: the kernel in a cgroup (root can make one here), else svc's own count.
        const cgroup = !asNobody && memoryCgroupSupport().version !== null;
        assert.match(s.state.error, cgroup ? /the kernel ended \d+ of them/ : /MiB in memfds and tmpfs/);
        assert.doesNotMatch(readFileSync(join(s.state.workdir, file), 'utf8'), never);
        assert.ok(existsSync(join(repo.repo, '.svc', 'runs', s.run, 'artifacts', 'receipt.json')));
      } finally {
        setPolicy({ checks: [{ name: 'exists', run: ['test', '-f', 'a.txt'] }] });
      }
    });
  }

  it('refuses every listed system call inside the sandbox, while git, node, python and npm still work',
    { skip: x86 ? false : 'the attack script uses x86_64 syscall numbers' }, async () => {
      const s = await start('syscalls');
      const found = readFileSync(join(s.state.workdir, 'found.txt'), 'utf8');
      assert.match(found, /^Seccomp:\s+2$/m, found);
      for (const [call, answer] of Object.entries(EXPECTED)) {
        assert.match(found, new RegExp(`^${call}:${answer}$`, 'm'), `${call} should answer ${answer}:\n${found}`);
      }
      for (const tool of ['git', 'node', 'python', 'npm']) assert.match(found, new RegExp(`^${tool}:works$`, 'm'), found);
      assert.equal(s.state.status, 'succeeded', s.state.error);
    });
}

describe('the agent cannot hoard memory or reach kernel attack surface', {
  skip: bwrapWorks ? false : 'bwrap cannot run on this host',
}, () => {
  describe(`as ${isRoot ? 'root' : 'this user'}`, () => suite(false));
  describe('as an unprivileged user (nobody, through setpriv)', { skip: isRoot ? false : 'needs root to drop to nobody' },
    () => suite(true));
});
