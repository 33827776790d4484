// A sandbox held in its setup, for the tests of a stop that lands there: bwrap's namespace init ignores a SIGTERM
// from outside and ties itself to bwrap (--die-with-parent) only after its --new-session, so it can outlive bwrap.
import { setTimeout as sleep } from 'node:timers/promises';
import type { GroupRun } from '../../src/engine/spawn-group.ts';
import { readlinkOrNull, readOrNull } from '../../src/spawn/tree.ts';
import { statFields } from '../../src/proc-stat.ts';

/**
 * The namespace's init, stopped as soon as bwrap has made it (looked for without yielding, as bwrap sets up in a few
 * milliseconds; one that was done already is ended and another started), while still in bwrap's process group;
 * bwrap has reported it once it waits for it (asleep). Null when 10 tries found none in time.
 */
export async function holdInSetup(sandboxed: () => GroupRun): Promise<{ run: GroupRun; init: number } | null> {
  for (let attempt = 0; attempt < 10; attempt++) {
    const run = sandboxed();
    const outer = run.identity.pid;
    let init = 0;
    for (const deadline = Date.now() + 5_000; !init && Date.now() < deadline;) {
      init = sandboxInit(outer);
    }
    if (init) process.kill(init, 'SIGSTOP');
    while (/^[RD]$/.test(statFields(outer)?.[0] ?? '')) await sleep(1);
    if (init && statFields(init)?.[2] === String(outer)) return { run, init };
    run.kill();
    await run.done;
  }
  return null;
}

/** bwrap's child in a PID namespace of its own, else 0: not a process the shell that execs bwrap forked before (the
 * fork that leaves the group's watcher, spawn-group.ts), nor one a test's stand-in for bwrap ran. */
export function sandboxInit(outer: number): number {
  const child = Number(readOrNull(`/proc/${outer}/task/${outer}/children`)?.trim().split(' ')[0]);
  // A child already gone has no namespace to read: that is no sign of another.
  const inner = child ? readlinkOrNull(`/proc/${child}/ns/pid`) : null;
  return inner !== null && inner !== readlinkOrNull('/proc/self/ns/pid') ? child : 0;
}
