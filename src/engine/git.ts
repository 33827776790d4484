// Thin git wrappers: argv arrays through the spawn policy (never a shell), errors carry git's own message.
// Every git runs without svc's credentials in its environment and with hooks and fsmonitor off: both are programs
// named by the repository's own config, which a provider working in it could have planted.
import { readFileSync, appendFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join, basename, resolve } from 'node:path';
import { tmpdir } from 'node:os';
import { createHash } from 'node:crypto';
import { runSync } from '../spawn/start.ts';

/** No hook and no fsmonitor program runs for any git svc starts (core.hooksPath=/dev/null holds no hooks). */
export const SAFE_GIT_CONFIG = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false'] as const;

/** `extra` is added to the stripped environment for this one call only (e.g. the push credential, an index file). */
export function git(cwd: string, args: string[], extra: Record<string, string> = {}): string {
  try {
    const argv = ['git', ...SAFE_GIT_CONFIG, ...args];
    return runSync(argv, { kind: 'tool', base: process.env, extra, cwd, maxBuffer: 64 * 1024 * 1024 });
  } catch (err) {
    const stderr = String((err as { stderr?: unknown }).stderr ?? '').trim();
    const command = args.find((a, i) => !a.startsWith('-') && args[i - 1] !== '-c') ?? args[0];
    throw new Error(`git ${command} failed${stderr ? `: ${stderr.split('\n')[0]}` : ''}`);
  }
}

export function repoRoot(dir: string): string {
  return git(dir, ['rev-parse', '--show-toplevel']).trim();
}

export function headSha(dir: string): string {
  return git(dir, ['rev-parse', 'HEAD']).trim();
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

/** Keeps the engine's own folders out of `git status` and `git add -A` without touching tracked files. */
export function excludeEngineFolders(repo: string): void {
  const common = resolve(repo, git(repo, ['rev-parse', '--git-common-dir']).trim());
  const info = join(common, 'info');
  mkdirSync(info, { recursive: true });
  const path = join(info, 'exclude');
  const text = existsSync(path) ? readFileSync(path, 'utf8') : '';
  const wanted = ['/.svc/runs/', '/.svc/worktrees/', '/.svc/inbox/'].filter((l) => !text.split('\n').includes(l));
  if (wanted.length) appendFileSync(path, `${text && !text.endsWith('\n') ? '\n' : ''}${wanted.join('\n')}\n`);
}

export function createWorktree(repo: string, path: string, branch: string, base: string): void {
  git(repo, ['worktree', 'add', '-b', branch, path, base]);
}

function identityArgs(dir: string): string[] {
  try {
    if (git(dir, ['config', 'user.email']).trim()) return [];
  } catch {
    // Not configured: fall through to a neutral identity.
  }
  return ['-c', 'user.name=svc', '-c', 'user.email=svc@localhost'];
}

/** Commits everything in a worktree; returns false when there was nothing to commit. */
export function commitAll(dir: string, message: string): boolean {
  git(dir, ['add', '-A']);
  if (git(dir, ['status', '--porcelain']).trim() === '') return false;
  git(dir, [...identityArgs(dir), 'commit', '-q', '--no-verify', '-m', message]);
  return true;
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
      return { path: rest.join('\t'), insertions: ins === '-' ? 0 : Number(ins), deletions: del === '-' ? 0 : Number(del) };
    });
}

function toResult(numstat: string, patch: string): DiffResult {
  const files = parseNumstat(numstat);
  return {
    files,
    insertions: files.reduce((n, f) => n + f.insertions, 0),
    deletions: files.reduce((n, f) => n + f.deletions, 0),
    patch,
    patch_sha256: createHash('sha256').update(patch).digest('hex'),
  };
}

// --no-ext-diff / --no-textconv: diff drivers are programs named by repository config, like hooks.
const DIFF = ['diff', '--no-ext-diff', '--no-textconv'];

export function diffCommits(dir: string, base: string, head: string): DiffResult {
  return toResult(git(dir, [...DIFF, '--numstat', base, head]), git(dir, [...DIFF, '--binary', base, head]));
}

/** Diff of the working tree (tracked and untracked) against base, through a throwaway index so the user's index is untouched. */
export function diffWorkingTree(dir: string, base: string): DiffResult {
  const tmp = mkdtempSync(join(tmpdir(), 'svc-index-'));
  const env = { GIT_INDEX_FILE: join(tmp, 'index') };
  try {
    git(dir, ['read-tree', base], env);
    git(dir, ['add', '-A'], env);
    return toResult(git(dir, [...DIFF, '--cached', '--numstat', base], env), git(dir, [...DIFF, '--cached', '--binary', base], env));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
