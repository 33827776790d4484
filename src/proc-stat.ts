// A process as /proc tells it: the fields of its stat line, whether it has died, and its identity (pid and start
// time), which svc records of a process it starts and checks before it takes a pid for that process again. A leaf the
// published client (src/client) may import too, so spawn/, engine/ and client/ read processes one way.
import { readFileSync } from 'node:fs';

/** Fields of /proc/<pid>/stat after the command name: index 0 is field 3 (state), 2 is the group, 19 the start time. */
export function statFields(pid: number): string[] | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // The command name may hold spaces and parentheses; fields are counted after the last ')'.
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/**
 * Whether process `pid` (these its stat fields) has died: a zombie (Z, or X while it goes) keeps its pid only until
 * its parent's wait(), which a PID 1 that is no init (a container's node) never makes. A live process whose main
 * thread alone exited (pthread_exit) also reads Z, so only a zombie left with one thread counts.
 */
export function hasDied(pid: number, fields: string[] | null): boolean {
  if (fields?.[0] !== 'Z' && fields?.[0] !== 'X') return false;
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return true;
  }
  return Number(/^Threads:\s*(\d+)/m.exec(status)?.[1] ?? '1') <= 1;
}

/** A process svc recorded as a group's leader: a pid is reused, a pid with the same start time is the same process. */
export interface ProcIdentity {
  pid: number;
  pgid: number;
  /** Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); null where /proc is absent. */
  proc_start: string | null;
}

/** The start time of the live process `pid`; null for one that has died, even while a zombie keeps its pid. */
export function procStart(pid: number): string | null {
  const fields = statFields(pid);
  return hasDied(pid, fields) ? null : fields?.[19] ?? null;
}

/** Its start time even for a zombie: a zombie group leader's pid is not reused while its group lives, so the live
 * members it leaves are still the group recorded (engine/proc-group.ts signalGroup). */
export function identityOf(pid: number): ProcIdentity {
  return { pid, pgid: pid, proc_start: statFields(pid)?.[19] ?? null };
}

/** Signal 0 checks existence (EPERM: it exists but belongs to someone else); a zombie is not alive. */
export function isPidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  // A negative pid names a group, which has no stat of its own.
  return pid < 0 || !hasDied(pid, statFields(pid));
}

/** A process as a lock or a folder's name records it: its pid and its start time (null where /proc is absent). */
export interface Holder {
  pid: number;
  proc_start: string | null;
}

/** A holder counts while its very process lives (its start time the one it wrote); one svc did not write, never. */
export function holderAlive(holder: Holder | null): boolean {
  if (holder === null) return false;
  // Without /proc no start time was written: only the pid can say, and a reused one keeps the lock (never a wrong
  // take-over; a person removes it).
  if (holder.proc_start === null) return isPidAlive(holder.pid);
  return procStart(holder.pid) === holder.proc_start;
}
