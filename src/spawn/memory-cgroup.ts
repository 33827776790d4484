// A memory cgroup per agent sandbox where the host lets svc make one (DESIGN §7a "It ends"; docs/engine.md "Memory"
// says where, and what the kernel then counts; elsewhere limits.ts's watchdog counts).
import { existsSync, mkdirSync, readdirSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { orNull, readOrNull, unescapeMount } from './tree.ts';

type MemoryCgroupSupport = { version: 'v1' | 'v2'; parent: string } | { version: null; reason: string };

export type MemoryCgroup = NonNullable<ReturnType<typeof openMemoryCgroup>>;

const PREFIX = 'svc-';

const CGROUP_FILES = {
  v1: { limit: 'memory.limit_in_bytes', swap: 'memory.memsw.limit_in_bytes', events: 'memory.oom_control' },
  v2: { limit: 'memory.max', swap: 'memory.swap.max', events: 'memory.events' },
} as const;

/** The folder of this process's own cgroup in the hierarchy mounted as `fstype` (with `option` for v1). */
function ownCgroupDir(fstype: 'cgroup' | 'cgroup2', option: string | null): string | null {
  const mounts = (readOrNull('/proc/self/mountinfo') ?? '').split('\n');
  const own = (readOrNull('/proc/self/cgroup') ?? '').split('\n');
  for (const line of mounts) {
    const [left, right] = line.split(' - ');
    const fields = left?.split(' ') ?? [];
    const [type, , superOptions] = right?.split(' ') ?? [];
    if (type !== fstype || fields.length < 5) continue;
    if (option && !(superOptions ?? '').split(',').includes(option)) continue;
    const root = unescapeMount(fields[3]!);
    const mountPoint = unescapeMount(fields[4]!);
    // "4:memory:/a/b" (v1) or "0::/a/b" (v2): the path from the hierarchy's root.
    const entry = own.find((l) => (option ? l.split(':')[1]?.split(',').includes(option) : l.startsWith('0::')));
    const path = entry?.slice(entry.indexOf(':', entry.indexOf(':') + 1) + 1);
    if (path === undefined) continue;
    if (root !== '/' && path !== root && !path.startsWith(`${root}/`)) continue;
    const dir = join(mountPoint, root === '/' ? path : path.slice(root.length));
    if (existsSync(join(dir, 'cgroup.procs'))) return dir;
  }
  return null;
}

/** Why no child can be made (and removed) under `parent`, the real test of permission; null when one can. */
function canMakeChild(parent: string): string | null {
  const trial = join(parent, `${PREFIX}probe-${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    mkdirSync(trial);
    rmdirSync(trial);
    return null;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? 'error';
  }
}

let support: MemoryCgroupSupport | undefined;

/** Where cgroup v2 lets svc make memory-limited children: its own cgroup or its parent. */
export function delegatingV2(own: string): string | null {
  for (const dir of [own, dirname(own)]) {
    if (!existsSync(join(dir, 'cgroup.procs'))) continue;
    if ((readOrNull(join(dir, 'cgroup.subtree_control')) ?? '').split(/\s+/).includes('memory')) return dir;
  }
  return null;
}

/** Decided once per process: cgroup v1's memory controller first, then a v2 cgroup delegating memory. */
export function memoryCgroupSupport(): MemoryCgroupSupport {
  if (support) return support;
  const v1 = ownCgroupDir('cgroup', 'memory');
  const v2 = v1 ? null : ownCgroupDir('cgroup2', null);
  const parent = v1 ?? (v2 ? delegatingV2(v2) : null);
  const refused = parent ? canMakeChild(parent) : null;
  if (!parent) {
    support = { version: null, reason: v2 ? `neither svc's cgroup ${v2} nor its parent delegates the memory ` +
      'controller (no "memory" in its cgroup.subtree_control)' : 'no memory cgroup hierarchy is mounted' };
  } else if (refused) support = { version: null, reason: `svc may not make a cgroup in ${parent} (${refused})` };
  else support = { version: v1 ? 'v1' : 'v2', parent };
  return support;
}

/** A younger cgroup may be one another svc (in another PID namespace) is about to put a sandbox in. */
const SWEEP_AGE_MS = 60_000;

/** Removes cgroups an earlier svc process left behind (it died before its sandbox's end): empty, old ones only. */
function sweep(parent: string): void {
  const names = orNull(() => readdirSync(parent))?.filter((n) => n.startsWith(PREFIX)) ?? [];
  for (const name of names) {
    const pid = Number(/^svc-(\d+)-/.exec(name)?.[1]);
    if (pid === process.pid || (pid > 0 && existsSync(`/proc/${pid}`))) continue;
    try {
      if (Date.now() - statSync(join(parent, name)).mtimeMs < SWEEP_AGE_MS) continue;
      rmdirSync(join(parent, name));
    } catch {
      // still has processes, or not ours to remove
    }
  }
}

/** Right after its last process was reaped the kernel may still count a cgroup as populated (EBUSY): retried. */
function removeSoon(path: string, tries: number): void {
  try {
    rmdirSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EBUSY' || tries <= 1) return;
    setTimeout(() => removeSoon(path, tries - 1), 50).unref();
  }
}

/** A cgroup holding at most `bytes` of memory, no swap; null where svc cannot make one (the watchdog counts then). */
export function openMemoryCgroup(bytes: number) {
  const found = memoryCgroupSupport();
  if (found.version === null) return null;
  const { parent, version } = found;
  sweep(parent);
  const path = join(parent, `${PREFIX}${process.pid}-${randomBytes(6).toString('hex')}`);
  try {
    mkdirSync(path);
  } catch {
    return null;
  }
  const remove = (): void => removeSoon(path, 40);
  const files = CGROUP_FILES[version];
  try {
    writeFileSync(join(path, files.limit), String(bytes));
    // No swap beyond the limit: v1 bounds memory + swap together (memory's must be set first), v2 swap alone.
    const swap = join(path, files.swap);
    if (existsSync(swap)) writeFileSync(swap, version === 'v1' ? String(bytes) : '0');
  } catch {
    remove();
    return null;
  }
  return {
    path,
    version,
    /** Processes the kernel killed in it for want of memory. */
    oomKills: (): number => Number(/^oom_kill (\d+)$/m.exec(readOrNull(join(path, files.events)) ?? '')?.[1] ?? 0),
    /** `argv` run so that its first process joins the cgroup before it execs: nothing of it runs outside. `before`, a
     * shell's commands (each ended by `;`), runs first, outside the cgroup (spawn-group.ts forks a watcher there). */
    wrap: (argv: string[], before = ''): string[] => ['/bin/sh', '-c', `${before}echo $$ > "$1" && shift && exec "$@"`,
      'svc-cgroup', join(path, 'cgroup.procs'), ...argv],
    remove,
  };
}

/** How an agent's memory is bounded on this host, for `svc doctor` (docs/engine.md "The agent sandbox"). */
export function memoryBound(): { mechanism: 'cgroup' | 'watchdog'; cgroup: string | null; detail: string } {
  const found = memoryCgroupSupport();
  if (found.version !== null) {
    const detail = `a memory cgroup (${found.version}) per sandbox under ${found.parent}: the kernel bounds all of ` +
      'its memory (processes, page cache, tmpfs, memfds) at limits.memory_mb';
    return { mechanism: 'cgroup', cgroup: found.parent, detail };
  }
  return { mechanism: 'watchdog', cgroup: null, detail: 'svc\'s watchdog adds the resident memory of the sandbox\'s ' +
    'processes, the memfds they hold and its tmpfs (/tmp, HOME, /dev/shm) about every 250 ms and ends it past ' +
    `limits.memory_mb; open files capped per process. No cgroup: ${found.reason}` };
}

