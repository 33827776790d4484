// git for managed checkouts: asynchronous (a fetch must not hold the server's event loop), every
// call through the spawn policy with svc's host git (src/engine/host-git.ts: no global or system config, no hooks,
// fsmonitor, submodules or redirects). Talking to the origin, the GitHub token goes only to the URL the push would
// send it to (src/engine/git-token.ts: scheme, host, port and path), through GIT_ASKPASS. A redirect fails the
// fetch with a message naming both places (src/engine/git-redirect.ts). Local work on svc's own mirror and checkouts
// reads no config but the repository's own, which svc wrote.
// Must not: put the token in argv, a URL, a file or an error message.
import { runCollect } from '../spawn/start.ts';
import { FailedError } from '../errors.ts';
import { gitArgv, gitBaseEnv, gitExtraEnv } from '../engine/host-git.ts';
import { askpassEnv, tokenGoesTo, withAskpass, TOKEN_GIT_CONFIG } from '../engine/git-token.ts';
import { redirectedUrl, redirectRefusal } from '../engine/git-redirect.ts';

/** git's own reason a managed-checkout step failed (its first stderr line); never holds the token. */
export class ManagedGitError extends FailedError {}

export interface ManagedGitOptions {
  /** The server's environment: GITHUB_TOKEN or GH_TOKEN, GITHUB_API_URL (the token's host), PATH, HOME, CA settings. */
  env: NodeJS.ProcessEnv;
  /** A git that talks to the origin and runs longer than this is killed (a hung server, a huge first clone). */
  networkTimeoutMs: number;
}

const OUTPUT_CAP = 4 * 1024 * 1024;

/** Drops a user name or password from a URL, for messages. */
export function shownUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^@/]*@/i, '$1');
}

export interface ManagedGit {
  /** A local git on svc's own repositories: only their own config applies. Returns stdout. */
  local(cwd: string, args: string[], what: string): Promise<string>;
  /** A git that talks to `url` (ls-remote, fetch), with the token when `url` is on the token's host. */
  remote(cwd: string, url: string, args: string[], what: string): Promise<string>;
}

export function createManagedGit(opts: ManagedGitOptions): ManagedGit {
  const base = gitBaseEnv(opts.env);
  async function run(
    cwd: string, argv: string[], extra: Record<string, string>, what: string, timeout?: number, url?: string,
  ) {
    const done = await runCollect(gitArgv(argv), {
      kind: 'tool', base, extra: gitExtraEnv(extra), cwd, maxBuffer: OUTPUT_CAP, ...(timeout ? { timeout } : {}),
    });
    if (done.status === 0) return done.stdout;
    if (url !== undefined && redirectedUrl(done.stderr) !== null) {
      throw new ManagedGitError(`${what}: ${(await redirectRefusal(url, 'git-upload-pack', opts.env)).message}`);
    }
    const reason = done.stderr.split('\n').map((l) => l.trim()).find(Boolean)
      ?? (done.status === null ? `no answer within ${Math.round((timeout ?? 0) / 1000)} s` : `exit ${done.status}`);
    throw new ManagedGitError(`${what}: ${reason.slice(0, 300)}`);
  }

  const token = opts.env.GITHUB_TOKEN || opts.env.GH_TOKEN || null;
  return {
    local: (cwd, args, what) => run(cwd, args, {}, what),
    async remote(cwd, url, args, what) {
      const timeout = opts.networkTimeoutMs;
      if (!token || !tokenGoesTo(url, opts.env)) {
        // The user's own ssh setup as for any git of theirs; never svc's token.
        return run(cwd, args, {}, what, timeout, url);
      }
      // The askpass answers with the token for `url` alone; the token lives in this child's env only.
      return withAskpass((askpass) => run(cwd, [...TOKEN_GIT_CONFIG, ...args],
        askpassEnv(askpass, token, url), what, timeout, url));
    },
  };
}
