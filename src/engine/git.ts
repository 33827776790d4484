// Thin git wrappers: argv arrays through the spawn policy (never a shell), errors carry git's own message.
// Every git runs without svc's credentials in its environment, with no global or system config, and with every program
// a repository can name switched off (hooks, fsmonitor, submodule recursion, external diff and textconv): the argv
// and environment come from src/engine/host-git.ts, the one place that decides them. The calls that read a worktree
// after the agent worked in it also run inside a sandbox of their own (a `GitRun` from src/engine/sandbox.ts), so
// whatever the agent planted that git might still run (an embedded repository's filter) runs with nothing to read or
// reach.
import { readFileSync, appendFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join, basename, resolve } from 'node:path';
import { tmpdir } from 'node:os';
import { createHash } from 'node:crypto';
import { runSync } from '../spawn/start.ts';
import { FailedError } from '../errors.ts';
import { gitArgv, gitBaseEnv, gitExtraEnv, filterOverrides } from './host-git.ts';
import { GitRedirectedError, redirectedUrl } from './git-redirect.ts';

/** Runs one git argv (already hardened) and returns stdout; `scratch` are folders it writes besides the repository. */
export type GitRun = (
  cwd: string, argv: string[], opts: { extra: Record<string, string>; scratch: string[] },
) => string;

const GIT_OUTPUT_CAP = 256 * 1024 * 1024;

/** git on the host, for svc's own work on trusted state (before the agent, or its pushes of what git committed). */
export const hostGit: GitRun = (cwd, argv, { extra }) =>
  runSync(argv, { kind: 'tool', base: gitBaseEnv(process.env), extra, cwd, maxBuffer: GIT_OUTPUT_CAP });

/** `extra` is added to the stripped environment for this one call only (e.g. the push credential, an index file). */
export function git(
  cwd: string, args: string[], extra: Record<string, string> = {}, run: GitRun = hostGit, scratch: string[] = [],
): string {
  try {
    return run(cwd, gitArgv(args), { extra: gitExtraEnv(extra), scratch });
  } catch (err) {
    const stderr = String((err as { stderr?: unknown }).stderr ?? '').trim();
    const command = args.find((a, i) => !a.startsWith('-') && args[i - 1] !== '-c') ?? args[0];
    const message = `git ${command} failed${stderr ? `: ${stderr.split('\n')[0]}` : ''}`;
    const redirected = redirectedUrl(stderr);
    if (redirected !== null) throw new GitRedirectedError(redirected, message);
    throw new FailedError(message);
  }
}

export function repoRoot(dir: string): string {
  return git(dir, ['rev-parse', '--show-toplevel']).trim();
}

export function headSha(dir: string, run: GitRun = hostGit): string {
  return git(dir, ['rev-parse', 'HEAD'], {}, run).trim();
}

export function currentBranch(dir: string): string | null {
  const name = git(dir, ['rev-parse', '--abbrev-ref', 'HEAD']).trim();
  return name === 'HEAD' ? null : name;
}

/** "owner/name" from the origin remote (https or ssh form), else the folder name. */
export function repoName(dir: string): string {
  let url = '';
  try {
    url = git(dir, ['remote', 'get-url', 'origin']).trim();
  } catch {
    return basename(dir);
  }
  const m = /[:/]([^/:]+)\/([^/]+?)(?:\.git)?\/?$/.exec(url);
  return m ? `${m[1]}/${m[2]}` : basename(dir);
}

/** The repository's git directory shared by all its worktrees (where config, hooks and info live). */
export function gitCommonDir(repo: string): string {
  return resolve(repo, git(repo, ['rev-parse', '--git-common-dir']).trim());
}

/**
 * Keeps the engine's own folders out of `git status` and `git add -A` without touching tracked files. `common` is
 * gitCommonDir(repo).
 */
export function excludeEngineFolders(common: string): void {
  const info = join(common, 'info');
  mkdirSync(info, { recursive: true });
  const path = join(info, 'exclude');
  const text = existsSync(path) ? readFileSync(path, 'utf8') : '';
  const lines = text.split('\n');
  const folders = ['/.svc/runs/', '/.svc/worktrees/', '/.svc/inbox/', '/.svc/ship-pending/'];
  const wanted = folders.filter((l) => !lines.includes(l));
  if (wanted.length) appendFileSync(path, `${text && !text.endsWith('\n') ? '\n' : ''}${wanted.join('\n')}\n`);
}

/** `git config -z --get-regexp` in `repo` (includes applied, as the git that runs next would read them), or ''. */
function configMatching(repo: string, pattern: string): string {
  try {
    return git(repo, ['config', '-z', '--get-regexp', pattern]);
  } catch {
    return ''; // git config exits 1 when nothing matches
  }
}

/**
 * A worktree of `repo` at `base`, checked out on the host with no filter program the repository's config names (an
 * agent may have written that config): files are checked out as committed (a git-lfs file as its pointer).
 */
export function createWorktree(repo: string, path: string, branch: string, base: string): void {
  const noFilters = filterOverrides(configMatching(repo, '^filter\\.'));
  git(repo, ['worktree', 'add', '-b', branch, path, base], noFilters);
}

/**
 * The committer, read on the host from the repository's trusted config (the sandboxed git sees no HOME, so no
 * ~/.gitconfig): the configured name and email, else a neutral identity.
 */
function identityArgs(repo: string): string[] {
  const read = (key: string): string => {
    try {
      return git(repo, ['config', key]).trim();
    } catch {
      return '';
    }
  };
  const name = read('user.name') || 'svc';
  const email = read('user.email') || 'svc@localhost';
  return ['-c', `user.name=${name}`, '-c', `user.email=${email}`];
}

/**
 * Repositories the agent made inside the worktree (git lists an untracked one as `path/`). svc never adds them: a
 * gitlink names a commit nobody can fetch, and git would have to look inside, where the agent wrote the config.
 */
export function embeddedRepositories(dir: string, run: GitRun = hostGit, extra: Record<string, string> = {},
  scratch: string[] = []): string[] {
  const listed = git(dir, ['ls-files', '--others', '--exclude-standard', '-z'], extra, run, scratch);
  return listed.split('\0').filter((p) => p.endsWith('/')).map((p) => p.slice(0, -1));
}

/** `git add -A` of everything but the embedded repositories. */
function addAll(dir: string, skip: string[], run: GitRun, extra: Record<string, string> = {}, scratch: string[] = []) {
  const pathspec = skip.length ? ['--', '.', ...skip.map((p) => `:(exclude,literal)${p}`)] : [];
  git(dir, ['add', '-A', ...pathspec], extra, run, scratch);
}

/**
 * Commits everything in a worktree but embedded repositories (returned in `skipped`); `committed` is false when there
 * was nothing to commit. `repo` is the main checkout (its config names the committer); `run` is where git runs (the
 * git sandbox after an agent).
 */
export function commitAll(
  dir: string, message: string, repo: string = dir, run: GitRun = hostGit,
): { committed: boolean; skipped: string[] } {
  const identity = identityArgs(repo);
  const skipped = embeddedRepositories(dir, run);
  addAll(dir, skipped, run);
  if (git(dir, ['status', '--porcelain', '--ignore-submodules=all'], {}, run).trim() === '') {
    return { committed: false, skipped };
  }
  git(dir, [...identity, 'commit', '-q', '--no-verify', '-m', message], {}, run);
  return { committed: true, skipped };
}

export interface DiffFile {
  path: string;
  insertions: number;
  deletions: number;
}

export interface DiffResult {
  files: DiffFile[];
  insertions: number;
  deletions: number;
  patch: string;
  patch_sha256: string;
}

function parseNumstat(text: string): DiffFile[] {
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => {
      const [ins = '0', del = '0', ...rest] = l.split('\t');
      const count = (n: string) => (n === '-' ? 0 : Number(n));
      return { path: rest.join('\t'), insertions: count(ins), deletions: count(del) };
    });
}

/** A patch larger than this is not kept whole: the receipt and the diff folder list the files and hash the patch. */
export const PATCH_CAP = 32 * 1024 * 1024;

/** Reads the patch git wrote to `file`: whole up to PATCH_CAP, else a note; the hash always covers all of it. */
function readPatch(file: string): { patch: string; patch_sha256: string } {
  const bytes = readFileSync(file);
  const patch_sha256 = createHash('sha256').update(bytes).digest('hex');
  if (bytes.length <= PATCH_CAP) return { patch: bytes.toString('utf8'), patch_sha256 };
  return {
    patch: `# svc: the patch is ${bytes.length} bytes, more than the ${PATCH_CAP}-byte cap; it is not kept here.\n` +
      `# Its files are in diffstat.json; its sha256 is ${patch_sha256}.\n`,
    patch_sha256,
  };
}

function toResult(numstat: string, patchFile: string): DiffResult {
  const files = parseNumstat(numstat);
  return {
    files,
    insertions: files.reduce((n, f) => n + f.insertions, 0),
    deletions: files.reduce((n, f) => n + f.deletions, 0),
    ...readPatch(patchFile),
  };
}

// --no-ext-diff / --no-textconv: diff drivers are programs named by repository config, like hooks.
const DIFF = ['diff', '--no-ext-diff', '--no-textconv', '--ignore-submodules=all'];

/** A throwaway folder for one diff's patch file (and index), removed afterwards. */
function withScratch<T>(body: (tmp: string) => T): T {
  const tmp = mkdtempSync(join(tmpdir(), 'svc-diff-'));
  try {
    return body(tmp);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * `submodules`: also list gitlink (submodule) moves, as `Subproject commit` lines. Between two commits git reads only
 * the gitlinks' ids, never a submodule's repository; every signer of a pushed branch (the run's own finish, the pod
 * signer) asks for them, since the branch carries them.
 */
export function diffCommits(
  dir: string, base: string, head: string, run: GitRun = hostGit, opts: { submodules?: boolean } = {},
): DiffResult {
  const diff = opts.submodules
    ? [...DIFF.filter((a) => !a.startsWith('--ignore-submodules')), '--ignore-submodules=none', '--submodule=short']
    : DIFF;
  return withScratch((tmp) => {
    const patch = join(tmp, 'patch');
    const inTmp = (args: string[]) => git(dir, args, {}, run, [tmp]);
    inTmp([...diff, '--binary', `--output=${patch}`, base, head]);
    return toResult(inTmp([...diff, '--numstat', base, head]), patch);
  });
}

/**
 * What `git status` says differs from HEAD in the working tree (tracked changes and untracked files, ignored ones left
 * out), and the embedded repositories among the untracked (listed as `path/`, as git never looks inside them).
 */
export function workingChanges(dir: string, run: GitRun = hostGit): { changed: string[]; embedded: string[] } {
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

/**
 * The tree of everything in the working tree now (tracked and untracked, ignored files and the `embedded`
 * repositories left out), written through a throwaway index so the user's index is untouched: a run without a
 * worktree diffs against it, so what was there before the run is not counted as the run's work.
 */
export function snapshotTree(dir: string, embedded: string[], run: GitRun = hostGit): string {
  return withScratch((tmp) => {
    const env = { GIT_INDEX_FILE: join(tmp, 'index') };
    const inTmp = (args: string[]) => git(dir, args, env, run, [tmp]);
    inTmp(['read-tree', 'HEAD']);
    addAll(dir, embedded, run, env, [tmp]);
    return inTmp(['write-tree']).trim();
  });
}

/**
 * Diff of the working tree (tracked and untracked, embedded repositories left out) against base (a commit or a tree),
 * through a throwaway index so the user's index is untouched.
 */
export function diffWorkingTree(dir: string, base: string, run: GitRun = hostGit): DiffResult {
  return withScratch((tmp) => {
    const env = { GIT_INDEX_FILE: join(tmp, 'index') };
    const patch = join(tmp, 'patch');
    const inTmp = (args: string[]) => git(dir, args, env, run, [tmp]);
    inTmp(['read-tree', base]);
    addAll(dir, embeddedRepositories(dir, run, env, [tmp]), run, env, [tmp]);
    inTmp([...DIFF, '--cached', '--binary', `--output=${patch}`, base]);
    return toResult(inTmp([...DIFF, '--cached', '--numstat', base]), patch);
  });
}
