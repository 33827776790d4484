// Process groups we own: identity recorded at spawn (pid + /proc start time), checked before any signal.
import { readFileSync } from 'node:fs';

export interface ProcIdentity {
  pid: number;
  pgid: number;
  /** Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); null where /proc is absent. */
  proc_start: string | null;
}

export function procStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses; fields are counted after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

export function identityOf(pid: number): ProcIdentity {
  return { pid, pgid: pid, proc_start: procStart(pid) };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Signals the group only if it is still ours: a live leader must have the recorded start time (else the pid was
 * reused). With the leader gone, Linux does not hand out a pid that is still some group's id, so members left in
 * group `pgid` are ours.
 */
export function signalGroup(id: ProcIdentity, signal: NodeJS.Signals): boolean {
  if (id.pgid <= 1) return false;
  if (alive(id.pid)) {
    const now = procStart(id.pid);
    if (id.proc_start !== null && now !== null && now !== id.proc_start) return false;
  }
  try {
    process.kill(-id.pgid, signal);
    return true;
  } catch {
    return false;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export async function waitGroupGone(pgid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!groupAlive(pgid)) return true;
    await sleep(50);
  }
  return !groupAlive(pgid);
}

/** SIGTERM, then SIGKILL after the grace period (STYLE: Processes); resolves once the group is empty. */
export async function terminateGroup(id: ProcIdentity, graceMs: number): Promise<void> {
  if (!signalGroup(id, 'SIGTERM')) return;
  if (await waitGroupGone(id.pgid, graceMs)) return;
  signalGroup(id, 'SIGKILL');
  await waitGroupGone(id.pgid, 5_000);
}
