// A process as /proc tells it: the fields of its stat line and whether it has died. A leaf the published client
// (src/client) may import too, so spawn/, engine/ and client/ read processes one way.
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
