// Pushes a run's branch without trusting the repository's git config: the agent could write .git/config, and git
// reads URL rewrites, push URLs, credential helpers, proxies, TLS settings and includes from it. So the push runs
// from a throwaway bare repository svc creates (its config is git's defaults), borrowing the run's objects through
// `objects/info/alternates`, to the `remote.origin.url` svc read from the config file itself.
// That URL is read once, when the run is made, before any agent runs, and kept in the run's plan (`push_target`);
// the push goes there and nowhere else, and is refused when the config names another origin by then.
// Must not: let any program named by the repository's config run, or hand the token to a URL it did not check.
import { RefusedError } from '../errors.ts';
import { writeFileSync, mkdtempSync, rmSync, mkdirSync, existsSync, copyFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { tmpdir } from 'node:os';
import { git } from './git.ts';
import { askpassEnv, TOKEN_GIT_CONFIG } from './git-token.ts';

/** Keys that change where `origin` points or where a push goes; their presence makes svc refuse to push. */
const REDIRECTING_KEYS = /^(url\..*\.(insteadof|pushinsteadof)|remote\.origin\.pushurl)$/;

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
  try {
    return git('/', ['config', '--file', file, '--no-includes', '--get-regexp', pattern]).split('\n').filter(Boolean);
  } catch {
    return []; // git config exits 1 when nothing matches
  }
}

/**
 * Reads origin from the repository's own config file (never global or system config, never an include) and refuses
 * when that file holds rules that would send a push somewhere else than its `url`.
 */
export function resolveOrigin(workdir: string): Origin {
  const commonDir = resolve(workdir, git(workdir, ['rev-parse', '--git-common-dir']).trim());
  const file = join(commonDir, 'config');
  const redirecting = configEntries(file, '^(url\\..*\\.(insteadof|pushinsteadof)|remote\\.origin\\.pushurl)$')
    .map((line) => line.split(' ', 1)[0]!.toLowerCase())
    .filter((name) => REDIRECTING_KEYS.test(name));
  if (redirecting.length) {
    const names = [...new Set(redirecting)].map((n) => `"${n}"`).join(', ');
    throw new PushRefusedError(`The repository's git config redirects pushes (${names}): svc does not push there`);
  }
  const urls = configEntries(file, '^remote\\.origin\\.url$').map((line) => line.slice(line.indexOf(' ') + 1));
  if (urls.length !== 1 || !urls[0]) {
    const found = `found ${urls.length}`;
    const fix = urls.length === 0
      ? ': add the GitHub repository, `git remote add origin https://github.com/OWNER/NAME.git`'
      : ': keep one, `git config --unset-all remote.origin.url`, then `git remote set-url origin URL`';
    throw new PushRefusedError(`The repository's git config must name exactly one remote.origin.url (${found})${fix}`);
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

/** "owner/name" of a push URL (https, ssh or scp-like form), or null. */
export function repoSlug(url: string): string | null {
  const m = /[:/]([^/:]+)\/([^/]+?)(?:\.git)?\/?$/.exec(url);
  return m ? `${m[1]}/${m[2]}` : null;
}

/** A URL fit for an error message: any user name or password in it is dropped. */
function shown(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^@/]*@/i, '$1');
}

/** Reads the push target from the repository's config (refusing redirecting rules), for a run about to be made. */
export function pinPushTarget(repo: string): PushTarget {
  const { url } = resolveOrigin(repo);
  return { url, repo: repoSlug(url) };
}

/**
 * The origin to push to: the pinned target, provided the config still names it and still holds no redirecting rule.
 * Anything else means the config changed during the run (an unsandboxed agent can write it): nothing is pushed.
 */
export function pinnedOrigin(workdir: string, target: PushTarget): Origin {
  const pinned = `svc pinned "${shown(target.url)}" when the run was made`;
  let now: Origin;
  try {
    now = resolveOrigin(workdir);
  } catch (err) {
    if (!(err instanceof PushRefusedError)) throw err;
    throw new PushRefusedError(`${err.message} (the config changed during the run; ${pinned})`);
  }
  if (now.url !== target.url) {
    throw new PushRefusedError(
      `The repository's origin changed during the run (now "${shown(now.url)}"; ${pinned}): svc does not push`,
    );
  }
  return { url: target.url, commonDir: now.commonDir };
}

/** What the clean push may use: the token, through the askpass svc wrote (src/engine/git-token.ts). */
export interface PushAuth {
  askpass: string | null;
  token: string | null;
}

/**
 * Pushes `branch` (as it is in `workdir`) to `origin.url` from a bare repository svc made. Like every git of svc's,
 * it reads no global or system config (src/engine/host-git.ts): without the token, the user's own ssh setup applies
 * (GIT_SSH_COMMAND, ~/.ssh), never a credential helper or URL rule from a git config file.
 */
export function cleanPush(workdir: string, origin: Origin, branch: string, auth: PushAuth): void {
  const sha = git(workdir, ['rev-parse', '--verify', `refs/heads/${branch}^{commit}`]).trim();
  const dir = mkdtempSync(join(tmpdir(), 'svc-push-'));
  try {
    const bare = join(dir, 'push.git');
    const isolated: Record<string, string> = { GIT_DIR: bare, GIT_TEMPLATE_DIR: join(dir, 'no-templates') };
    mkdirSync(isolated.GIT_TEMPLATE_DIR!);
    git(dir, ['init', '--quiet', '--bare', bare], isolated);
    mkdirSync(join(bare, 'objects', 'info'), { recursive: true });
    writeFileSync(join(bare, 'objects', 'info', 'alternates'), `${join(origin.commonDir, 'objects')}\n`);
    const shallow = join(origin.commonDir, 'shallow');
    if (existsSync(shallow)) copyFileSync(shallow, join(bare, 'shallow'));
    git(dir, ['update-ref', `refs/heads/${branch}`, sha], isolated);
    const refspec = `refs/heads/${branch}:refs/heads/${branch}`;
    if (!auth.token || !auth.askpass) {
      git(dir, ['push', '--quiet', origin.url, refspec], isolated);
      return;
    }
    // The askpass answers with the token for origin.url alone; the token lives in this child's env only.
    git(dir, [...TOKEN_GIT_CONFIG, 'push', '--quiet', origin.url, refspec],
      { ...isolated, ...askpassEnv(auth.askpass, auth.token, origin.url) });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
