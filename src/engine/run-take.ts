// Taking a run: one process at a time checks that no live worker holds a run and records itself (or the worker it
// starts) as its worker, under a lock file in the run's folder. Must not: hold the lock across an await, or clear a
// lock whose holder (pid and start time, proc-group.ts) still lives.
import {
  closeSync, constants, fstatSync, linkSync, lstatSync, openSync, readSync, rmSync, unlinkSync, writeFileSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { ConflictError } from '../errors.ts';
import { holderAlive, isPidAlive, procStart, type Holder } from '../proc-stat.ts';
import { orNull } from '../spawn/tree.ts';
import { listPlain, pathIn, withDir, type PlainDir } from './plain-tree.ts';
import { openRunDir } from './safe-fs.ts';
import { obj, tryParseJson } from '../untrusted.ts';

/** The lock's name in the run folder; `<it>.clearing` guards the clearing of one whose holder is gone. */
export const TAKE_LOCK = 'take.lock';

/** Another process is taking the run this very moment: it holds the take lock and is alive. */
export class RunBeingTakenError extends ConflictError {}

/** A folder stands at a lock's name (or its guard's): svc never makes one, no unlink removes it, and while it is
 * there no command takes the run. A person removes it; the message names it. */
export class LockBlockedError extends RunBeingTakenError {}

/** createWith's temp names, `<lock>.<pid>.<8 hex>.tmp`, of the take lock, its guards and ship-hold.ts SHIP_HOLD. */
const TEMP_NAME = /^(?:take\.lock(?:\.clearing)*|ship\.hold)\.([1-9][0-9]{0,9})\.[0-9a-f]{8}\.tmp$/;

/** A lock file as read: its inode (what a clearer compares), and its holder (null: none svc wrote). */
export interface Found {
  ino: number;
  holder: Holder | null;
}

/** How many guards deep a clearing goes: each level needs one more process to have died while clearing. */
const MAX_DEPTH = 4;
const MAX_TRIES = 8;

export const me = (): Holder => ({ pid: process.pid, proc_start: procStart(process.pid) });

/**
 * `take` run under the run's take lock, the lock released after it (thrown or not). `take` reads the run, refuses one a
 * live worker holds (last-worker.ts refuseHeldRun) and records its own worker, all at once for every other taker: two
 * can no longer both read "no worker" and both take the run. Synchronous: the lock is never held across an await.
 */
export function takeRun<T>(dir: string, run: string, take: () => T): T {
  return withDir(openRunDir(dir), (folder) => {
    acquire(folder, run);
    try {
      clearDeadTemps(folder);
      return take();
    } finally {
      rmSync(pathIn(folder, TAKE_LOCK), { force: true });
    }
  });
}

function acquire(folder: PlainDir, run: string): void {
  for (let tries = 0; tries < MAX_TRIES; tries++) {
    if (createWith(folder, TAKE_LOCK)) return;
    const found = readLock(folder, TAKE_LOCK);
    // Released meanwhile: try again.
    if (found === null) continue;
    if (holderAlive(found.holder)) throw takenBy(run, found.holder);
    clearStale(folder, TAKE_LOCK, found, 0, run);
  }
  throw new RunBeingTakenError(`Run ${run} is being taken by other svc commands: try again`);
}

const takenBy = (run: string, holder: Holder | null) => new RunBeingTakenError(`Run ${run} is being taken by ` +
  `another svc command${holder ? ` (pid ${holder.pid})` : ''} this very moment: try again once that has started`);

/**
 * Removes `name` if it is still the file `seen` whose holder is gone. Only one process at a time compares and removes
 * it (it holds `<name>.clearing`): two that found the same stale lock could otherwise both remove it, the second
 * removing the lock the first took meanwhile. A guard whose own holder died is cleared the same way, one level down.
 */
function clearStale(folder: PlainDir, name: string, seen: Found, depth: number, run: string): void {
  if (depth >= MAX_DEPTH) throw new RunBeingTakenError(`Run ${run}'s ${name} cannot be cleared: remove it by hand`);
  const guard = `${name}.clearing`;
  for (let tries = 0; !createWith(folder, guard); tries++) {
    const other = readLock(folder, guard);
    if (other === null && tries < MAX_TRIES) continue;
    if (other === null || holderAlive(other.holder)) throw takenBy(run, other?.holder ?? null);
    clearStale(folder, guard, other, depth + 1, run);
  }
  try {
    // Nobody else removes `name` while the guard is ours (its holder is gone: it cannot), so what is compared here is
    // what is removed. A lock taken since has another holder (a live one), even where it got the freed inode again.
    const now = readLock(folder, name);
    if (now !== null && now.ino === seen.ino && sameHolder(now.holder, seen.holder)) unlinkLock(folder, name, run);
  } finally {
    rmSync(pathIn(folder, guard), { force: true });
  }
}

/** Removes the lock file `name` (a link itself, never its target); a folder there is a LockBlockedError. */
export function unlinkLock(folder: PlainDir, name: string, run: string): void {
  try {
    unlinkSync(pathIn(folder, name));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return;
    // EISDIR on Linux, EPERM where unlink(2) says so for a folder (and for a file it may not remove: not a folder).
    const folderThere = lstatSync(pathIn(folder, name), { throwIfNoEntry: false })?.isDirectory() === true;
    if ((code !== 'EISDIR' && code !== 'EPERM') || !folderThere) throw err;
    throw new LockBlockedError(`Run ${run} cannot be taken: "${join(folder.path, name)}" is a folder, which svc ` +
      'never makes there; remove it by hand, then try again', { cause: err });
  }
}

/**
 * Removes the temp files of createWith whose process is gone (one killed between its write and its removal of the
 * temp): only names of exactly that pattern, only regular files (lstat: a link is never followed), only when the pid
 * in the name is dead. A live pid's stays, whoever it now is: never a temp of a take under way.
 */
function clearDeadTemps(folder: PlainDir): void {
  for (const { name, kind } of listPlain(folder)) {
    const pid = TEMP_NAME.exec(name)?.[1];
    if (pid === undefined || kind !== 'file' || isPidAlive(Number(pid))) continue;
    // Gone meanwhile, or no longer a file: nothing of svc's to remove.
    orNull(() => unlinkSync(pathIn(folder, name)));
  }
}

/** Makes `name` holding this process's identity, whole or not at all (a link to a file written first); false when
 * one is there already. */
export function createWith(folder: PlainDir, name: string): boolean {
  const temp = pathIn(folder, `${name}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  writeFileSync(temp, JSON.stringify(me()) + '\n', { flag: 'wx', mode: 0o600 });
  try {
    linkSync(temp, pathIn(folder, name));
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    rmSync(temp, { force: true });
  }
}

/** The lock file `name` (never followed if a link), or null when there is none. */
export function readLock(folder: PlainDir, name: string): Found | null {
  const path = pathIn(folder, name);
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO planted there cannot block the open (and with it every take of the run).
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    // A link, or something else svc never makes there: nobody holds it.
    const ino = lstatSync(path, { throwIfNoEntry: false })?.ino;
    if (ino === undefined) return null;
    // ENXIO: a socket, which no open reads.
    if (code === 'ELOOP' || code === 'EACCES' || code === 'ENXIO') return { ino, holder: null };
    throw err;
  }
  try {
    const st = fstatSync(fd);
    // Only svc's own file names a holder: another user's could name any live process and hold the run for good.
    if (!st.isFile() || st.uid !== process.getuid?.()) return { ino: st.ino, holder: null };
    const buf = Buffer.alloc(256);
    const n = readSync(fd, buf, 0, buf.length, 0);
    return { ino: st.ino, holder: readHolder(tryParseJson(buf.subarray(0, n).toString('utf8'))) };
  } finally {
    closeSync(fd);
  }
}

const sameHolder = (a: Holder | null, b: Holder | null): boolean =>
  a === null || b === null ? a === b : a.pid === b.pid && a.proc_start === b.proc_start;

/** The holder a lock file names (svc writes identityOf's pid and start time), or null when it names none. */
export function readHolder(value: unknown): Holder | null {
  const { pid, proc_start: start } = obj(value);
  if (typeof pid !== 'number' || !Number.isSafeInteger(pid) || pid <= 0) return null;
  return typeof start === 'string' || start === null ? { pid, proc_start: start } : null;
}
