// One launcher at a time checks that a checkout is free and writes its new run's state there (engine/launch.ts):
// without this two `svc start` at the same moment both found the checkout free and shared it, each signing the
// other's work. The claim is `svc-checkout-claim` in the checkout's git directory (never repository content: a claim
// a repository commits would hold every start off, and taking it over would change tracked files), a folder put in
// place whole by rename, which never replaces a folder holding files, with its launcher's identity inside. Beside it,
// `info/svc-repo-names`: the repository name the checkout's runs last took, so a renamed origin renames them too.
import { join } from 'node:path';
import { mkdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { BadInputError, RefusedError } from '../errors.ts';
import { tryParseJson } from '../untrusted.ts';
import { workerAlive, workerComing } from './proc-group.ts';
import { holderAlive, identityOf, isPidAlive } from '../proc-stat.ts';
import { holderOf } from './last-worker.ts';
import { listPlain, openPlainPath, pathIn, readAgentFile, type PlainDir } from './plain-tree.ts';
import { withDir, writeNoFollow } from './safe-fs.ts';
import { appendEvent, localRuns, readState, writeState, type Found, type RunState } from './run-state.ts';
import { readHolder, takeRun } from './run-take.ts';
import { runDir } from './paths.ts';
import { markPending } from './ship-pending.ts';
import { isWebhookOrigin } from './spec.ts';
import { orNull, readOrNull, realOrNull } from '../spawn/tree.ts';

const CLAIM = 'svc-checkout-claim';
/** Another launcher's check and first writes take milliseconds; one holding the claim this long is stuck. */
const WAIT_MS = 30_000;

/** The checkout's git directory held open: the claim's names are looked up inside it, never through a link. */
function inGitDir<T>(gitDir: string, use: (dir: PlainDir) => T): T {
  const dir = openPlainPath(realOrNull(gitDir) ?? gitDir, []);
  if ('failed' in dir) {
    throw new RefusedError(`Cannot claim the checkout: its git directory "${gitDir}" is not a folder`);
  }
  return withDir(dir, use);
}

/** A git directory this user may not write (a read-only mount, another user's checkout) said as such; else `err`. */
export function unwritable(gitDir: string, err: unknown): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  if (code !== 'EROFS' && code !== 'EACCES' && code !== 'EPERM') return err;
  return new BadInputError(`Cannot claim the checkout: its git directory "${gitDir}" is not writable here (${code}); ` +
    'svc start writes its claim and its commits there, so run it as a user who can write the checkout, where it is ' +
    'mounted writable', { cause: err });
}

/** The claim's inode, its launcher's pid and whether it still runs (the same pid, same start time); null: no claim. */
function readClaim(dir: PlainDir): { inode: number; pid: number | null; alive: boolean } | null {
  try {
    const inode = statSync(pathIn(dir, CLAIM)).ino;
    // No readable owner: judged as a dead launcher's. A live one is the process it names (proc-stat.ts holderAlive).
    const owner = readHolder(tryParseJson(readOrNull(pathIn(dir, `${CLAIM}/owner`)) ?? ''));
    const held = { inode, pid: owner?.pid ?? null, alive: holderAlive(owner) };
    return statSync(pathIn(dir, CLAIM)).ino === inode ? held : readClaim(dir);
  } catch {
    return null;
  }
}

/** A launcher's own folder (`svc-checkout-claim-<pid>-<hex>`) left by one killed before it took the claim. */
const LAUNCHER_FOLDER = new RegExp(`^${CLAIM}-(\\d+)-[0-9a-f]{12}$`);

/** Removes the folders of launchers no longer running, so they do not pile up in the git directory. */
function removeDeadLaunchers(dir: PlainDir): void {
  for (const { name } of listPlain(dir)) {
    const pid = Number(LAUNCHER_FOLDER.exec(name)?.[1] ?? NaN);
    if (Number.isSafeInteger(pid) && pid > 0 && !isPidAlive(pid)) {
      rmSync(pathIn(dir, name), { recursive: true, force: true });
    }
  }
}

/**
 * Takes the claim in the checkout's own git directory `gitDir` (`gitDirs(…).own`), waiting while another live
 * launcher holds it; returns its release. A claim whose
 * launcher died is moved aside to `svc-checkout-claim-dead-<inode>`, kept while this launcher waits or holds the
 * claim (a second launcher that judged the same claim dead then fails to move a fresh claim onto that name, as rename
 * never replaces a folder holding files), and removed when it is done. What that leaves open: a launcher paused
 * between its read of a dead claim and its move (two adjacent calls) for as long as another moved it, took, held and
 * released the claim would move a later live claim aside; closing it needs a rename-if-same-inode, which POSIX lacks.
 */
export async function claimCheckout(gitDir: string): Promise<() => void> {
  const mine = `${CLAIM}-${process.pid}-${randomBytes(6).toString('hex')}`;
  const movedAside: string[] = [];
  const removeOwn = () => inGitDir(gitDir, (dir) => {
    for (const name of [mine, ...movedAside]) rmSync(pathIn(dir, name), { recursive: true, force: true });
  });
  inGitDir(gitDir, (dir) => {
    try {
      mkdirSync(pathIn(dir, mine));
    } catch (err) {
      throw unwritable(gitDir, err);
    }
    writeFileSync(pathIn(dir, `${mine}/owner`), JSON.stringify(identityOf(process.pid)), { flag: 'wx' });
  });
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const holder = inGitDir(gitDir, (dir) => {
      try {
        renameSync(pathIn(dir, mine), pathIn(dir, CLAIM));
        return 'taken';
      } catch {
        const held = readClaim(dir);
        if (held && !held.alive) {
          try {
            renameSync(pathIn(dir, CLAIM), pathIn(dir, `${CLAIM}-dead-${held.inode}`));
            movedAside.push(`${CLAIM}-dead-${held.inode}`);
          } catch {
            // another launcher moved it first
          }
        }
        return held?.pid ?? null;
      }
    });
    if (holder === 'taken') break;
    if (Date.now() > deadline) {
      removeOwn();
      const who = holder === null ? 'Another svc start' : `Another svc start (pid ${holder})`;
      throw new RefusedError(`${who} has been claiming this checkout for 30 s; try again (nothing was started)`);
    }
    await sleep(20);
  }
  inGitDir(gitDir, removeDeadLaunchers);
  return () => {
    inGitDir(gitDir, (dir) => renameSync(pathIn(dir, CLAIM), pathIn(dir, mine)));
    removeOwn();
  };
}

const MAX_NAMES_BYTES = 1024 * 1024;

/** `path → name` from the names file; a file that is missing or a link reads as empty. */
function readNames(file: string): Map<string, string> {
  const names = new Map<string, string>();
  for (const line of (readAgentFile(file, MAX_NAMES_BYTES) ?? '').split('\n')) {
    const tab = line.indexOf('\t');
    if (tab > 0) names.set(line.slice(tab + 1), line.slice(0, tab));
  }
  return names;
}

/** The fields the rename reads, as the strings svc writes; anything else is not a run svc wrote. */
function isRenamable(state: RunState): boolean {
  return (['repo', 'repo_path', 'status', 'origin'] as const).every((key) => typeof state[key] === 'string');
}

/**
 * Renames one run, on its state as read under its take lock (run-take.ts): a resume, a verify or an --open-pr that took
 * the run since it was listed would otherwise have its record written over. False when it could not be (a worker holds
 * it, or is taking it; a link, a folder svc can't write): left for a later start.
 */
function rename(repo: string, found: Found, name: string, now: string): boolean {
  const dir = runDir(repo, found.run);
  return orNull(() => takeRun(dir, found.run, () => {
    const state = readState(dir);
    // A worker still there (working, finishing its last ship, verifying) writes its own copy of state.json back; a
    // `svc ship` sending the run would clear the marker this sets, the rename's event left unsent.
    if (state.repo !== found.state.repo || holderOf({ ...state, run: found.run }, repo, dir) !== null) return false;
    if (launching(state, Date.parse(now))) return false;
    writeState(dir, { ...state, repo: name, updated_at: now });
    appendEvent(dir, 'log', { stream: 'svc', text: `repository renamed from ${found.state.repo} to ${name}` });
    markPending(dir);
    return true;
  })) ?? false;
}

/**
 * A queued run whose worker is still to come, or has come and may not show as this run's yet: its launcher records
 * the worker of a new run without the take lock (launch.ts spawnWorker), so a rename now could write over that
 * record with the state it read before it.
 */
function launching(state: RunState, now: number): boolean {
  if (state.status !== 'queued') return false;
  return typeof state.pid === 'number' ? workerAlive(state) : workerComing(state, now);
}

export type RepoRename = NonNullable<ReturnType<typeof adoptRepoName>>;

/**
 * Gives this checkout's ended runs `name` when it differs from the last name svc used here (`from`: the names they
 * had), else null. The name is recorded only once no run is left to rename: the next start looks at those again.
 */
export function adoptRepoName(repo: string, gitDir: string, name: string) {
  try {
    const file = join(gitDir, 'info', 'svc-repo-names');
    const names = readNames(file);
    if (names.get(repo) === name) return null;
    const from = new Set<string>();
    let renamed = 0;
    let left = 0;
    const now = new Date().toISOString();
    for (const found of localRuns(repo, { strict: true })) {
      const { state } = found;
      if (!isRenamable(state) || state.repo === name || state.repo_path !== repo) continue;
      // A run a trigger server started carries the name its job was routed to: that is not the checkout's to change.
      if (isWebhookOrigin(state.origin)) continue;
      if (!rename(repo, found, name, now)) {
        left += 1;
        continue;
      }
      from.add(state.repo);
      renamed += 1;
    }
    if (renamed === 0 && left === 0) {
      writeNoFollow(file, [...names.set(repo, name)].map(([path, named]) => `${named}\t${path}\n`).join(''));
    }
    return renamed ? { to: name, from: [...from].sort(), runs: renamed } : null;
  } catch {
    // Never the reason a run does not start: the next start tries again.
    return null;
  }
}
