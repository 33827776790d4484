// Writes into a run folder that never follow a symbolic link a crafted project could plant.
import { openSync, closeSync, lstatSync, mkdirSync, constants, writeFileSync, renameSync, unlinkSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { RefusedError } from '../errors.ts';
import { writeFileAtomic } from '../atomic-write.ts';
import {
  openPlainDirIn, openPlainPath, openRunFolder, pathIn, withDir, type EntryKind, type PlainDir,
} from './plain-tree.ts';
export { withDir }; // its home is plain-tree.ts, beside the folder it closes
import { readlinkOrNull, realOrNull } from '../spawn/tree.ts';

const APPEND = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW;
const TRUNCATE = constants.O_WRONLY | constants.O_TRUNC | constants.O_CREAT | constants.O_NOFOLLOW;

export class UnsafePathError extends Error {}

/** makePlainPath's root (an operator's checkout, a folder of svc's) missing, e.g. unmounted, or not a folder: the
 * host's failure, not the layout of what lies below it that a repository commits. */
export class UnusableRootError extends UnsafePathError {}

/** The refusal of `path` as a folder to write into: "it is missing", else "it is (a symbolic link,) not a plain
 * directory" (pinned). */
function refusedFolder(path: string, kind: EntryKind, Refusal = UnsafePathError): UnsafePathError {
  if (kind === 'missing') return new Refusal(`Refusing to write into "${path}": it is missing`);
  const what = kind === 'link' ? 'a symbolic link, not' : 'not';
  return new Refusal(`Refusing to write into "${path}": it is ${what} a plain directory`);
}

/** `<repo>/.svc/<name>` held open, made as needed; refused when it or `.svc` is not a plain folder (a link, a file). */
export function plainEngineFolder(repo: string, name: 'runs' | 'worktrees'): PlainDir {
  try {
    // 0o777 less the umask, as mkdir makes any folder of the repository.
    return makePlainPath(repo, ['.svc', name], 0o777);
  } catch (err) {
    if (!(err instanceof UnsafePathError)) throw err;
    throw new RefusedError('Refusing to start: svc keeps its runs and worktrees in plain folders of the repository, ' +
      `never behind a link the repository could commit (${err.message}; nothing was started)`, { cause: err });
  }
}

/**
 * Refuses a sandboxed run in the checkout `repo` itself when its `.svc/inbox` or `.svc/worktrees` is a symbolic link
 * (the repository may commit one): the sandbox hides those folders from an agent working there (agent-plan.ts) by a
 * mount over each, and no mount goes through a link (bwrap fails, "Can't mount tmpfs"). Absent or a folder is fine.
 */
export function refuseLinkedMasks(repo: string): void {
  const real = realOrNull(repo) ?? repo;
  for (const name of ['inbox', 'worktrees'] as const) {
    const found = openPlainPath(real, ['.svc', name]);
    if (!('failed' in found)) found.close();
    else if (found.kind === 'link' && found.failed === join(real, '.svc', name)) {
      const link = join(repo, '.svc', name);
      const rest = name === 'inbox' ? ', or start runs with --worktree' : '';
      throw new RefusedError(`Refusing to start: ${link} is a symbolic link (to ` +
        `${JSON.stringify(readlinkOrNull(link) ?? '?')}), and the sandbox of a run in the checkout hides that folder ` +
        `from its agent, which it cannot do through a link. Remove the link (git rm .svc/${name}, if the repository ` +
        `commits it)${rest} (nothing was started)`);
    }
  }
}

/** The run folder `dir` held open to write into (openRunFolder: `.svc`, `runs` and the run's folder each plain);
 * never made here, so a worker whose run was removed writes nothing. */
export function openRunDir(dir: string): PlainDir {
  const opened = openRunFolder(dir);
  if (!('failed' in opened)) return opened;
  if (opened.kind === 'missing') throw new UnsafePathError(`Run folder "${dir}" is missing (ENOENT)`);
  throw refusedFolder(opened.failed, opened.kind);
}

/** Opens `path` to write (a new file with `mode`), refusing a symbolic link there; messages name `shown`. */
function openNoFollow(path: string, flags: number, what: string, shown = path, mode = 0o644): number {
  try {
    return openSync(path, flags, mode);
  } catch (err) {
    const error = err as NodeJS.ErrnoException;
    if (error.code === 'ELOOP') throw new UnsafePathError(`Refusing to ${what} "${shown}": it is a symbolic link`);
    throw naming(error, path, shown);
  }
}

/** `error` about `path`, opened as /proc/self/fd/<n>/<name> (pathIn), naming the path the user knows (`shown`)
 * instead: in its message, its `path` and a rename's `dest` (a temporary name beside it starts with it too). */
function naming(error: NodeJS.ErrnoException & { dest?: string }, path: string, shown: string): Error {
  if (shown === path) return error;
  error.message = error.message.replaceAll(path, shown);
  for (const key of ['path', 'dest'] as const) {
    const at = error[key];
    if (at?.startsWith(path)) error[key] = shown + at.slice(path.length);
  }
  return error;
}

/** Writes `path`, never through a link at its last name: for a file in a folder no one else writes in. */
export function writeNoFollow(path: string, data: string | Buffer, shown = path, mode = 0o644): void {
  const fd = openNoFollow(path, TRUNCATE, 'write', shown, mode);
  try {
    writeFileSync(fd, data);
  } finally {
    closeSync(fd);
  }
}

/** Writes `name` in the folder held open, never through a link at that name; `mode`: a new file's (readable by all). */
export function writeNoFollowIn(dir: PlainDir, name: string, data: string | Buffer, mode = 0o644): void {
  writeNoFollow(pathIn(dir, name), data, join(dir.path, name), mode);
}

/**
 * Replaces `name` in the folder held open whole (a temporary file and a rename, atomic-write.ts), so a write that
 * cannot complete (a full disk) leaves the file as it was; a link at that name is refused, never followed or replaced.
 */
export function replaceNoFollowIn(dir: PlainDir, name: string, data: string | Buffer, mode = 0o644): void {
  const shown = join(dir.path, name);
  if (lstatSync(pathIn(dir, name), { throwIfNoEntry: false })?.isSymbolicLink()) {
    throw new UnsafePathError(`Refusing to write "${shown}": it is a symbolic link`);
  }
  try {
    // `mode` less the umask, as writeNoFollowIn makes a new file.
    writeFileAtomic(pathIn(dir, name), data, mode, { umask: true });
  } catch (err) {
    throw naming(err as NodeJS.ErrnoException, pathIn(dir, name), shown);
  }
}

/**
 * Clears `path` in a folder an agent writes, perhaps while it runs (its question's and its answer's): whatever stands
 * there (a FIFO an open would wait on for ever, a link, a folder) is renamed to a name of svc's, never opened or
 * followed, then removed unless a folder. A folder stays under that name: a tree the agent may still be writing is not
 * walked, since it could swap a link in on the way.
 */
export function clearAgentName(path: string): void {
  const aside = `${path}.${randomBytes(8).toString('hex')}.left`;
  try {
    renameSync(path, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  // unlink follows no link and removes no folder (EISDIR); the running agent may have removed the entry (ENOENT) or
  // put a folder there since.
  try {
    unlinkSync(aside);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'EISDIR') throw err;
  }
}

/** The running agent kept making a folder where svc writes its answer: the run fails as the agent's. */
export class AgentFolderError extends Error {}

/** `text` as a new regular file at `path` in a folder an agent writes, whatever it left at that name. */
export function replaceAgentFile(path: string, text: string): void {
  for (let attempt = 1; ; attempt++) {
    clearAgentName(path);
    try {
      writeFileAtomic(path, text, 0o644);
      return;
    } catch (err) {
      // A folder made at the name between the clear and the rename into place.
      if ((err as NodeJS.ErrnoException).code !== 'EISDIR') throw err;
      if (attempt === 3) {
        throw new AgentFolderError(`kept making a folder at ${path}, where svc writes its answer`, { cause: err });
      }
    }
  }
}

/** An fd for appending to `name` in the folder held open (e.g. a child's log), refusing a symbolic link there. */
export function openAppendNoFollowIn(dir: PlainDir, name: string): number {
  return openNoFollow(pathIn(dir, name), APPEND, 'open', join(dir.path, name));
}

/** Writes through a temp file and a rename, so a reader never sees half a state.json or answer file. */
export function writeJsonAtomic(path: string, value: unknown, mode = 0o644): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileAtomic(path, JSON.stringify(value, null, 2) + '\n', mode);
}

/** Opens (making it when missing, with `mode`) the plain folder `name` inside `dir`; throws at anything else there. */
export function makePlainDirIn(dir: PlainDir, name: string, mode = 0o700): PlainDir {
  try {
    // mkdir never follows a link at its last name: one there is EEXIST, then refused by the open below.
    mkdirSync(pathIn(dir, name), { mode });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const opened = openPlainDirIn(dir, name);
  if (typeof opened !== 'string') return opened;
  throw refusedFolder(join(dir.path, name), opened);
}

/** `dir/parts…` held open, each level made when missing and none a link; `dir` stays the caller's to close. */
export function makePlainDirsIn(dir: PlainDir, parts: readonly string[], mode = 0o700): PlainDir {
  let at: PlainDir | null = null;
  try {
    for (const part of parts) {
      const next = makePlainDirIn(at ?? dir, part, mode);
      at?.close();
      at = next;
    }
  } catch (err) {
    at?.close();
    throw err;
  }
  return at ?? makePlainDirIn(dir, '.', mode);
}

/** `root/parts…` held open, each level made when missing and none a link (a repository's `.svc/inbox`: it may have
 * committed any of them as one). `root` itself is the operator's or svc's, so its own path may go through a link, and
 * it is never made: one that cannot be opened is an UnusableRootError. */
export function makePlainPath(root: string, parts: readonly string[], mode = 0o700): PlainDir {
  const top = openPlainPath(realOrNull(root) ?? root, []);
  if ('failed' in top) throw refusedFolder(root, top.kind, UnusableRootError);
  return withDir(top, () => makePlainDirsIn(top, parts, mode));
}
