// Pushes and fetches a run's branch from a throwaway bare repository, ignoring the repository's git config
// (docs/engine.md). Must not: run a program the repository's config names, or send the token unchecked.
import { RefusedError } from '../errors.ts';
import { writeFileSync, mkdirSync, existsSync, copyFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { git, gitDirs, repoSlug, tryGit } from './git.ts';
import { withGitToken } from './git-token.ts';
import { gitInGroup, type GroupWatch } from './git-group.ts';
import { urlWithoutSecrets } from './text.ts';
import { withScratch } from '../spawn/svc-paths.ts';

/** Thrown when the repository's config could redirect the push; nothing was pushed. */
export class PushRefusedError extends RefusedError {}

export interface Origin {
  /** `remote.origin.url` exactly as the config file holds it: no insteadOf, no include applied. */
  url: string;
  /** The repository's shared git folder (objects live here for every worktree). */
  commonDir: string;
}

/** Every `name value` line of a config file matching `pattern`, read by git itself with includes off. */
function configEntries(file: string, pattern: string): string[] {
  return tryGit('/', ['config', '--file', file, '--no-includes', '--get-regexp', pattern]).split('\n').filter(Boolean);
}

/** Origin as the repository's own config file says it (no include), refused when its rules send pushes elsewhere. */
export function resolveOrigin(workdir: string): Origin {
  const commonDir = gitDirs(workdir).common;
  const file = join(commonDir, 'config');
  const redirecting = configEntries(file, '^(url\\..*\\.(insteadof|pushinsteadof)|remote\\.origin\\.pushurl)$')
    .map((line) => line.split(' ', 1)[0]!.toLowerCase())
    .filter((name) => /^(url\..*\.(insteadof|pushinsteadof)|remote\.origin\.pushurl)$/.test(name));
  if (redirecting.length) {
    const names = [...new Set(redirecting)].map((n) => `"${n}"`).join(', ');
    throw new PushRefusedError(`The repository's git config redirects pushes (${names}): svc does not push there`);
  }
  const urls = configEntries(file, '^remote\\.origin\\.url$').map((line) => line.slice(line.indexOf(' ') + 1));
  if (urls.length !== 1 || !urls[0]) {
    const fix = urls.length === 0
      ? 'add the GitHub repository, `git remote add origin https://github.com/OWNER/NAME.git`'
      : 'keep one, `git config --unset-all remote.origin.url`, then `git remote set-url origin URL`';
    throw new PushRefusedError(
      `The repository's git config must name exactly one remote.origin.url (found ${urls.length}): ${fix}`);
  }
  return { url: urls[0], commonDir };
}

/** Where a run's branch goes and which repository its pull request is opened on, fixed before the agent runs. */
export interface PushTarget {
  /** `remote.origin.url` as the config file held it when the run was made. */
  url: string;
  /** "owner/name" of that URL, for the pull request API; null when the URL does not have that shape. */
  repo: string | null;
}

export function pinPushTarget(repo: string): PushTarget {
  const { url } = resolveOrigin(repo);
  return { url, repo: repoSlug(url) };
}

/** The pinned target, while the config still names it with no redirecting rule (else it changed during the run). */
function pinnedOrigin(workdir: string, target: PushTarget): Origin {
  const pinned = `svc pinned "${urlWithoutSecrets(target.url)}" when the run was made`;
  let now: Origin;
  try {
    now = resolveOrigin(workdir);
  } catch (err) {
    if (!(err instanceof PushRefusedError)) throw err;
    throw new PushRefusedError(`${err.message} (the config changed during the run; ${pinned})`);
  }
  if (now.url !== target.url) {
    throw new PushRefusedError(
      `The repository's origin changed during the run (now "${urlWithoutSecrets(now.url)}"; ${pinned}): ` +
        'svc does not push',
    );
  }
  return now;
}

/** A bare repository svc makes in `dir` (no config but its own), borrowing the repository's objects. */
function borrowingBare(dir: string, origin: Origin): Record<string, string> {
  const bare = join(dir, 'push.git');
  const isolated: Record<string, string> = { GIT_DIR: bare, GIT_TEMPLATE_DIR: join(dir, 'no-templates') };
  mkdirSync(isolated.GIT_TEMPLATE_DIR!);
  git(dir, ['init', '--quiet', '--bare', bare], isolated);
  mkdirSync(join(bare, 'objects', 'info'), { recursive: true });
  writeFileSync(join(bare, 'objects', 'info', 'alternates'), `${join(origin.commonDir, 'objects')}\n`);
  const shallow = join(origin.commonDir, 'shallow');
  if (existsSync(shallow)) copyFileSync(shallow, join(bare, 'shallow'));
  return isolated;
}

/**
 * Pushes `branch` from a bare repository svc made, as `remote` on the origin; never forced (fast forwards only). The
 * push runs in a group of its own, the run's child while it runs (`watch`, a run's every push has one): a stop or an
 * end signal ends it.
 */
export async function pushBranch(
  workdir: string, target: PushTarget, branch: string, token: string | null, env: NodeJS.ProcessEnv,
  remote: string = branch, watch: GroupWatch | null = null,
): Promise<void> {
  const origin = pinnedOrigin(workdir, target);
  const sha = git(workdir, ['rev-parse', '--verify', `refs/heads/${branch}^{commit}`]).trim();
  await withGitToken(origin.url, token, env, 'git-receive-pack', (config, extra) => withScratch('push', async (dir) => {
    const isolated = borrowingBare(dir, origin);
    git(dir, ['update-ref', `refs/heads/${branch}`, sha], isolated);
    const refspec = `refs/heads/${branch}:refs/heads/${remote}`;
    await gitInGroup(dir, [...config, 'push', '--quiet', origin.url, refspec], { ...isolated, ...extra }, watch);
  }));
}

/** The commit `branch` names on the run's pinned target now: fetched into a bare repository svc made, then its pack
 * added to the repository's own objects. */
export async function fetchBranchHead(
  repo: string, target: PushTarget, branch: string, token: string | null, env: NodeJS.ProcessEnv,
): Promise<string> {
  const origin = pinnedOrigin(repo, target);
  return withGitToken(origin.url, token, env, 'git-upload-pack', (config, extra) => withScratch('fetch', (dir) => {
    const isolated = borrowingBare(dir, origin);
    // Always one pack (never loose objects), so what arrived is exactly the files of objects/pack.
    git(dir, [...config, '-c', 'fetch.unpackLimit=1', 'fetch', '--quiet', '--no-tags', '--no-write-fetch-head',
      origin.url, `+refs/heads/${branch}:refs/svc/fetched`], { ...isolated, ...extra });
    const sha = git(dir, ['rev-parse', '--verify', 'refs/svc/fetched^{commit}'], isolated).trim();
    const from = join(isolated.GIT_DIR!, 'objects', 'pack');
    const to = join(origin.commonDir, 'objects', 'pack');
    mkdirSync(to, { recursive: true });
    // The pack before its index: a reader never sees an index without its pack.
    const files = readdirSync(from).sort((a, b) => Number(a.endsWith('.idx')) - Number(b.endsWith('.idx')));
    for (const name of files) if (!existsSync(join(to, name))) copyFileSync(join(from, name), join(to, name));
    return sha;
  }));
}
