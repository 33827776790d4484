// An agent's process group: a program that cannot start, output lines too long for one piece, a process that got
// away, a sandbox stopped while bwrap sets it up, and an agent whose worker was killed outright.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { spawnGroup } from '../../src/engine/spawn-group.ts';
import { terminateGroup } from '../../src/engine/proc-group.ts';
import { DEFAULT_LIMITS } from '../../src/spawn/limits.ts';
import { probeSandbox } from '../../src/spawn/sandbox-mode.ts';
import { TREE_MARKER } from '../../src/spawn/tree.ts';
import { statFields } from '../../src/proc-stat.ts';
import { processesMentioning, processesRunning } from './fixtures.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';
import { holdInSetup, sandboxInit } from '../helpers/held-sandbox.ts';
import { waitFor } from '../helpers/wait-for.ts';

const SPAWN_GROUP = new URL('../../src/engine/spawn-group.ts', import.meta.url).href;

const base = { cwd: tmpdir(), env: { PATH: process.env.PATH }, extra: {}, maxBytes: 1024 * 1024, timeoutMs: 30_000 };

describe('spawnGroup', () => {
  it('ends with code 127 and says why when the program cannot be started', async () => {
    // The shell that starts it beside its lifeline's watcher says so, named as the program (no name of svc's).
    const done = await spawnGroup(['/nonexistent/agent', '--help'], { ...base, sandbox: null }).done;
    assert.equal(done.code, 127);
    assert.equal(done.sandboxFailed, false);
    assert.match(done.output.toString(), /^\/nonexistent\/agent: .*\/nonexistent\/agent: not found\n$/);
  });

  it('hands a line past 64 KiB on in pieces, and a last line without its newline at the end', async () => {
    const lines: string[] = [];
    const script = "process.stdout.write('a'.repeat(200000) + '\\nlast')";
    const run = spawnGroup([process.execPath, '-e', script], {
      ...base, sandbox: null, onLine: (stream, line) => lines.push(`${stream}:${line}`),
    });
    assert.equal((await run.done).code, 0);
    assert.equal(lines.at(-1), 'stdout:last');
    const pieces = lines.slice(0, -1).map((l) => l.slice('stdout:'.length));
    assert.ok(pieces.length > 1, 'in more than one piece');
    assert.equal(pieces.join(''), 'a'.repeat(200000));
  });

  // A process that got away (here: it cleared svc's marker and left the session) holds the output pipes after the
  // first process exited: the run still ends (before, it waited for that process, a run `running` for as long).
  it('ends once the first process exited although a process that got away still holds its output', async () => {
    // A duration of its own: the cleanup kills only this test's process, never another copy's of the suite (the
    // argument whole, between NULs: another copy's longer pid would start with this one).
    const tag = `126.${process.pid}`;
    const script = `(env -i /usr/bin/setsid /bin/sleep ${tag} &) ; exit 0`;
    const run = spawnGroup(['/bin/sh', '-c', script], { ...base, sandbox: null });
    try {
      const bound = new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 30_000).unref());
      const done = await Promise.race([run.done, bound]);
      assert.notEqual(done, 'hung', 'spawnGroup waited for the process that got away');
      assert.equal(done === 'hung' ? null : done.code, 0);
    } finally {
      for (const pid of processesMentioning(`\0${tag}\0`)) process.kill(pid, 'SIGKILL');
    }
  });

  // bwrap's namespace init ignores a SIGTERM from outside (a PID namespace's init gets only the signals it handles)
  // and sets --die-with-parent only once its mounts are made, after its --new-session: a stop landing in between
  // ended svc's bwrap, and the init went on in a session of its own and started the agent, which ran on.
  it('ends every process of a sandbox stopped while bwrap sets it up', {
    skip: bwrapWorks ? false : 'bwrap cannot run on this host (svc doctor says why)',
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-spawn-group-'));
    const tag = `127.${process.pid}${Date.now() % 1000}`;
    const sandbox = { bwrap: probeSandbox(process.env).bwrap ?? 'bwrap', plan: writableOnly(dir) };
    const sandboxed = () => spawnGroup(['/bin/sleep', tag], { ...base, cwd: dir, sandbox });
    try {
      const held = await holdInSetup(sandboxed);
      assert.ok(held, 'a sandbox was held in its setup');
      const outer = held.run.identity.pid;
      const stop = terminateGroup(held.run.identity, 5_000);
      while (/^[RSD]$/.test(statFields(outer)?.[0] ?? '')) await sleep(10);
      process.kill(held.init, 'SIGCONT');
      await stop;
      await held.run.done;
      // The sandbox's sleep lasts 127 s: gone before then, it was ended, however loaded the machine.
      await waitFor(() => processesMentioning(tag).length === 0, 'every process of the stopped sandbox to end');
    } finally {
      for (const pid of processesMentioning(tag)) process.kill(pid, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // `kill <bwrap's pid>`, or a pkill that matched its argv: bwrap dies of it (it handles no SIGTERM) and its init
  // with it (--die-with-parent), so the agent too. Once the agent runs: bwrap's own argv ends with the agent's, so a
  // wait for any process naming `sleep <tag>` was over before bwrap had set up anything (the case below).
  it('ends a sandboxed agent when bwrap alone is sent SIGTERM', {
    skip: bwrapWorks ? false : 'bwrap cannot run on this host (svc doctor says why)',
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-spawn-group-'));
    const tag = `129.${process.pid}${Date.now() % 1000}`;
    const sandbox = { bwrap: probeSandbox(process.env).bwrap ?? 'bwrap', plan: writableOnly(dir) };
    const run = spawnGroup(['/bin/sleep', tag], { ...base, cwd: dir, sandbox });
    try {
      await waitFor(() => processesRunning(['/bin/sleep', tag]).length > 0, 'the agent to run');
      process.kill(run.identity.pid, 'SIGTERM');
      assert.equal((await run.done).signal, 'SIGTERM');
      // The sandbox's sleep lasts 129 s: gone before then, it was ended, however loaded the machine.
      await waitFor(() => processesMentioning(tag).length === 0, 'every process of the sandbox to end');
    } finally {
      run.kill();
      for (const pid of processesMentioning(tag)) process.kill(pid, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // bwrap makes its namespace's init, reports it on its status descriptor, then lets it go on: a SIGTERM in between
  // (a window of milliseconds under load: 7 of 120 SIGTERMs sent as the init appeared, at a load of 9 to 14 on 2
  // cores) left that init unreported, waiting for ever for the go-ahead in svc's group. Played by holding bwrap before
  // its report, in a write of its --info-fd (written just before it) to a pipe already full.
  it('ends the init of a sandbox whose bwrap was killed before it reported that init', {
    skip: bwrapWorks ? false : 'bwrap cannot run on this host (svc doctor says why)',
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-spawn-group-'));
    const tag = `131.${process.pid}${Date.now() % 1000}`;
    const sandbox = { bwrap: bwrapHeldBeforeReport(dir), plan: writableOnly(dir) };
    let reported = false;
    const run = spawnGroup(['/bin/sleep', tag], { ...base, cwd: dir, sandbox, onInit: () => { reported = true; } });
    const outer = run.identity.pid;
    try {
      const init = await waitFor(() => sandboxInit(outer), 'bwrap to make its init');
      process.kill(outer, 'SIGTERM');
      // Not yielding, so this process has not seen bwrap's exit yet: its init is left waiting in svc's group.
      for (const deadline = Date.now() + 10_000; statFields(outer)?.[0] !== 'Z' && Date.now() < deadline;);
      assert.equal(statFields(outer)?.[0], 'Z', 'bwrap did not die of its SIGTERM');
      assert.equal(statFields(init)?.[2], String(outer), 'the init left svc\'s group: bwrap had let it go on');
      assert.equal((await run.done).signal, 'SIGTERM');
      assert.equal(reported, false, 'bwrap reported its init: not the case played here');
      await waitFor(() => processesMentioning(tag).length === 0, 'the unreported init to end');
    } finally {
      run.kill();
      for (const pid of processesMentioning(tag)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone meanwhile (run.kill's SIGKILL)
        }
      }
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // The worker itself killed (SIGKILL, out of memory) in that same window: bwrap, tied to it by then
  // (--die-with-parent), dies with it, and nothing of svc was left to kill the init waiting in the group. Nothing
  // recorded it either (bwrap had not reported it), so no later stop could find it by its identity.
  it('ends the unreported init of a sandbox whose worker was killed before bwrap reported that init', {
    skip: bwrapWorks ? false : 'bwrap cannot run on this host (svc doctor says why)',
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-spawn-group-'));
    const tag = `132.${process.pid}${Date.now() % 1000}`;
    const worker = startWorker(dir, bwrapHeldBeforeReport(dir), ['/bin/sleep', tag]);
    try {
      const said = collect(worker);
      const outer = await waitFor(() => Number(/^bwrap (\d+)$/m.exec(said())?.[1]), 'the worker to start bwrap');
      await waitFor(() => sandboxInit(outer), 'bwrap to make its init');
      worker.kill('SIGKILL');
      await once(worker, 'exit');
      // bwrap is held in its report (after it tied itself to the worker): it never reported its init.
      assert.doesNotMatch(said(), /^init /m, 'bwrap reported its init: not the case played here');
      // The init waits for bwrap's go-ahead for ever unless it is killed: gone before the test's time runs out, it was.
      await waitFor(() => processesMentioning(tag).length === 0, 'the unreported init to end');
    } finally {
      worker.kill('SIGKILL');
      for (const pid of processesMentioning(tag)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // A process the scan at the first process's exit cannot see, yet holding the output: one in the middle of an exec
  // reads as an empty environment, and the agent that started it is gone. Played here by one that runs without the
  // marker (the first process waits until it does) and takes it back a moment later: it must still be ended.
  it('ends a process that carried no marker when the first process exited and carries it a moment later', async () => {
    const tag = `130.${process.pid}${Date.now() % 1000}`;
    const dir = mkdtempSync(join(tmpdir(), 'svc-late-'));
    const up = join(dir, 'up');
    spawnSync('mkfifo', [up]);
    const late = `echo > "$2"; sleep 0.3; exec env "${TREE_MARKER}=$1" /bin/sleep ${tag}`;
    const script = `(setsid env -u ${TREE_MARKER} /bin/sh -c '${late}' sh "$${TREE_MARKER}" "${up}" &) ; ` +
      `read _ < "${up}"; exit 0`;
    try {
      const done = await spawnGroup(['/bin/sh', '-c', script], { ...base, sandbox: null }).done;
      assert.equal(done.code, 0);
      assert.deepEqual(processesMentioning(`sleep\0${tag}\0`), [], 'the late process outlived the run');
    } finally {
      for (const pid of processesMentioning(`sleep\0${tag}\0`)) process.kill(pid, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // The worker SIGKILLed (out of memory, `kill -9`): nothing of svc is left to end what it started, so its agent
  // must not outlive it by itself, in a sandbox (bwrap's --die-with-parent, and the lifeline) or not (the lifeline).
  // One of the agent's processes leaves its group (its own session), as gemini's shell commands do.
  const leaves = (tag: string) => `setsid sleep ${tag} & echo up; exec sleep ${tag}`;
  for (const confined of [true, false]) {
    it(`ends ${confined ? 'a sandboxed' : 'an unconfined'} agent whose worker was killed outright`, {
      skip: !confined || bwrapWorks ? false : 'bwrap cannot run on this host (svc doctor says why)',
    }, async () => {
      await killedWorker(confined, leaves, (tag) => {
        if (confined) return;
        // The marker is the agent's environment's alone (owner-only), in no process's argv (world-readable).
        const [pid] = processesMentioning(`sleep\0${tag}\0`);
        const marker = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').find((v) => v.startsWith(TREE_MARKER));
        assert.ok(marker);
        assert.deepEqual(processesMentioning(marker.slice(TREE_MARKER.length + 1)), []);
      });
    });
  }

  // A process of its own session that keeps starting others: one scan and one kill let those started meanwhile go.
  it('ends an unconfined agent whose worker was killed outright while it kept starting processes', async () => {
    await killedWorker(false, (tag) => `setsid sh -c 'while :; do setsid sleep ${tag} & sleep 0.01; done' ${tag} & ` +
      `echo up; exec sleep ${tag}`);
  });

  // A stop's SIGTERM to the group (a timeout, `svc stop`), the agent taking its grace, and the worker killed then.
  it('ends an unconfined agent whose group was sent SIGTERM before its worker was killed outright', async () => {
    await killedWorker(false, (tag) => `trap '' TERM; ${leaves(tag)}`, (tag) => {
      // Both sleeps lead a group (one its own); both ignore the SIGTERM, which reaches the watcher in the agent's.
      for (const pid of processesMentioning(`sleep\0${tag}\0`)) process.kill(-Number(statFields(pid)?.[2]), 'SIGTERM');
    });
  });

  // The dead worker's scan finds the agent's processes by their marker, then kills each: a pid that changed hands in
  // between (its process ended, the kernel gave the number to another) must not be killed. In a pid namespace of its
  // own, where the next pid can be chosen, the scan's `grep` (first on the agent's PATH) lists the agent's processes,
  // ends one, and starts an unmarked process of its own session under that pid before the scan kills what it listed.
  // A reaped pid leaves /proc before its number is free (Linux 6.15 on), so the grep forks until it gets it; it
  // returns once the process is in its own session, out of reach of the kill of the agent's group.
  it('spares a process that took a marked pid between the dead worker\'s scan and its kill', {
    skip: spawnSync('unshare', ['-rpf', '--mount-proc', 'true']).status === 0 ? false : 'no user and pid namespaces',
  }, () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-spawn-group-'));
    try {
      const grep = spawnSync('sh', ['-c', 'command -v grep'], { encoding: 'utf8' }).stdout.trim();
      mkdirSync(join(dir, 'bin'));
      writeFileSync(join(dir, 'bin', 'grep'), `#!/bin/sh
[ "$1" = -lszxF ] && [ ! -e ${dir}/listed ] || exec ${grep} "$@"
: > ${dir}/listed
found=$(${grep} "$@")
read -r marked < ${dir}/marked
kill -s KILL $marked
while [ -e /proc/$marked ]; do :; done
tries=0
while [ $tries -lt 100 ]; do
  tries=$((tries + 1))
  echo $((marked - 1)) > /proc/sys/kernel/ns_last_pid
  setsid sh -c ': > ${dir}/sid.$$; exec sleep 1000' > /dev/null 2>&1 &
  [ $! = $marked ] && break
  kill -s KILL $!; wait $!
done
echo $! > ${dir}/innocent
if [ $! = $marked ]; then
  while [ ! -e ${dir}/sid.$marked ]; do :; done
  : > ${dir}/reused; printf '%s\\n' "$found"
fi
echo $PPID > ${dir}/watcher
`, { mode: 0o755 });
      // The agent waits for its second process, so it takes that one's pid back at once when it ends.
      const agent = `sleep 1000 & echo $! > ${dir}/marked; echo up; wait`;
      const worker = [
        `const { spawnGroup } = await import(${JSON.stringify(SPAWN_GROUP)});`,
        `spawnGroup(['/bin/sh', '-c', ${JSON.stringify(agent)}], { cwd: ${JSON.stringify(dir)},`,
        `  env: { PATH: ${JSON.stringify(`${dir}/bin:${process.env.PATH}`)} }, extra: {}, maxBytes: 1024,`,
        "  timeoutMs: 120_000, sandbox: null, onLine: (_, line) => process.stdout.write(`${line}\\n`) });",
        'setInterval(() => undefined, 60_000);',
      ].join('\n');
      // The namespace's init: kills the worker once its agent runs, waits (forking nothing, which would take the pid
      // the scan's grep chose) until the scan's watcher has ended, then says whether the other process lives.
      const init = `mkfifo ${dir}/up ${dir}/watcher
"${process.execPath}" --input-type=module -e '${worker.replace(/'/g, `'\\''`)}' > ${dir}/up &
read -r _ < ${dir}/up; kill -s KILL $!
read -r watcher < ${dir}/watcher
while read -r stat < /proc/$watcher/stat; do state=\${stat##*") "}; [ "\${state%% *}" = Z ] && break; done 2>/dev/null
read -r innocent < ${dir}/innocent
{ read -r stat < /proc/$innocent/stat; } 2>/dev/null && state=\${stat##*") "} && [ "\${state%% *}" != Z ] &&
  echo spared || echo killed`;
      const res = spawnSync('unshare', ['-rpf', '--mount-proc', 'sh', '-c', init],
        { encoding: 'utf8', timeout: 60_000, killSignal: 'SIGKILL' });
      // Spared proves nothing unless the other process took the marked pid: a case that could not force it fails.
      assert.ok(existsSync(join(dir, 'reused')), `the other process did not get the marked pid: ${res.stderr}`);
      assert.equal(res.stdout, 'spared\n', res.stderr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** A sandbox plan writing only `dir`, with no network: what each sandboxed case here runs its agent in. */
function writableOnly(dir: string) {
  return { readable: [], writable: [dir], protect: [], hidden: [], protocolReadable: [], protocolWritable: [],
    home: null, cwd: dir, limits: DEFAULT_LIMITS, network: 'none' as const };
}

/** Starts `agent(tag)` through a stand-in worker as the engine does, runs `meanwhile` once it runs, SIGKILLs the
 * worker and waits until nothing mentioning the tag is left. */
async function killedWorker(confined: boolean, agent: (tag: string) => string, meanwhile = (_tag: string) => {}) {
  const dir = mkdtempSync(join(tmpdir(), 'svc-spawn-group-'));
  const tag = `128.${process.pid}${Date.now() % 1000}`;
  const bwrap = confined ? probeSandbox(process.env).bwrap ?? 'bwrap' : null;
  // It says so once the agent runs, then waits.
  const worker = startWorker(dir, bwrap, ['/bin/sh', '-c', agent(tag)]);
  try {
    const said = collect(worker);
    await waitFor(() => said().split('\n').includes('up'), 'the agent to say it runs');
    await waitFor(() => processesMentioning(`sleep\0${tag}\0`).length > 1, 'the agent to run');
    meanwhile(tag);
    worker.kill('SIGKILL');
    await once(worker, 'exit');
    // The agent's sleeps last 128 s: gone before then, they were ended, however loaded the machine.
    await waitFor(() => processesMentioning(tag).length === 0, 'every process of the agent to end');
  } finally {
    worker.kill('SIGKILL');
    for (const pid of processesMentioning(tag)) process.kill(pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A stand-in worker running `argv` as the engine does (sandboxed by `bwrap` unless null): it prints the agent's lines,
 * and `bwrap <pid>` once its sandbox's init is reported, then waits. */
function startWorker(dir: string, bwrap: string | null, argv: string[]) {
  const plan = writableOnly(dir);
  const script = [
    `const { spawnGroup } = await import(${JSON.stringify(SPAWN_GROUP)});`,
    `const bwrap = ${JSON.stringify(bwrap)};`,
    `const sandbox = bwrap === null ? null : { bwrap, plan: ${JSON.stringify(plan)} };`,
    `const run = spawnGroup(${JSON.stringify(argv)}, { cwd: ${JSON.stringify(dir)},`,
    '  env: { PATH: process.env.PATH }, extra: {}, maxBytes: 1024, timeoutMs: 120_000, sandbox,',
    "  onLine: (_, line) => process.stdout.write(`${line}\\n`),",
    "  onInit: (init) => process.stdout.write(`init ${init.pid}\\n`) });",
    'if (sandbox) process.stdout.write(`bwrap ${run.identity.pid}\\n`);',
    'setInterval(() => undefined, 60_000);',
  ].join('\n');
  return spawn(process.execPath, ['--input-type=module', '-e', script], {
    detached: true, stdio: ['ignore', 'pipe', 'inherit'],
  });
}

/** What `worker` has printed so far. */
function collect(worker: ReturnType<typeof startWorker>): () => string {
  let said = '';
  worker.stdout!.setEncoding('utf8').on('data', (more: string) => { said += more; });
  return () => said;
}

/** A stand-in for bwrap in `dir`, held just before it reports its namespace's init (after it tied itself to its
 * parent), in a write of its --info-fd (written just before the status line) to a pipe already full. */
function bwrapHeldBeforeReport(dir: string): string {
  // Written to until a write would block (each one of PIPE_BUF bytes, written whole or not at all).
  writeFileSync(join(dir, 'bwrap'), `#!/bin/sh
mkfifo "${dir}/full" && exec 0<>"${dir}/full" || exit 1
dd if=/dev/zero of="${dir}/full" bs=4096 count=1024 oflag=nonblock 2>/dev/null
exec "${probeSandbox(process.env).bwrap ?? 'bwrap'}" --info-fd 0 "$@"
`, { mode: 0o755 });
  return join(dir, 'bwrap');
}
