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

/** /proc/net's LISTEN state; a loopback (127/8, ::1, ::ffff:127/104) or any-address local address, in its hex form. */
const LISTEN = '0A';
const LOOPBACK_OR_ANY = /^(?:[0-9A-F]{6}7F|0{8}|0{32}|0{24}01000000|0{16}FFFF0000[0-9A-F]{6}7F)$/;

/**
 * The users owning the TCP sockets that listen at `port` on a loopback or any address, as /proc/net/tcp and tcp6 say
 * (what a connection to a loopback address of this port reaches); null when neither can be read.
 */
export function loopbackListenerUids(port: number): number[] | null {
  const uids: number[] = [];
  let read = false;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    read = true;
    for (const line of text.split('\n').slice(1)) {
      // sl, local_address, rem_address, st, tx:rx, tr:when, retrnsmt, uid, …
      const fields = line.trim().split(/\s+/);
      const [address, hexPort] = (fields[1] ?? '').split(':');
      const listening = fields[3] === LISTEN && parseInt(hexPort ?? '', 16) === port;
      if (listening && LOOPBACK_OR_ANY.test(address ?? '')) uids.push(Number(fields[7]));
    }
  }
  return read ? uids : null;
}
