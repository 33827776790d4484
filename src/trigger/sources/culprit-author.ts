// The author of the last commit to the culprit file, only when the file resolves inside the project (no path escape).
import { runCollect } from '../../spawn/start.ts';
import { gitArgv, gitExtraEnv } from '../../engine/git.ts';
import { realpath, stat } from 'node:fs/promises';
import { isAbsolute, relative, resolve, sep } from 'node:path';

/**
 * Maps a stack-frame filename to a file inside repoDir, or null; symlinks are resolved before the containment check.
 */
export async function resolveInsideRepo(repoDir: string, candidate: string): Promise<string | null> {
  if (
    !candidate || candidate.length > 1024 || candidate.includes('\0') ||
    /^[a-z][a-z0-9+.-]*:/i.test(candidate) || candidate.startsWith('<')
  ) {
    return null;
  }
  let root: string;
  try {
    root = await realpath(repoDir);
  } catch {
    return null;
  }
  const tries = isAbsolute(candidate) ? [candidate, resolve(root, `.${candidate}`)] : [resolve(root, candidate)];
  for (const path of tries) {
    try {
      const real = await realpath(path);
      if (!real.startsWith(root + sep)) continue;
      const rel = relative(root, real);
      if (rel.split(sep)[0] === '.git' || !(await stat(real)).isFile()) continue;
      return rel;
    } catch {
      // not there: try the next reading
    }
  }
  return null;
}

/** `git log -1 --format=%an -- <file>` with argv (no shell) and a deadline; null when git has no answer. */
export function lastCommitAuthor(repoDir: string, relPath: string, timeoutMs = 3000): Promise<string | null> {
  const base = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/' };
  return runCollect(gitArgv(['--literal-pathspecs', 'log', '-1', '--format=%an', '--', relPath]), {
    kind: 'probe', base, extra: gitExtraEnv(), cwd: repoDir, timeout: timeoutMs, maxBuffer: 64 * 1024,
  }).then((r) => (r.error ? null : r.stdout.trim() || null));
}

/** First candidate that resolves inside the repo, with its last author. */
export async function culpritAuthor(
  repoDir: string, candidates: readonly string[],
): Promise<{ file: string; author: string } | null> {
  for (const candidate of candidates.slice(0, 20)) {
    const file = await resolveInsideRepo(repoDir, candidate);
    if (!file) continue;
    const author = await lastCommitAuthor(repoDir, file);
    return author ? { file, author } : null;
  }
  return null;
}
