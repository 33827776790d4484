// svc's git: the argv and environment of every git svc starts (docs/engine.md "svc's own git").
import { readFileSync, appendFileSync, existsSync, lstatSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join, basename, dirname, isAbsolute, resolve } from 'node:path';
import { runSync } from '../spawn/start.ts';
import { BadInputError, FailedError, RefusedError } from '../errors.ts';
import { withScratch } from '../spawn/svc-paths.ts';
import { within } from '../spawn/bwrap-argv.ts';
import { allPids, blockFor, orNull, readlinkOrNull, readOrNull, realOrNull } from '../spawn/tree.ts';
import { redactSecrets } from './text.ts';

// Held whatever any config says; the `-c` values reach every git this one starts, through GIT_CONFIG_PARAMETERS.
const SAFE_GIT_CONFIG = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false',
  '-c', 'submodule.recurse=false', '-c', 'diff.ignoreSubmodules=all', '-c', 'status.submoduleSummary=false',
  '-c', 'push.recurseSubmodules=no', '-c', 'fetch.recurseSubmodules=false', '-c', 'core.untrackedCache=false',
  '-c', 'core.attributesFile=/dev/null', '-c', 'core.excludesFile=/dev/null', '-c', 'credential.helper=',
  '-c', 'http.followRedirects=false', '-c', 'protocol.ext.allow=never', '-c', 'commit.gpgSign=false',
  '-c', 'tag.gpgSign=false', '-c', 'log.showSignature=false', '-c', 'gc.auto=0', '-c', 'maintenance.auto=false',
] as const;

const GIT_ISOLATION_ENV: Readonly<Record<string, string>> = {
  GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', GIT_ATTR_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0',
};

// The operator's GIT_* names that only say who commits or how to reach a server; every other one stays out.
const GIT_NAMES_PASSED = new Set(['GIT_AUTHOR_NAME', 'GIT_AUTHOR_EMAIL', 'GIT_COMMITTER_NAME', 'GIT_COMMITTER_EMAIL',
  'GIT_SSH_COMMAND', 'GIT_SSH', 'GIT_SSL_CAINFO', 'GIT_SSL_CAPATH', 'GIT_HTTP_LOW_SPEED_LIMIT',
  'GIT_HTTP_LOW_SPEED_TIME']);

export function gitBaseEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('GIT_') || GIT_NAMES_PASSED.has(name)) out[name] = value;
  }
  return out;
}

export function gitArgv(args: readonly string[]): string[] {
  return ['git', ...SAFE_GIT_CONFIG, ...args];
}

/** What the call site chose, then the isolation, which `extra` cannot undo. */
export function gitExtraEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { ...extra, ...GIT_ISOLATION_ENV };
}

/** Git config `pairs` as the GIT_CONFIG_COUNT environment, whose keys may hold any character (a `-c` key cannot hold
 * '='); no pairs, no variables. */
export function gitConfigEnv(pairs: ReadonlyArray<readonly [string, string]>): Record<string, string> {
  const env: Record<string, string> = pairs.length ? { GIT_CONFIG_COUNT: String(pairs.length) } : {};
  pairs.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return env;
}

const FILTER_OFF = [['clean', ''], ['smudge', ''], ['process', ''], ['required', 'false']] as const;

// Switches off every filter driver named in `git config -z --get-regexp '^filter\.'` output.
function filterOverrides(configEntries: string): Record<string, string> {
  const drivers = new Set<string>();
  for (const entry of configEntries.split('\0')) {
    const m = /^filter\.(.+)\.[^.]+$/s.exec(entry.split('\n', 1)[0] ?? '');
    if (m) drivers.add(m[1]!);
  }
  return gitConfigEnv([...drivers].flatMap((name) =>
    FILTER_OFF.map(([setting, value]) => [`filter.${name}.${setting}`, value] as const)));
}

/** Runs one git argv (already hardened) and returns stdout; `scratch` are folders it writes besides the repository;
 * `timeout` (ms) kills it. */
export type GitRun = (
  cwd: string, argv: string[], opts: { extra: Record<string, string>; scratch: string[]; timeout: number },
) => string;

/** git on the host, for svc's own work on trusted state (before the agent, or pushing what git committed). */
export const hostGit: GitRun = (cwd, argv, { extra, timeout }) =>
  runSync(argv, { kind: 'tool', base: gitBaseEnv(process.env), extra, cwd, maxBuffer: 256 * 1024 * 1024, timeout });

/** A working tree svc's git cannot read: a special file where git reads its rules, or a git that never ended. */
export class UnreadableTreeError extends RefusedError {}

/** A git svc ran did not end within its time limit and was killed: a remote that never answers, a hung helper. */
export class GitTimeoutError extends FailedError {}

// Every git svc starts is killed after its limit (one waiting on a FIFO, a remote or a helper waits for ever); one that
// talks to a remote, or checks out or removes a whole worktree, gets longer: a first clone or a checkout of a large
// repository is slow without being stuck.
const GIT_TIMEOUT_MS = 120_000;
const LONG_GIT_TIMEOUT_MS = 15 * 60_000;
const LONG_COMMANDS: ReadonlySet<string> = new Set(['push', 'fetch', 'clone', 'ls-remote', 'worktree']);

/** The git subcommand of `args` (past `-c name=value` and options), for messages. */
function subcommand(args: readonly string[]): string {
  return args.find((a, i) => !a.startsWith('-') && args[i - 1] !== '-c') ?? args[0] ?? 'git';
}

export function gitTimeoutMs(args: readonly string[]): number {
  return LONG_COMMANDS.has(subcommand(args)) ? LONG_GIT_TIMEOUT_MS : GIT_TIMEOUT_MS;
}

const REDIRECT = /unable to access '([^']+)': The requested URL returned error: (30[123578])/;

/** A git that failed because its server redirected it (git-token.ts refuses to follow with a credential). */
export class GitRedirectedError extends FailedError {}

/** Where a failed git's stderr says its server redirected it, if it does. */
export function redirectedUrl(stderr: string): string | null {
  return REDIRECT.exec(stderr)?.[1] ?? null;
}

export function git(
  cwd: string, args: string[], extra: Record<string, string> = {}, run: GitRun = hostGit, scratch: string[] = [],
  timeoutMs = gitTimeoutMs(args),
): string {
  try {
    return run(cwd, gitArgv(args), { extra: gitExtraEnv(extra), scratch, timeout: timeoutMs });
  } catch (err) {
    throw gitError(cwd, args, err);
  }
}

/** What a git that failed throws, however it ran: `err` as execFileSync's (`code` ETIMEDOUT at its limit, `stderr`). */
export function gitError(cwd: string, args: readonly string[], err: unknown): Error {
  if (err instanceof UnreadableTreeError) return err;
  const command = subcommand(args);
  if ((err as { code?: unknown }).code === 'ETIMEDOUT') {
    // No figure: a `run` may hold its own limit (the signer's).
    return new GitTimeoutError(`git ${command} did not end within its time limit in ${cwd}, so svc ended it`);
  }
  const stderr = String((err as { stderr?: unknown }).stderr ?? '').trim();
  const message = `git ${command} failed${stderr ? `: ${redactSecrets(stderr.split('\n')[0]!)}` : ''}`;
  return redirectedUrl(stderr) === null ? new FailedError(message) : new GitRedirectedError(message);
}

/** git's stdout, or '' when it fails (as `git config` does when nothing matches). */
export function tryGit(dir: string, args: string[]): string {
  return orNull(() => git(dir, args)) ?? '';
}

/** The root of the git repository holding `dir`, or null when it is in none (or git cannot read it). */
export function repoRoot(dir: string): string | null {
  return tryGit(dir, ['rev-parse', '--show-toplevel']).trim() || null;
}

/** A HEAD that names a ref git cannot read (a corrupt or broken ref file): the checkout has commits svc cannot see. */
export class BrokenHeadError extends BadInputError {}

/** HEAD's commit and its branch (null when detached), with the checkout's git directories (`gitDirs`), read by one
 * git. When any git here times out, its GitTimeoutError. When it fails otherwise, `gitDirs` is asked: its error
 * when it fails too (no repository, no git to start); else BadInputError "no commits yet" when HEAD names a branch
 * not made yet, BrokenHeadError when git cannot read the ref it names (the messages name no caller's action, so they
 * fit the launcher, prune and seal). `run`: how git is started (a test's shorter time limit). */
export function headAndBranch(
  dir: string, run: GitRun = hostGit,
): { sha: string; branch: string | null; own: string; common: string } {
  let out: string;
  try {
    out = git(dir, ['rev-parse', 'HEAD', '--abbrev-ref', 'HEAD', '--git-dir', '--git-common-dir'], {}, run);
  } catch (err) {
    if (err instanceof GitTimeoutError) throw err;
    // The same git fails for a checkout with no commit yet; reading its git directories tells that from no repository.
    gitDirs(dir, run);
    // A branch not made yet is still a symbolic ref; this relies on symbolic-ref following the ref HEAD names, which
    // fails when that ref is broken. Its own time limit stays a GitTimeoutError, never read as a broken HEAD.
    try {
      git(dir, ['symbolic-ref', '--quiet', 'HEAD'], {}, run);
    } catch (refErr) {
      if (refErr instanceof GitTimeoutError) throw refErr;
      throw new BrokenHeadError(`The repository at "${dir}" has a broken HEAD: git cannot read the ref it names ` +
        '(a corrupt ref file); repair it or check out a branch first', { cause: err });
    }
    throw new BadInputError(`The repository at "${dir}" has no commits yet; commit something first`, { cause: err });
  }
  // A commit and a branch name never hold a line break; a line more is one in a git directory's path.
  const [sha, name, ...paths] = out.replace(/\n$/, '').split('\n');
  const [own, common] = checkedGitDirs(dir, paths);
  return { sha: sha!, branch: name === 'HEAD' ? null : name!, own, common };
}

/** "owner/name" of a remote URL (https, ssh or scp-like form, or a path), or null. */
export function repoSlug(url: string): string | null {
  const m = /[:/]([^/:]+)\/([^/]+?)(?:\.git)?\/?$/.exec(url);
  return m ? `${m[1]}/${m[2]}` : null;
}

export function repoName(dir: string): string {
  return repoSlug(tryGit(dir, ['remote', 'get-url', 'origin']).trim()) ?? basename(dir);
}

/** The checkout's own git directory (a linked worktree's is apart from the repository's: for svc's files about this
 * checkout, never in its tree) and the repository's, read by one git. */
export function gitDirs(dir: string, run: GitRun = hostGit): { own: string; common: string } {
  const [own, common] = checkedGitDirs(dir, git(dir, ['rev-parse', '--git-dir', '--git-common-dir'], {}, run)
    .replace(/\n$/, '').split('\n'));
  return { own, common };
}

/** The two git directories from the lines git printed for them, resolved from `dir`. */
function checkedGitDirs(dir: string, lines: string[]): [string, string] {
  // git prints each on its own line: a line break in one would read as two paths, one of them in the work tree.
  if (lines.length !== 2) {
    throw new RefusedError(`svc cannot read the git directories of ${dir}: a git directory path holds a line break; ` +
      'move the repository to a path without one (nothing was started)');
  }
  return [resolve(dir, lines[0]!), resolve(dir, lines[1]!)];
}

/** Keeps the engine's own folders out of `git status` and `git add -A` (info/exclude, not .gitignore). No trailing
 * slash: a rule ending in "/" matches only a folder, so an agent's link of that name would be committed. */
export function excludeEngineFolders(common: string): void {
  mkdirSync(join(common, 'info'), { recursive: true });
  const path = join(common, 'info', 'exclude');
  const text = existsSync(path) ? readFileSync(path, 'utf8') : '';
  const wanted = ['/.svc/runs', '/.svc/worktrees', '/.svc/inbox', '/.svc/ship-pending']
    .filter((folder) => !text.split('\n').includes(folder));
  if (wanted.length) appendFileSync(path, `${text && !text.endsWith('\n') ? '\n' : ''}${wanted.join('\n')}\n`);
}

/** A config include naming a file the repository's work tree holds: the repository (or an agent) writes it. */
export class IncludedTreeConfigError extends RefusedError {}

/** `path` with its longest existing leading part through its links, the rest as written. */
function realSpelling(path: string): string {
  const rest: string[] = [];
  for (let head = path; ; head = dirname(head)) {
    const real = realOrNull(head);
    if (real !== null) return join(real, ...rest);
    if (dirname(head) === head) return path;
    rest.unshift(basename(head));
  }
}

/**
 * Refuses a repository whose own config includes a file inside its work tree (`include.path = ../.gitconfig`): git
 * would read the filters and programs that file names, and the repository, or an agent writing the tree, chooses
 * them (DESIGN §7a: svc runs nothing the repository configures). The includes are read without following them, so a
 * file written later changes nothing.
 */
function refuseTreeIncludes(dir: string, run: GitRun): void {
  let listed = '';
  try {
    listed = git(dir, ['config', '--no-includes', '--show-origin', '-z', '--get-regexp',
      '^(include|includeif\\..*)\\.path$'], {}, run);
  } catch (err) {
    // git config fails when nothing matches; a git that never ended is not that.
    if (err instanceof UnreadableTreeError) throw err;
    return;
  }
  const { own: gitDir, common } = gitDirs(dir, run);
  const inAny = (path: string, folders: string[]) => folders.some((f) => within(path, f));
  // Each as written and through its links: a tree reached through a link is the same tree.
  const spellings = (path: string) => [path, realSpelling(path)];
  const trees = [resolve(dir), dirname(common)].flatMap(spellings);
  // The git directories themselves (`.git/config.local`) are no agent's to write: the sandbox binds them read-only.
  const gitFolders = [gitDir, common].flatMap(spellings);
  const home = process.env.HOME ?? '/';
  const fields = listed.split('\0');
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const origin = resolve(dir, fields[i]!.replace(/^file:/, ''));
    const value = fields[i + 1]!.slice(fields[i + 1]!.indexOf('\n') + 1);
    const named = value.startsWith('~/') ? join(home, value.slice(2))
      : isAbsolute(value) ? value : resolve(dirname(origin), value);
    // Through its links (a folder linked to the checkout is the checkout); /proc/self/cwd and /dev/fd lead wherever
    // the reading git stands, the work tree among them.
    const target = realSpelling(named);
    if (inAny(target, gitFolders) && !inAny(named, ['/proc', '/dev/fd'])) continue;
    if (inAny(target, trees) || inAny(named, ['/proc', '/dev/fd'])) {
      throw new IncludedTreeConfigError(`The repository's git config (${origin}) includes ${target}, a file of its ` +
        'work tree, which the repository or an agent writes: svc runs no git that reads it. Move that config into ' +
        '.git/config or outside the checkout');
    }
  }
}

/** A worktree of `repo` at `base`, checked out as committed: no filter the repository's config names runs. */
export function createWorktree(repo: string, path: string, branch: string, base: string): void {
  refuseTreeIncludes(repo, hostGit);
  const noFilters = filterOverrides(tryGit(repo, ['config', '-z', '--get-regexp', '^filter\\.']));
  git(repo, ['worktree', 'add', '-b', branch, path, base], noFilters);
}

/** The files git opens at a working tree's root before it reads any path (a FIFO there blocks it at once). */
const RULE_FILES = ['.gitattributes', '.gitignore'] as const;

/** What `path` is when it is none of a regular file, a folder or (`links`) a symbolic link: "a FIFO", "a device", …;
 * null when it is one of those, or absent. */
export function specialKind(path: string, links = true): string | null {
  const st = lstatSync(path, { throwIfNoEntry: false });
  if (!st || st.isFile() || st.isDirectory() || (links && st.isSymbolicLink())) return null;
  return st.isFIFO() ? 'a FIFO' : st.isSymbolicLink() ? 'a symbolic link' : st.isSocket() ? 'a socket'
    : st.isCharacterDevice() || st.isBlockDevice() ? 'a device' : 'not a regular file';
}

/** svc's git on one working tree (whoever wrote its files): every call time-limited, no config the tree holds read. */
export interface TreeGit {
  dir: string;
  run: GitRun;
}

/**
 * `run` for the working tree `dir`, refused when a rule file at its root is a FIFO, socket or device, or when the
 * repository's config includes a file of its work tree. The filters the repository's own config names (git-lfs,
 * git-crypt) run as git runs them: the tree and its starting point are read the same way. `lockDir` is the git
 * directory of a worktree svc made for this run (`runWorktreeGitDir`), the only place a killed git's lock is removed.
 */
export function treeGit(
  dir: string, run: GitRun = hostGit, timeoutMs = GIT_TIMEOUT_MS, lockDir: string | null = null,
): TreeGit {
  for (const name of RULE_FILES) {
    const kind = specialKind(join(dir, name));
    if (kind) {
      throw new UnreadableTreeError(`${join(dir, name)} is ${kind}, not a regular file: git would wait on it for ` +
        'ever, so svc runs no git on this working tree');
    }
  }
  const locks = lockDir === null ? [] : TREE_LOCKS.map((name) => join(lockDir, name));
  const bounded: GitRun = (cwd, argv, opts) => {
    const began = Date.now();
    const absent = locks.filter((path) => !existsSync(path));
    try {
      return run(cwd, argv, { ...opts, timeout: timeoutMs });
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'ETIMEDOUT') throw err;
      removeLocksLeft(absent, began);
      // Elsewhere a lock may be another git's (one waiting on an editor holds its lock file closed), so it stays.
      const stale = lockDir === null ? '; if it left an index.lock or HEAD.lock in the git directory ' +
        '(`git rev-parse --git-path index.lock` names it), remove that once no git runs there' : '';
      throw new UnreadableTreeError(`git ${subcommand(argv.slice(1))} did not end within ${timeoutMs / 1000} s in ` +
        `${cwd} (a FIFO or device where git reads a .gitattributes or .gitignore blocks it for ever)${stale}`);
    }
  };
  refuseTreeIncludes(dir, bounded);
  return { dir, run: bounded };
}

// The locks a git writing the tree's index holds in its git directory. A git the time limit ends by SIGTERM removes
// them itself; one in a sandbox dies by SIGKILL when its bwrap does, and leaves them, after which every git there
// (a resumed or retried run's) refuses to run.
const TREE_LOCKS = ['index.lock', 'HEAD.lock'] as const;

/**
 * The git directory of the worktree svc made at `worktree` for a run of `repo`: `<common dir>/worktrees/<folder name>`,
 * as `git worktree add` names it, computed by svc and never read from the worktree's `.git` file (the agent writes
 * that). Null when git cannot name the common dir, a part is not a plain folder (a link), or its `gitdir` does not
 * name that worktree.
 */
export function runWorktreeGitDir(repo: string, worktree: string): string | null {
  const common = orNull(() => gitDirs(repo).common);
  if (common === null) return null;
  const own = join(common, 'worktrees', basename(worktree));
  for (const path of [join(common, 'worktrees'), own]) {
    if (!lstatSync(path, { throwIfNoEntry: false })?.isDirectory()) return null;
  }
  const named = readOrNull(join(own, 'gitdir'))?.trim();
  return named === join(realOrNull(worktree) ?? worktree, '.git') ? own : null;
}

/** Whether any process holds `path` open, by the descriptors /proc lists (none where there is no /proc). */
function heldOpen(path: string): boolean {
  return allPids().some((pid) => (orNull(() => readdirSync(`/proc/${pid}/fd`)) ?? [])
    .some((fd) => readlinkOrNull(`/proc/${pid}/fd/${fd}`) === path));
}

/**
 * Removes each of `paths` (absent when svc's git began at `began`) that the killed git left: a regular file made since,
 * once no process holds it open (the sandbox's git may take a moment to die). A lock some other git made and holds
 * stays.
 */
function removeLocksLeft(paths: string[], began: number): void {
  for (const path of paths) {
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (!st?.isFile() || st.mtimeMs < began - 1000) continue;
    const real = realOrNull(path) ?? path;
    const deadline = Date.now() + 2000;
    while (heldOpen(real) && Date.now() < deadline) blockFor(20);
    if (!heldOpen(real)) rmSync(path, { force: true });
  }
}

/** One git in a given directory and environment: the argv after `git`, its stdout back. */
export type GitIn = (args: string[]) => string;

/** Repositories the agent made in the worktree (untracked `path/`): never added (docs/engine.md, the sandbox). */
function embeddedRepositories(inDir: GitIn): string[] {
  const listed = inDir(['ls-files', '--others', '--exclude-standard', '-z']);
  return listed.split('\0').filter((p) => p.endsWith('/')).map((p) => p.slice(0, -1));
}

function addAll(inDir: GitIn, skip: string[]): void {
  inDir(['add', '-A', ...skip.length ? ['--', '.', ...skip.map((p) => `:(exclude,literal)${p}`)] : []]);
}

/** Commits all but embedded repositories (returned); the committer is read on the host (`run` sees no ~/.gitconfig). */
export function commitAll({ dir, run }: TreeGit, message: string, repo: string): string[] {
  const name = tryGit(repo, ['config', 'user.name']).trim() || 'svc';
  const email = tryGit(repo, ['config', 'user.email']).trim() || 'svc@localhost';
  const inDir: GitIn = (args) => git(dir, args, {}, run);
  const skipped = embeddedRepositories(inDir);
  addAll(inDir, skipped);
  if (inDir(['status', '--porcelain', '--ignore-submodules=all']).trim() !== '') {
    inDir(['-c', `user.name=${name}`, '-c', `user.email=${email}`, 'commit', '-q', '--no-verify', '-m', message]);
  }
  return skipped;
}

/** The paths `git status` lists as changed or untracked (not ignored), and the embedded repositories apart. */
export function workingChanges({ dir, run }: TreeGit): { changed: string[]; embedded: string[] } {
  const out = git(dir, ['status', '--porcelain=v1', '-z', '--untracked-files=all', '--ignore-submodules=all'], {}, run);
  const changed: string[] = [];
  const embedded: string[] = [];
  const entries = out.split('\0');
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]!;
    if (entry.length < 4) continue;
    const path = entry.slice(3);
    // A rename or copy carries its source as the next entry.
    if (entry[0] === 'R' || entry[0] === 'C') i++;
    if (entry.startsWith('?? ') && path.endsWith('/')) embedded.push(path.slice(0, -1));
    else changed.push(path);
  }
  return { changed, embedded };
}

/** `body` with a throwaway index of `from` plus the working tree (ignored and `embedded` left out; null: found). The
 * launcher's snapshot and the finish's diff (diff.ts) read the tree the same way through it. */
export function withWorkingIndex<T>(
  { dir, run }: TreeGit, from: string, embedded: string[] | null, body: (inTmp: GitIn, tmp: string) => T,
): T {
  return withScratch('diff', (tmp) => {
    const inTmp: GitIn = (args) => git(dir, args, { GIT_INDEX_FILE: join(tmp, 'index') }, run, [tmp]);
    inTmp(['read-tree', from]);
    addAll(inTmp, embedded ?? embeddedRepositories(inTmp));
    return body(inTmp, tmp);
  });
}

/** The tree of the working tree now: a run without a worktree diffs against it, not against HEAD. */
export function snapshotTree(tree: TreeGit, embedded: string[]): string {
  return withWorkingIndex(tree, 'HEAD', embedded, (inTmp) => inTmp(['write-tree']).trim());
}
