import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { runChild } from '../helpers/run-child.ts';
import { fixFor } from '../../src/cli/doctor.ts';
import { letNobodyReach } from '../helpers/nobody-reach.ts';
import { withoutPrlimit, withoutPrlimitSkip } from '../helpers/without-prlimit.ts';
import { findPrlimit } from '../../src/spawn/limits.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');
// A HOME of the test's own: svc keeps its compile cache under ~/.svc.
const HOME = mkdtempSync(join(tmpdir(), 'svc-doctor-home-'));
after(() => rmSync(HOME, { recursive: true, force: true }));
const doctor = (...args: string[]) =>
  runChild(process.execPath, [CLI, 'doctor', ...args], { env: { ...process.env, HOME } });

describe('svc doctor', () => {
  it('reports a working sandbox on this host (CI installs bubblewrap)', async () => {
    const r = await doctor('--json');
    const report = JSON.parse(r.stdout) as { sandbox: { ok: boolean; bwrap: string | null; reason: string | null } };
    assert.equal(report.sandbox.reason, null);
    assert.equal(report.sandbox.ok, true);
    assert.equal(r.code, 0);
  });

  it('says whether it runs as root and what that changes', async () => {
    const r = await doctor('--json');
    const report = JSON.parse(r.stdout) as { root: boolean; root_note: string | null };
    const root = process.getuid?.() === 0;
    assert.equal(report.root, root);
    if (root) assert.match(report.root_note ?? '', /no capability.*RLIMIT_NPROC/);
    else assert.equal(report.root_note, null);
    const human = await doctor();
    assert.match(human.stdout, root ? /^user: +root \(uid 0\)\. svc runs as root/m : /^user: +uid \d+$/m);
  });

  it('says which system calls the filter refuses and what bounds an agent\'s memory, as root and as nobody', async () => {
    const r = await doctor('--json');
    const report = JSON.parse(r.stdout) as {
      syscall_filter: { arch: string | null; refused: string[] }; memory: { mechanism: string; detail: string };
    };
    if (process.arch === 'x64') {
      assert.equal(report.syscall_filter.arch, 'x86_64');
      for (const call of ['keyctl', 'io_uring_setup', 'ptrace', 'bpf', 'clone3 (ENOSYS)', 'unshare (new namespaces)']) {
        assert.ok(report.syscall_filter.refused.includes(call), call);
      }
    }
    assert.match(report.memory.mechanism, /^(cgroup|watchdog)$/);
    const human = await doctor();
    assert.match(human.stdout, /^system calls: +\d+ calls refused .*keyctl/m);
    assert.match(human.stdout, new RegExp(`^memory: +${report.memory.mechanism}: `, 'm'));
    if (process.getuid?.() !== 0) return;
    letNobodyReach(CLI);
    // nobody may make no cgroup on a host that delegates none: the watchdog counts, and doctor says why.
    const nobody = await runChild('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '--',
      process.execPath, CLI, 'doctor', '--json'], { env: { ...process.env, HOME: tmpdir() } });
    const asNobody = JSON.parse(nobody.stdout) as { memory: { mechanism: string; detail: string } };
    if (asNobody.memory.mechanism === 'watchdog') assert.match(asNobody.memory.detail, /memfds.*No cgroup: /);
    else assert.equal(asNobody.memory.mechanism, 'cgroup');
  });

  it('exits 1 saying where bwrap is installed when PATH holds only folders under /tmp', async () => {
    const bwrap = ['/usr/bin/bwrap', '/bin/bwrap', '/usr/local/bin/bwrap'].find((p) => existsSync(p));
    assert.ok(bwrap, 'this host has bwrap in a system folder (CI installs bubblewrap)');
    const a = mkdtempSync(join(tmpdir(), 'svc-doctor-'));
    const b = mkdtempSync(join(tmpdir(), 'svc-doctor-'));
    try {
      const r = await runChild(process.execPath, [CLI, 'doctor'], { env: { PATH: `${a}:${b}`, HOME: a } });
      assert.equal(r.code, 1);
      assert.match(r.stdout, new RegExp(`^bwrap: +not on PATH \\(installed at ${bwrap}\\)$`, 'm'));
      const dir = dirname(bwrap);
      assert.ok(r.stdout.includes(`\nfix:             bwrap is installed at ${bwrap} but ${dir} is not on PATH ` +
        `(PATH=${a}:${b}): add it, e.g. PATH="$PATH:${dir}"\n`), r.stdout);
      assert.doesNotMatch(r.stdout, /apt-get install/);
      const j = await runChild(process.execPath, [CLI, 'doctor', '--json'], { env: { PATH: a, HOME: a } });
      assert.match(JSON.parse(j.stdout).fix, /^bwrap is installed at /);
    } finally {
      rmSync(a, { recursive: true, force: true });
      rmSync(b, { recursive: true, force: true });
    }
  });

  it('names the bubblewrap package and the opt-out when bwrap is nowhere', () => {
    const probe = { ok: false, bwrap: null, prlimit: '/usr/bin/prlimit', userNamespaces: null,
      reason: 'bwrap not found on PATH' };
    const fix = fixFor(probe, '/tmp/x', null);
    assert.match(fix ?? '', /apt-get install bubblewrap/);
    assert.match(fix ?? '', /SVC_SANDBOX=none/);
    assert.doesNotMatch(fix ?? '', /util-linux/);
    assert.equal(fixFor({ ...probe, ok: true, reason: null }, '/usr/bin', null), null);
    // Neither is there: both packages are named, so installing one is not followed by a second refusal.
    const neither = fixFor({ ...probe, prlimit: null }, '/tmp/x', null) ?? '';
    assert.match(neither, /apt-get install bubblewrap.*; and install the Debian package "util-linux"/);
  });

  it('says where prlimit is, which sets the sandbox\'s kernel limits', async () => {
    const prlimit = findPrlimit();
    assert.ok(prlimit, 'this host has util-linux\'s prlimit');
    const r = await doctor('--json');
    assert.equal(JSON.parse(r.stdout).sandbox.prlimit, prlimit);
    const human = await doctor();
    assert.ok(human.stdout.includes(`\nprlimit:         ${prlimit}\n`), human.stdout);
    assert.match(human.stdout, /^sandbox: +works \(.*kernel limits/m);
  });

  const noPrlimit = { skip: withoutPrlimitSkip };
  it('exits 1 naming util-linux when prlimit is not where the sandbox runs it', noPrlimit, async () => {
    const run = (...args: string[]) => {
      const [command, ...rest] = withoutPrlimit([process.execPath, CLI, 'doctor', ...args]);
      return runChild(command!, rest, { env: { ...process.env, HOME } });
    };
    const r = await run();
    assert.equal(r.code, 1);
    assert.ok(r.stdout.includes('\nprlimit:         not found in /usr/bin, /bin, /usr/sbin, /sbin\n'), r.stdout);
    const said = /^sandbox: +does not work: (.*)$/m.exec(r.stdout)?.[1];
    assert.match(said ?? '', /^prlimit is not in .*, so no sandbox would get its kernel limits$/);
    assert.ok(r.stdout.includes('\nfix:             install the Debian package "util-linux" (apt-get install ' +
      'util-linux), which holds prlimit\n'), r.stdout);
    const j = await run('--json');
    const report = JSON.parse(j.stdout) as { sandbox: { ok: boolean; prlimit: string | null }; fix: string };
    assert.deepEqual([j.code, report.sandbox.ok, report.sandbox.prlimit], [1, false, null]);
    assert.match(report.fix, /util-linux/);
  });
});
