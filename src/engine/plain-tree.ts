// Reads a tree a project or an agent could write without ever following a symbolic link: each name is looked up
// inside the folder already open, through /proc/self/fd (writes: safe-fs.ts).
import { closeSync, constants, existsSync, fstatSync, openSync, readdirSync, readSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { hash } from 'node:crypto';
import { isJsonObject } from '../json-value.ts';
import { tryParseJson } from '../untrusted.ts';
import { orNull, pathKind, realOrNull } from '../spawn/tree.ts';

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
// O_NONBLOCK: a planted FIFO cannot block the open.
const FILE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const PROC_FD = existsSync('/proc/self/fd');

/** What stands at a name: only `dir` and `file` are ever opened. */
export type EntryKind = 'dir' | 'file' | 'link' | 'other' | 'missing';

/** A folder held open; names are looked up inside it, not through `path` (the lexical path, for messages only). */
export interface PlainDir {
  readonly path: string;
  readonly fd: number;
  close(): void;
}

/** `name` inside the folder held open, for a call that takes a path: a link put at `dir.path` since is not followed. */
export function pathIn(dir: PlainDir, name: string): string {
  return PROC_FD ? `/proc/self/fd/${dir.fd}/${name}` : join(dir.path, name);
}

/** An fd of `path` opened with `flags` (O_NOFOLLOW), or what its failure says stands there: 'other' for the rest. */
function openFd(path: string, flags: number): number | EntryKind {
  try {
    return openSync(path, flags);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') return 'link';
    return code === 'ENOENT' ? 'missing' : 'other';
  }
}

/** Opens `path` as a folder (its last component not a link), or says what stands there instead. */
function openPlainDir(path: string, shown = path): PlainDir | EntryKind {
  const fd = openFd(path, DIR_FLAGS);
  if (fd === 'other') return pathKind(path) ?? 'missing';
  if (typeof fd === 'string') return fd;
  let open = true;
  return {
    fd,
    path: shown,
    close() {
      if (open) closeSync(fd);
      open = false;
    },
  };
}

export function openPlainDirIn(dir: PlainDir, name: string): PlainDir | EntryKind {
  return openPlainDir(pathIn(dir, name), join(dir.path, name));
}

/** `use(dir)`, the folder closed after. */
export function withDir<T>(dir: PlainDir, use: (dir: PlainDir) => T): T {
  try {
    return use(dir);
  } finally {
    dir.close();
  }
}

/** Opens root/parts[0]/… one folder at a time: the last one open, or the first part that is not a plain folder. */
export function openPlainPath(root: string, parts: readonly string[]): PlainDir | { failed: string; kind: EntryKind } {
  const first = openPlainDir(root);
  if (typeof first === 'string') return { failed: root, kind: first };
  let dir = first;
  for (const part of parts) {
    const next = openPlainDirIn(dir, part);
    dir.close();
    if (typeof next === 'string') return { failed: join(dir.path, part), kind: next };
    dir = next;
  }
  return dir;
}

/** The names in `dir` with what each is, sorted; lstat only, so nothing is followed or opened. */
export function listPlain(dir: PlainDir): Array<{ name: string; kind: EntryKind }> {
  const names = orNull(() => readdirSync(PROC_FD ? `/proc/self/fd/${dir.fd}` : dir.path)) ?? [];
  return names.sort().map((name) => ({ name, kind: pathKind(pathIn(dir, name)) ?? 'missing' }));
}

/** The names in `dir`, unsorted and not looked at, read off the event loop: for a folder a repository may fill with
 * any number of entries (a reader takes the few it wants, then reads each through `readPlainIn`). */
export function plainNames(dir: PlainDir): Promise<string[]> {
  return readdir(PROC_FD ? `/proc/self/fd/${dir.fd}` : dir.path).catch(() => []);
}

/** The plain folders (or files) directly in `<root>/<parts…>`, sorted; none when a level on the way is not plain. */
export function plainEntries(root: string, parts: readonly string[], kind: 'dir' | 'file' = 'dir'): string[] {
  const dir = openPlainPath(root, parts);
  if ('failed' in dir) return [];
  return withDir(dir, () => listPlain(dir).filter((e) => e.kind === kind).map((e) => e.name));
}

/** An fd for reading the regular file at `path` (never through a link), or what stands there instead. */
function openPlainFile(path: string): number | EntryKind {
  const fd = openFd(path, FILE_FLAGS);
  if (typeof fd === 'string') return fd;
  const stat = fstatSync(fd);
  if (stat.isFile()) return fd;
  closeSync(fd);
  return stat.isDirectory() ? 'dir' : 'other';
}

export function openPlainFileIn(dir: PlainDir, name: string): number | EntryKind {
  return openPlainFile(pathIn(dir, name));
}

export function readRange(fd: number, position: number, length: number): Buffer {
  const buf = Buffer.alloc(length);
  let size = 0;
  for (let n = 1; n > 0 && size < length; size += n) n = readSync(fd, buf, size, length - size, position + size);
  return buf.subarray(0, size);
}

/** At most `cap` bytes of a file an agent wrote (its question): null unless a regular file reached without a link. */
export function readAgentFile(path: string, cap: number): string | null {
  const fd = openPlainFile(path);
  if (typeof fd === 'string') return null;
  try {
    return readRange(fd, 0, cap).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** The whole regular file `name` in `dir`; 'too_large' past `max` bytes; else what stands there instead. */
export function readPlainIn(dir: PlainDir, name: string, max: number): Buffer | EntryKind | 'too_large' {
  const fd = openPlainFileIn(dir, name);
  if (typeof fd === 'string') return fd;
  try {
    const size = fstatSync(fd).size;
    return size > max ? 'too_large' : readRange(fd, 0, size);
  } finally {
    closeSync(fd);
  }
}

/** The most of a state.json or ship.json the shipper and a run's state read (readObjectIn). */
const MAX_OBJECT = 1024 * 1024;

/** The most of a plan.json read back (readOwnObject): an operator's network.allow (operator.json has no cap) or
 * providers can make a plan of megabytes, so it is far above MAX_OBJECT, and svc refuses to make a run whose plan
 * would pass it (run-plan.ts refuseOversizedPlan). Only a file this user owns and no one else may write is read. */
export const MAX_PLAN = 16 * 1024 * 1024;

/** A JSON object file in `dir`; null when missing or (then told to `skip`) not a plain file holding an object. */
export function readObjectIn(
  dir: PlainDir, name: string, skip: (entry: string, reason: string) => void,
): Record<string, unknown> | null {
  const raw = readPlainIn(dir, name, MAX_OBJECT);
  if (typeof raw === 'string') {
    if (raw !== 'missing') skip(name, skipReason(raw, MAX_OBJECT));
    return null;
  }
  const value = tryParseJson(raw.toString('utf8'));
  if (isJsonObject(value)) return value;
  // svc writes these whole (writeJsonAtomic), so text that does not parse was cut short or damaged after: by a copy
  // of the folder still being made, say, or a disk's fault. Which of those, the bytes cannot tell.
  skip(name, value === undefined ? 'is not JSON (cut short or damaged, as by a copy still being made)'
    : 'is not a JSON object');
  return null;
}

/** `<repo>/.svc/<name>`, a repository's file, read without following a link (it could point one at /dev/zero or a
 * host file) and never past `max` bytes: its bytes, path and sha256 (`svc trust`); null when it or `.svc` is missing;
 * else `refuse` is thrown with why it was not read. */
export function readRepoSvcFile(
  repo: string, name: string, max: number, refuse: (why: string) => Error,
): { bytes: Buffer; path: string; sha256: string } | null {
  const real = realOrNull(repo); // the checkout's own path is the operator's, and may be a link
  if (real === null) return null;
  const dir = openPlainPath(real, ['.svc']);
  if ('failed' in dir) {
    if (dir.kind === 'missing') return null;
    throw refuse(`${name} not read: ${dir.failed} ${skipReason(dir.kind)}`);
  }
  const bytes = withDir(dir, () => readPlainIn(dir, name, max));
  if (bytes === 'missing') return null;
  if (typeof bytes === 'string') throw refuse(`${name} ${skipReason(bytes, max)}`);
  return { bytes, path: join(repo, '.svc', name), sha256: hash('sha256', bytes, 'hex') };
}

/** Why an entry that is not what was wanted is skipped, in words for a report. */
export function skipReason(kind: EntryKind | 'too_large', max?: number): string {
  if (kind === 'link') return 'is a symbolic link (never followed)';
  if (kind === 'missing') return 'is missing';
  if (kind === 'too_large') return `is larger than ${max ?? 0} bytes`;
  if (kind === 'dir') return 'is a folder, not a file';
  return kind === 'file' ? 'is a file, not a folder' : 'is not a regular file or folder';
}

/** `rel`: the path under the tree's root, '/'-separated. */
export type TreeFile = { rel: string; content: Buffer };

/** Hands every regular file under `dir` to `visit` as it is read (a caller may throw at a total of its own); links,
 * special files, files over `maxFile` and folders past `maxDepth` go to `skip`. */
export function walkPlainTree(
  dir: PlainDir, opts: { maxFile: number; maxDepth: number; skip: (rel: string, reason: string) => void },
  visit: (file: TreeFile) => void, prefix = '',
): void {
  for (const { name, kind } of listPlain(dir)) {
    const rel = prefix ? `${prefix}/${name}` : name;
    if (kind === 'dir') {
      const sub = rel.split('/').length > opts.maxDepth ? 'too deep' : openPlainDirIn(dir, name);
      if (typeof sub === 'string') {
        opts.skip(rel, sub === 'too deep' ? `is more than ${opts.maxDepth} folders deep` : skipReason(sub));
        continue;
      }
      withDir(sub, () => walkPlainTree(sub, opts, visit, rel));
      continue;
    }
    if (kind !== 'file') {
      opts.skip(rel, skipReason(kind));
      continue;
    }
    const content = readPlainIn(dir, name, opts.maxFile);
    if (typeof content === 'string') opts.skip(rel, skipReason(content, opts.maxFile));
    else visit({ rel, content });
  }
}

/** A run folder opened from its project (`.svc`, `runs`, `<run>` each plain), else from its parent. The project (or
 * parent) is the operator's or svc's, so its own path may go through a link, as makePlainPath's root may. */
export function openRunFolder(dir: string): PlainDir | { failed: string; kind: EntryKind } {
  const runs = dirname(dir);
  if (basename(runs) === 'runs' && basename(dirname(runs)) === '.svc') {
    const project = dirname(dirname(runs));
    return openPlainPath(realOrNull(project) ?? project, ['.svc', 'runs', basename(dir)]);
  }
  return openPlainPath(realOrNull(runs) ?? runs, [basename(dir)]);
}

/** The JSON object `name` of the run folder `dir`, provided it is svc's own file: a plain file (reached without a
 * link) owned by this user and writable by no one else, so another user who can write the project plants none, of at
 * most `max` bytes; else null. */
export function readOwnObject(dir: string, name: string, max: number): Record<string, unknown> | null {
  const bytes = readOwnFile(dir, name, max);
  const value = bytes === null ? null : tryParseJson(bytes.toString('utf8'));
  return isJsonObject(value) ? value : null;
}

/** The bytes of run folder `dir`'s file `name`, read as readOwnObject reads it; null where it would find none. */
export function readOwnFile(dir: string, name: string, max: number): Buffer | null {
  const folder = openRunFolder(dir);
  if ('failed' in folder) return null;
  const fd = withDir(folder, () => openPlainFileIn(folder, name));
  if (typeof fd === 'string') return null;
  try {
    const st = fstatSync(fd);
    if (st.uid !== process.getuid?.() || (st.mode & 0o022) !== 0 || st.size > max) return null;
    return readRange(fd, 0, st.size);
  } finally {
    closeSync(fd);
  }
}

/** Whether the run was made to stay local (SVC_SHIP=0: its plan's `local`); a run whose plan is not svc's own is not.
 * Here, a shared leaf, so that the shipper and the run's context ask it without importing run-plan.ts. */
export function keptLocal(dir: string): boolean {
  return readOwnObject(dir, 'plan.json', MAX_PLAN)?.local === true;
}
