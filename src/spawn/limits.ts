// What an agent's sandbox may spend (DESIGN §7a "It ends"; docs/engine.md "Limits" and "Memory"): prlimit's arguments,
// and svc's watchdog (watchLimits) for what the kernel or a memory cgroup does not bound.
import {
  closeSync, constants, fstatSync, lstatSync, opendirSync, openSync, readdirSync, readFileSync, readlinkSync,
  realpathSync, statSync, statfsSync,
} from 'node:fs';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { UnavailableError } from '../errors.ts';
import { which } from './svc-paths.ts';
import { orNull, readOrNull, readlinkOrNull, unescapeMount } from './tree.ts';
import type { MemoryCgroup } from './memory-cgroup.ts';

/** RLIMIT_NOFILE: generous for any build, and it bounds the memfds a process can hold for the watchdog to read. */
const OPEN_FILES = 8192;

const MIB = 1024 * 1024;

/** Processes at once; per process, writable memory (RLIMIT_DATA) and largest file; each private tmpfs's size. */
export const DEFAULT_LIMITS = {
  processes: 1024,
  memoryBytes: 8 * 1024 * MIB,
  fileBytes: 1024 * MIB,
  tmpBytes: 1024 * MIB,
};

export type SandboxLimits = typeof DEFAULT_LIMITS;

let prlimit: string | null | undefined;
let openFiles: number | undefined;

/** OPEN_FILES, or this process's own hard limit where that is lower (an ordinary user cannot raise it). */
function openFilesLimit(): number {
  const hard = /^Max open files\s+\S+\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1];
  return hard === undefined ? OPEN_FILES : Math.min(OPEN_FILES, Number(hard));
}

/** util-linux's prlimit, its options that apply a sandbox's limits (svc's numbers, so a script may name them), and
 * the one limit set apart. */
interface LimitArgv {
  prlimit: string;
  /**
   * For every process in the sandbox but bwrap's init, set from inside it (prlimit as bwrap's command). Never on bwrap
   * from outside: RLIMIT_NPROC counts a uid's processes per user namespace, and set on bwrap before it made its own
   * namespace it counted the uid's processes across the host (forks failed at 13 in the sandbox with 40 as nobody).
   */
  every: string[];
  /** RLIMIT_DATA, in bytes, for the command alone: the gate's port program (node) could not start under it
   * (memory_mb may be 1). */
  dataBytes: number;
}

// prlimit is run by its host path inside the sandbox, so it is looked for only in the system folders, which every
// sandbox's view shows as they are (bwrap-argv.ts SYSTEM_FOLDERS): the program found here is the one the sandbox runs.
// A link out of those folders is found here and then fails inside, which the trial sandbox (sandbox-mode.ts) shows.
export const PRLIMIT_DIRS = ['/usr/bin', '/bin', '/usr/sbin', '/sbin'];

/** What to do when prlimit is not there (`svc doctor`'s fix and the refusal to start say it alike). */
export const PRLIMIT_HINT = 'install the Debian package "util-linux" (apt-get install util-linux), which holds prlimit';

/** Why no sandbox can start: said by the probe, `svc doctor` and the refusals. */
export const PRLIMIT_MISSING = `prlimit is not in ${PRLIMIT_DIRS.join(', ')}, so no sandbox would get its kernel ` +
  'limits';

/** prlimit is not installed where the sandbox runs it: a sandbox would get none of the kernel's limits. */
export class PrlimitMissingError extends UnavailableError {}

/** util-linux's prlimit as the sandbox runs it, or null (looked for afresh each time: `svc doctor`, the probe). */
export function findPrlimit(): string | null {
  return which('prlimit', PRLIMIT_DIRS.join(':'));
}

/**
 * limitArgv for `limits`. Without prlimit it refuses (PrlimitMissingError) rather than start a sandbox with no kernel
 * limit at all: the probe refuses a run first (sandbox-mode.ts), this is for a prlimit gone since.
 */
export function limitArgv(limits: SandboxLimits): LimitArgv {
  prlimit ??= findPrlimit();
  if (!prlimit) {
    throw new PrlimitMissingError(`Refusing to start a sandbox: ${PRLIMIT_MISSING}; ${PRLIMIT_HINT}`);
  }
  openFiles ??= openFilesLimit();
  return {
    prlimit,
    every: [`--nproc=${limits.processes}`, `--fsize=${limits.fileBytes}`, `--nofile=${openFiles}`, '--core=0'],
    dataBytes: limits.memoryBytes,
  };
}

/** `memoryBytes`: all the sandbox's memory together; `diskDirs`: the host folders it writes whose growth together is
 * bounded (the worktree, the run's question and answer folders, a provider's folders: all as much on the host's disk),
 * named `diskWhat` in the breach's message. */
export interface WatchedLimits {
  processes: number;
  memoryBytes: number;
  cgroup?: MemoryCgroup | null;
  diskDirs: string[];
  diskWhat: string;
  diskBytes: number;
}

type LimitBreach = { limit: 'processes' | 'memory' | 'disk'; message: string };

const SAMPLE_MS = 250;
const DISK_SAMPLE_MS = 5_000;
const PAGE = 4096;

function residentBytes(pid: number): number {
  return Number(readOrNull(`/proc/${pid}/statm`)?.split(' ')[1]) * PAGE || 0;
}

/** Bytes the memfds open in `pid` occupy (allocated blocks, so a sparse ftruncate costs nothing), once each. */
function addMemfds(pid: number, seen: Map<string, number>): void {
  for (const fd of orNull(() => readdirSync(`/proc/${pid}/fd`)) ?? []) {
    if (!readlinkOrNull(`/proc/${pid}/fd/${fd}`)?.startsWith('/memfd:')) continue;
    const st = orNull(() => statSync(`/proc/${pid}/fd/${fd}`));
    if (st) seen.set(`${st.dev}:${st.ino}`, st.blocks * 512);
  }
}

/** Used bytes of each tmpfs mounted in `pid`'s mount namespace, keyed by device so each counts once. */
function addTmpfs(pid: number, seen: Map<string, number>): void {
  for (const line of (readOrNull(`/proc/${pid}/mountinfo`) ?? '').split('\n')) {
    const [left, right] = line.split(' - ');
    const fields = left?.split(' ') ?? [];
    if (!right?.startsWith('tmpfs ') || fields.length < 5) continue;
    const device = fields[2]!;
    if (seen.has(device)) continue;
    // Null when unmounted meanwhile, or hidden under a later mount.
    const fs = orNull(() => statfsSync(`/proc/${pid}/root${unescapeMount(fields[4]!)}`));
    if (fs) seen.set(device, (fs.blocks - fs.bfree) * fs.bsize);
  }
}

/** Memory no resident set shows: the memfds `pids` hold open and their tmpfs (docs/engine.md "Memory"), in bytes. */
function sharedMemoryBytes(pids: readonly number[]): number {
  const memfds = new Map<string, number>();
  const tmpfs = new Map<string, number>();
  const ownMounts = readlinkOrNull('/proc/self/ns/mnt');
  const namespaces = new Set<string>();
  for (const pid of pids) {
    addMemfds(pid, memfds);
    // The tmpfs of each mount namespace the sandbox has, once; never svc's own (bwrap's outer process shares it).
    const ns = readlinkOrNull(`/proc/${pid}/ns/mnt`);
    if (ns === null || ns === ownMounts || namespaces.has(ns)) continue;
    namespaces.add(ns);
    addTmpfs(pid, tmpfs);
  }
  return [...memfds.values(), ...tmpfs.values()].reduce((n, bytes) => n + bytes, 0);
}

/** Entries and folders a walk looks at between two turns of the worker's event loop (~1 ms of it at a time). */
const WALK_SLICE = 256;

/** A folder's own size up to which it is listed at once (some thousand entries, ~1 ms); past it, a slice at a time. */
const LIST_AT_ONCE_BYTES = 16 * 1024;

// Names are read as bytes: a name that is not UTF-8 read as text is another name (U+FFFD), whose lstat finds nothing,
// so its bytes would count as none. Node reads a Dir's names as bytes too; its types know only text encodings.
const AS_BYTES = { encoding: 'buffer' as BufferEncoding };

/**
 * An open descriptor of the folder at `path` and its size, or null when it is gone, is a link, or now lies outside
 * `inside` (a link swapped in above it since its parent listed it): where the descriptor really is, the kernel says.
 * A folder swapped for another inside the tree is counted where it is now.
 */
function openInside(path: Buffer, inside: Buffer): { fd: number; size: number } | null {
  const fd = orNull(() => openSync(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW));
  if (fd === null) return null;
  const at = orNull(() => readlinkSync(`/proc/self/fd/${fd}`, AS_BYTES) as unknown as Buffer);
  if (at !== null && (at.equals(inside.subarray(0, -1)) || at.subarray(0, inside.length).equals(inside))) {
    return { fd, size: fstatSync(fd).size };
  }
  closeSync(fd);
  return null;
}

/**
 * The names in the directory at `opened`, read a slice at a time when it is large (a Dir costs ~12 µs to open against
 * ~4 µs for a whole small listing, and most folders are small); none when it cannot be read. Closes the Dir it opens.
 */
function* namesIn(opened: string, size: number): Generator<Buffer> {
  if (size <= LIST_AT_ONCE_BYTES) {
    yield* (orNull(() => readdirSync(opened, AS_BYTES)) ?? []) as unknown as Buffer[];
    return;
  }
  const listing = orNull(() => opendirSync(opened, { ...AS_BYTES, bufferSize: WALK_SLICE }));
  try {
    for (let entry = orNull(() => listing?.readSync()); entry; entry = orNull(() => listing?.readSync())) {
      yield entry.name as unknown as Buffer;
    }
  } finally {
    listing?.closeSync();
  }
}

const SLASH = Buffer.from('/');
const DOT_GIT = Buffer.from('.git');

/**
 * Bytes under `dir` (files as their size, skipping `.git`), counted without following links; stops past `cap`. Each
 * look is synchronous, in slices between turns of the event loop: an awaited lstat per file cost 15 times the CPU (a
 * 5,000-file checkout: ~440 ms against ~30 ms), taken from the agent's start, where the first walk runs. Folders count
 * toward a slice too, and a large one is read a slice at a time: neither 200,000 empty folders nor one folder of
 * 300,000 entries holds the loop. A folder is opened without following a link and kept only when the kernel places it
 * inside the tree, and its entries are looked at through that descriptor (/proc/self/fd/N): a link the agent swaps in
 * for a folder mid-walk is never followed (the first walk has no cap, so a folder held as a link to / would have made
 * the host's size the baseline), while folders it merely moves or exchanges inside the tree are still counted.
 */
export async function treeBytes(dir: string, cap: number): Promise<number> {
  const root = orNull(() => realpathSync(dir, AS_BYTES) as unknown as Buffer);
  if (root === null || !orNull(() => statSync(root))?.isDirectory()) return 0;
  const inside = Buffer.concat([root, SLASH]);
  let total = 0;
  let looked = 0;
  const pending: Buffer[] = [root];
  while (pending.length && total <= cap) {
    const folder = pending.pop()!;
    if (++looked % WALK_SLICE === 0) await nextTurn();
    // A folder gone meanwhile, or no longer inside the tree, counts nothing.
    const open = openInside(folder, inside);
    if (open === null) continue;
    const opened = `/proc/self/fd/${open.fd}`;
    try {
      for (const name of namesIn(opened, open.size)) {
        if (++looked % WALK_SLICE === 0) await nextTurn();
        if (folder === root && name.equals(DOT_GIT)) continue;
        const st = orNull(() => lstatSync(Buffer.concat([Buffer.from(`${opened}/`), name])));
        if (st?.isDirectory()) pending.push(Buffer.concat([folder, SLASH, name]));
        else total += st?.size ?? 0;
      }
    } finally {
      closeSync(open.fd);
    }
  }
  return total;
}

/** Says so when the sandbox's memory broke its limit (the kernel killed for it in its cgroup), or null. */
export function memoryBreach(limits: WatchedLimits): string | null {
  const kills = limits.cgroup?.oomKills() ?? 0;
  return kills > 0
    ? `its processes needed more than ${limits.memoryBytes / MIB} MiB together (the kernel ended ${kills} of them)`
    : null;
}

/** The shared-memory count, each waiting ten times as long as the last took: a tenth of a core at most. */
function sharedCounter(): (pids: number[]) => number {
  let last = 0;
  let due = 0;
  return (pids) => {
    const now = Date.now();
    if (now < due) return last;
    last = sharedMemoryBytes(pids);
    due = now + Math.max(SAMPLE_MS, 10 * (Date.now() - now));
    return last;
  };
}

/** Why the memory is over the limit (counted by svc where there is no cgroup); null while under it. */
function overMemory(limits: WatchedLimits, pids: number[], sharedBytes: (pids: number[]) => number): string | null {
  if (limits.cgroup) return memoryBreach(limits);
  const rss = pids.reduce((n, pid) => n + residentBytes(pid), 0);
  if (rss > limits.memoryBytes) return `${Math.round(rss / MIB)} MiB resident, over ${limits.memoryBytes / MIB} MiB`;
  const shared = sharedBytes(pids);
  if (rss + shared <= limits.memoryBytes) return null;
  return `${Math.round(rss / MIB)} MiB resident and ${Math.round(shared / MIB)} MiB in memfds and tmpfs, over ` +
    `${limits.memoryBytes / MIB} MiB`;
}

/** Starts watching; `members` lists the sandbox's host pids. Returns the function that stops the watch. */
export function watchLimits(
  limits: WatchedLimits, members: () => number[], onBreach: (breach: LimitBreach) => void,
): () => void {
  let stopped = false;
  let disk: NodeJS.Timeout | undefined;
  const stop = (): void => {
    stopped = true;
    clearInterval(sampler);
    clearTimeout(disk);
  };
  const breach = (b: LimitBreach): void => {
    if (stopped) return;
    stop();
    onBreach(b);
  };
  const shared = sharedCounter();
  const sampler = setInterval(() => {
    const pids = members();
    if (pids.length > limits.processes) {
      breach({ limit: 'processes', message: `more than ${limits.processes} processes at once` });
      return;
    }
    const over = overMemory(limits, pids, shared);
    if (over) breach({ limit: 'memory', message: over });
  }, SAMPLE_MS);
  sampler.unref();
  let baseline: number | null = null;
  // Each walk of the worktree waits ten times as long as the last one took (at least 5 s): a tenth of a core at most.
  const measure = async (): Promise<void> => {
    if (stopped) return;
    const started = Date.now();
    let bytes = 0;
    for (const dir of limits.diskDirs) bytes += await treeBytes(dir, (baseline ?? Infinity) + limits.diskBytes - bytes);
    baseline ??= bytes;
    if (bytes - baseline > limits.diskBytes) {
      breach({ limit: 'disk', message: `${limits.diskWhat} grew by more than ${limits.diskBytes / MIB} MiB` });
      return;
    }
    if (stopped) return;
    disk = setTimeout(() => void measure(), Math.max(DISK_SAMPLE_MS, 10 * (Date.now() - started)));
    disk.unref();
  };
  void measure();
  return stop;
}
