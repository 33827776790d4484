// The seccomp program svc hands bwrap, run through a classic-BPF interpreter for each architecture it supports: the
// sandbox tests (test/security-boundary/kernel-surface.test.ts) prove the x86_64 program in a real kernel; this one
// also covers aarch64, which this host cannot run, and the architectures svc refuses to guess at.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { buildFilter, REFUSED_SYSCALLS } from '../../src/spawn/seccomp.ts';

const ALLOW = 0x7fff0000;
const EPERM = 0x00050001;
const ENOSYS = 0x00050026;
const AUDIT = { x64: 0xc000003e, arm64: 0xc00000b7, i386: 0x40000003, arm: 0x40000028 };

/** Runs `program` on one call (nr, arch, first two arguments) as the kernel would: loads, jumps, returns. */
function verdict(program: Buffer, nr: number, arch: number, arg0 = 0, arg1 = 0): number {
  const data = Buffer.alloc(64);
  data.writeUInt32LE(nr >>> 0, 0);
  data.writeUInt32LE(arch >>> 0, 4);
  data.writeUInt32LE(arg0 >>> 0, 16);
  data.writeUInt32LE(arg1 >>> 0, 24);
  let a = 0;
  for (let pc = 0; pc < program.length / 8; pc++) {
    const code = program.readUInt16LE(pc * 8);
    const jt = program.readUInt8(pc * 8 + 2);
    const jf = program.readUInt8(pc * 8 + 3);
    const k = program.readUInt32LE(pc * 8 + 4);
    if (code === 0x20) a = data.readUInt32LE(k);
    else if (code === 0x06) return k;
    else if (code === 0x15) pc += a === k ? jt : jf;
    else if (code === 0x35) pc += a >= k ? jt : jf;
    else if (code === 0x45) pc += (a & k) !== 0 ? jt : jf;
    else if (code === 0x54) a = (a & k) >>> 0;
    else throw new Error(`unexpected opcode ${code}`);
  }
  throw new Error('fell off the end of the program');
}

for (const [arch, table] of [['x64', 'x86_64'], ['arm64', 'aarch64']] as const) {
  describe(`the ${table} system-call filter`, () => {
    const program = buildFilter(arch)!;
    const native = AUDIT[arch];
    const nr = (name: string) => REFUSED_SYSCALLS.find((c) => c.name === name)![table];

    it('refuses each listed call with its errno', () => {
      for (const call of REFUSED_SYSCALLS) {
        if (call.rule !== 'eperm' && call.rule !== 'enosys') continue;
        assert.equal(verdict(program, call[table], native), call.rule === 'eperm' ? EPERM : ENOSYS, call.name);
      }
    });

    it('lets everything else through: read, write, openat, execve, mmap, fork-style clone, a thread', () => {
      const plain = table === 'x86_64' ? [0, 1, 257, 59, 9, 39] : [63, 64, 56, 221, 222, 172];
      for (const n of plain) assert.equal(verdict(program, n, native), ALLOW, `syscall ${n}`);
      assert.equal(verdict(program, nr('clone'), native, 0x01200011), ALLOW, 'fork: CLONE_CHILD_SETTID|…|SIGCHLD');
      assert.equal(verdict(program, nr('clone'), native, 0x003d0f00), ALLOW, 'pthread_create');
    });

    it('refuses clone and unshare only when they ask for a namespace, and personality only with unsafe flags', () => {
      for (const flag of [0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000]) {
        assert.equal(verdict(program, nr('clone'), native, flag | 17), EPERM);
        assert.equal(verdict(program, nr('unshare'), native, flag), EPERM);
      }
      assert.equal(verdict(program, nr('unshare'), native, 0x80), EPERM, 'CLONE_NEWTIME');
      assert.equal(verdict(program, nr('unshare'), native, 0x400), ALLOW, 'CLONE_FILES');
      assert.equal(verdict(program, nr('personality'), native, 0), ALLOW);
      assert.equal(verdict(program, nr('personality'), native, 0xffffffff), ALLOW);
      assert.equal(verdict(program, nr('personality'), native, 0x0040000), EPERM, 'ADDR_NO_RANDOMIZE');
      assert.equal(verdict(program, nr('personality'), native, 0x0400000), EPERM, 'READ_IMPLIES_EXEC');
    });

    it('refuses a Unix socket and a vsock, which no network namespace confines, and lets every other family through',
      () => {
        assert.equal(verdict(program, nr('socket'), native, 1), EPERM, 'AF_UNIX');
        assert.equal(verdict(program, nr('socket'), native, 40), EPERM, 'AF_VSOCK');
        for (const family of [2, 10, 16, 17]) assert.equal(verdict(program, nr('socket'), native, family), ALLOW);
      });

    it('gives a Unix stream or seqpacket socketpair, whose ends reach only each other (libuv starts children with one)',
      () => {
        const socketpair = table === 'x86_64' ? 53 : 199;
        const CLOEXEC_NONBLOCK = 0o2000000 | 0o4000;
        for (const type of [1, 5, 1 | CLOEXEC_NONBLOCK]) {
          assert.equal(verdict(program, socketpair, native, 1, type), ALLOW, `type ${type}`);
        }
        assert.equal(verdict(program, socketpair, native, 2, 2), ALLOW, 'another family');
      });

    it('refuses a Unix datagram socketpair, whose end sends to any socket file by its path', () => {
      const socketpair = table === 'x86_64' ? 53 : 199;
      assert.equal(verdict(program, socketpair, native, 1, 2), EPERM);
      assert.equal(verdict(program, socketpair, native, 1, 2 | 0o2000000 | 0o4000), EPERM, 'with its flags');
    });

    it('refuses every other ABI (and x32) whatever the call', () => {
      for (const other of [AUDIT.i386, AUDIT.arm, arch === 'x64' ? AUDIT.arm64 : AUDIT.x64]) {
        assert.equal(verdict(program, 0, other), ENOSYS);
      }
      if (arch === 'x64') assert.equal(verdict(program, 0x40000000 | 39, native), ENOSYS);
    });
  });
}

describe('an architecture svc has no syscall table for', () => {
  it('gets no filter rather than a guessed one', () => {
    for (const arch of ['ia32', 'arm', 's390x', 'ppc64', 'riscv64', 'loong64']) assert.equal(buildFilter(arch), null);
  });
});
