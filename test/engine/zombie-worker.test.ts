// A worker killed under a parent that never reaps it (the container's node is PID 1, no init) stays a zombie: its pid
// and start time still read from /proc, yet it has died, and a run or job that waits on it must end.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { isPidAlive } from '../../src/proc-stat.ts';
import { identityOf, procStart, statFields } from '../../src/proc-stat.ts';
import { terminateGroup } from '../../src/engine/proc-group.ts';
import { isChildOf } from '../../src/engine/run-context.ts';
import { workerAlive } from '../../src/engine/proc-group.ts';

/** A process killed under a parent (`sleep`, after the shell's exec) that never waits for it: a zombie. */
async function zombie(): Promise<{ pid: number; proc_start: string | null; parent: () => void }> {
  const shell = spawn('sh', ['-c', 'sleep 300 & echo $!; exec sleep 300'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const [line] = (await once(shell.stdout, 'data')) as [Buffer];
  const pid = Number(line.toString().trim());
  // Only once the shell is `sleep` may the child die: the shell itself would reap it.
  while (readFileSync(`/proc/${shell.pid}/comm`, 'utf8').trim() !== 'sleep') await sleep(10);
  const identity = identityOf(pid);
  process.kill(pid, 'SIGKILL');
  while (statFields(pid)?.[0] !== 'Z') await sleep(10);
  return { ...identity, parent: () => shell.kill('SIGKILL') };
}

/**
 * P (its shell execs sleep, so it never reaps) starts C, which leads its own group, starts G in it and exits: C is
 * P's zombie and G a live member of C's group. `kill` ends P.
 */
async function zombieLedGroup(env: NodeJS.ProcessEnv = process.env) {
  const script = 'setsid sh -c "sleep 301 & echo \\$!; sleep 0.3" & echo $!; exec sleep 300';
  const agent = spawn('sh', ['-c', script], { detached: true, env, stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  while (out.split('\n').length < 3) out += ((await once(agent.stdout, 'data')) as [Buffer])[0].toString();
  const pids = out.trim().split('\n').map(Number);
  // The two echoes race: C is the one that leads its own group.
  const leader = pids.find((pid) => statFields(pid)?.[2] === String(pid))!;
  const member = pids.find((pid) => pid !== leader)!;
  while (statFields(leader)?.[0] !== 'Z') await sleep(10);
  return { parent: agent.pid!, leader, member, kill: () => agent.kill('SIGKILL') };
}

describe('a worker that died as a zombie', () => {
  const parents: (() => void)[] = [];
  after(() => parents.forEach((kill) => kill()));

  it('is not alive, has no start time, and is no longer the worker its run recorded', async () => {
    const dead = await zombie();
    parents.push(dead.parent);
    assert.notEqual(dead.proc_start, null, 'recorded while alive');
    assert.equal(procStart(dead.pid), null);
    assert.equal(isPidAlive(dead.pid), false);
    assert.equal(workerAlive({ pid: dead.pid, proc_start: dead.proc_start }), false);
  });

  it('leaves a live process alive', () => {
    assert.equal(isPidAlive(process.pid), true);
    assert.equal(workerAlive({ pid: process.pid, proc_start: procStart(process.pid) }), true);
  });

  it('a stop still kills the live members of a group whose leader is a zombie', async () => {
    const { parent, leader, member, kill } = await zombieLedGroup();
    parents.push(kill);
    assert.equal(statFields(member)?.[2], String(leader), 'G is in the zombie C\'s group');
    await terminateGroup(identityOf(parent), 2_000);
    assert.equal(isPidAlive(member), false);
  });

  // A stop of a run's recorded child reads its identity from disk and checks each member is the run's: the zombie
  // leader (no environment left to show) is not a member that could fail that check.
  it('a stop from disk kills the live members of the run\'s child group whose leader is a zombie', async () => {
    const { leader, member, kill } = await zombieLedGroup({ ...process.env, SVC_RUN_ID: 'rzombie000001' });
    parents.push(kill);
    await terminateGroup(identityOf(leader), 2_000, isChildOf('rzombie000001'));
    assert.equal(isPidAlive(member), false);
  });
});
