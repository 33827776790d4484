// The processes an agent started, found without cgroups or prctl (neither is reachable from Node; a process group is
// not enough, since `setsid` or a double fork leaves it): inside a sandbox, its PID namespace; without one, repeated
// PPid walks plus the environment marker SVC_PROCESS_TREE=<nonce> (docs/engine.md "Without the sandbox": its limit).
// Beside it, the small path readers that spawn/ and engine/ share (orNull and its kin, pathKind).
import { lstatSync, readFileSync, readdirSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, resolve } from 'node:path';
import { hasDied, statFields } from '../proc-stat.ts';

type Proc = NonNullable<ReturnType<typeof readProc>>;

/** What `read` returns, or null when it throws: a /proc file goes with its process, a path may be gone. */
export function orNull<T>(read: () => T): T | null {
  try {
    return read();
  } catch {
    return null;
  }
}

export const readOrNull = (path: string): string | null => orNull(() => readFileSync(path, 'utf8'));
export const readlinkOrNull = (path: string): string | null => orNull(() => readlinkSync(path));
/** The path with every link resolved, or null when it (or a folder on its way) is gone. */
export const realOrNull = (path: string): string | null => orNull(() => realpathSync(path));

/** The path a link at `path` leads to, spelt from the link's folder's real path (the kernel resolves a `..` there, not
 * along a spelling through a linked folder) and the link's own text, not as the target's real path (that could be
 * spelt otherwise, where a mount would miss what the view shows, and bwrap resolves an absolute link from outside the
 * view); `path` itself when no link; null when gone or more than `hops` links. */
export function linkTarget(path: string, hops = 8): string | null {
  const kind = pathKind(path);
  if (kind !== 'link') return kind === null ? null : path;
  const [next, dir] = [readlinkOrNull(path), realOrNull(dirname(path))];
  return next !== null && dir !== null && hops > 0 ? linkTarget(resolve(dir, next), hops - 1) : null;
}

/** What is at `path`; `follow`: through links (only where the link is not an agent's to plant). */
export function pathKind(path: string, follow = false): 'dir' | 'file' | 'link' | 'other' | null {
  const st = orNull(() => (follow ? statSync(path) : lstatSync(path)));
  if (!st) return null;
  return st.isSymbolicLink() ? 'link' : st.isDirectory() ? 'dir' : st.isFile() ? 'file' : 'other';
}

/** Blocks this thread for `ms`: for a caller that must not let the event loop run meanwhile. */
export function blockFor(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Octal escapes (`\040`) in mountinfo paths. */
export function unescapeMount(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}

/** A live process: its pid, its parent's, and its start time (which tells a reused pid apart). */
function readProc(pid: number) {
  const fields = statFields(pid);
  if (!fields || hasDied(pid, fields)) return null;
  return { pid, ppid: Number(fields[1]), start: fields[19] ?? '' };
}

export function allPids(): number[] {
  return (orNull(() => readdirSync('/proc')) ?? []).filter((n) => /^\d+$/.test(n)).map(Number);
}

function liveProcs(): Proc[] {
  return allPids().map(readProc).filter((p): p is Proc => p !== null);
}

/** Host pids of every process in the PID namespace that `outerPid` (the bwrap svc started) created. */
export function sandboxMembers(outerPid: number): number[] {
  const pidNamespace = (pid: number) => readlinkOrNull(`/proc/${pid}/ns/pid`);
  const own = pidNamespace(outerPid);
  const procs = liveProcs();
  const inner = procs.filter((p) => p.ppid === outerPid).map((p) => pidNamespace(p.pid)).find((ns) => ns && ns !== own);
  if (!inner) return [];
  return procs.filter((p) => pidNamespace(p.pid) === inner).map((p) => p.pid);
}

/** A NUL-separated /proc file (cmdline, environ) as a list; null when it cannot be read. */
export function procList(pid: number, file: 'cmdline' | 'environ'): string[] | null {
  return readOrNull(`/proc/${pid}/${file}`)?.split('\0').filter((s) => s !== '') ?? null;
}

/** The environment variable that marks a tree's processes. */
export const TREE_MARKER = 'SVC_PROCESS_TREE';

export function createTreeGuard() {
  const marker = `${TREE_MARKER}=${randomBytes(12).toString('hex')}`;
  const known = new Map<number, Proc>();
  let root: Proc | null = null;

  /** Of `procs`, the root and the known processes still alive (same start time), and all their descendants. */
  function descendants(procs: Proc[]): Map<number, Proc> {
    const children = Map.groupBy(procs, (p) => p.ppid);
    const live = new Map(procs.map((p) => [p.pid, p]));
    const found = new Map<number, Proc>();
    const queue = [...known.values(), ...(root ? [root] : [])].filter((p) => live.get(p.pid)?.start === p.start);
    for (let p = queue.shift(); p !== undefined; p = queue.shift()) {
      if (found.has(p.pid)) continue;
      found.set(p.pid, p);
      queue.push(...(children.get(p.pid) ?? []));
    }
    return found;
  }

  function scan(): Proc[] {
    const procs = liveProcs().filter((p) => p.pid !== process.pid);
    const found = descendants(procs);
    for (const p of procs) if (!found.has(p.pid) && procList(p.pid, 'environ')?.includes(marker)) found.set(p.pid, p);
    return [...found.values()];
  }

  return {
    /** `NAME=value` to put in the agent's environment. */
    marker,
    /** Starts watching `rootPid` (the agent's first process). */
    watch(rootPid: number): void {
      root = readProc(rootPid);
    },
    /** Records the descendants alive now; call often while the agent runs. */
    sample(): void {
      if (root) for (const [pid, p] of descendants(liveProcs())) known.set(pid, p);
    },
    /** Every known or marked process, alive now (for a pause). */
    members(): number[] {
      return scan().map((p) => p.pid);
    },
    /** Kills everything the agent started, until a scan finds nothing left. */
    killAll(): void {
      // Each round kills what it finds; a process forking during the round is found by the next one.
      for (let round = 0; round < 50; round++) {
        const left = scan();
        if (left.length === 0) return;
        for (const p of left) {
          // The start time guards against a pid reused since it was recorded; gone or not ours, it is let be.
          if (readProc(p.pid)?.start === p.start) orNull(() => process.kill(p.pid, 'SIGKILL'));
          known.set(p.pid, p);
        }
        // A blocking pause: killAll runs in exit paths, where nothing async may be awaited.
        blockFor(10);
      }
    },
  };
}
