// Writes into a run folder that never follow a symbolic link a crafted project could plant.
import {
  lstatSync, openSync, closeSync, mkdirSync, constants, renameSync, writeFileSync,
} from 'node:fs';
import { dirname, join, relative, sep, isAbsolute } from 'node:path';
import { randomBytes } from 'node:crypto';
import { RefusedError } from '../errors.ts';
import { openPlainDirIn, openPlainPath, pathIn, skipReason, type PlainDir } from './plain-tree.ts';
import { realOrNull } from '../spawn/tree.ts';

const APPEND = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW;
const TRUNCATE = constants.O_WRONLY | constants.O_TRUNC | constants.O_CREAT | constants.O_NOFOLLOW;

export class UnsafePathError extends Error {}

/** Throws unless `dir` is a real directory (not a symbolic link to one). */
export function assertPlainDir(dir: string): void {
  let st;
  try {
    st = lstatSync(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new UnsafePathError(`Run folder "${dir}" is missing (${code})`);
  }
  if (st.isSymbolicLink() || !st.isDirectory()) {
    throw new UnsafePathError(`Refusing to write into "${dir}": it is not a plain directory`);
  }
}

/** Creates `root/<rel dirs>` as needed and checks each level is a plain directory; returns the full directory path. */
export function plainSubdir(root: string, rel: string): string {
  const back = relative(root, join(root, rel));
  if (isAbsolute(rel) || back.startsWith('..')) throw new UnsafePathError(`"${rel}" leaves "${root}"`);
  assertPlainDir(root);
  let dir = root;
  for (const part of back.split(sep).filter(Boolean)) {
    dir = join(dir, part);
    try {
      mkdirSync(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    assertPlainDir(dir);
  }
  return dir;
}

/** `<repo>/.svc/<name>`, made as needed; refused when it or `.svc` is not a plain folder (a link, a file). */
export function plainEngineFolder(repo: string, name: 'runs' | 'worktrees'): string {
  try {
    return plainSubdir(repo, join('.svc', name));
  } catch (err) {
    if (!(err instanceof UnsafePathError)) throw err;
    throw new RefusedError('Refusing to start: svc keeps its runs and worktrees in plain folders of the repository, ' +
      `never behind a link the repository could commit (${err.message}; nothing was started)`, { cause: err });
  }
}

/** Opens `path` to write (a new file readable by all), refusing a symbolic link there. */
function openNoFollow(path: string, flags: number, what: string): number {
  try {
    return openSync(path, flags, 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ELOOP') throw err;
    throw new UnsafePathError(`Refusing to ${what} "${path}": it is a symbolic link`);
  }
}

function writeWith(path: string, flags: number, data: string | Buffer): void {
  const fd = openNoFollow(path, flags, 'write');
  try {
    writeFileSync(fd, data);
  } finally {
    closeSync(fd);
  }
}

/** Appends with O_APPEND (whole lines never interleave) and O_NOFOLLOW. */
export function appendNoFollow(path: string, data: string | Buffer): void {
  writeWith(path, APPEND, data);
}

export function writeNoFollow(path: string, data: string | Buffer): void {
  writeWith(path, TRUNCATE, data);
}

/** An fd for appending (e.g. a child's log), refusing a symbolic link at `path`. */
export function openAppendNoFollow(path: string): number {
  return openNoFollow(path, APPEND, 'open');
}

/** Writes through a temp file and a rename, so a reader never sees half a state.json or answer file. */
export function writeJsonAtomic(path: string, value: unknown, mode = 0o644): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  // 'wx' (O_EXCL) refuses an existing name, symbolic links included, so the temp file is always our own new file.
  writeFileSync(tmp, JSON.stringify(value, null, 2) + '\n', { mode, flag: 'wx' });
  renameSync(tmp, path);
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
  throw new UnsafePathError(`Refusing to write into "${join(dir.path, name)}": it ${skipReason(opened)}`);
}

/** `root/parts…` held open, each level made when missing and none a link (a repository's `.svc/inbox`: it may have
 * committed any of them as one). `root` itself is the operator's or svc's, so its own path may go through a link. */
export function makePlainPath(root: string, parts: readonly string[], mode = 0o700): PlainDir {
  const top = openPlainPath(realOrNull(root) ?? root, []);
  if ('failed' in top) throw new UnsafePathError(`Refusing to write into "${root}": it ${skipReason(top.kind)}`);
  let dir = top;
  try {
    for (const part of parts) {
      const next = makePlainDirIn(dir, part, mode);
      dir.close();
      dir = next;
    }
  } catch (err) {
    dir.close();
    throw err;
  }
  return dir;
}
