// git for managed checkouts (issue 22 item 3): asynchronous (a fetch must not hold the server's event loop), every
// call through the spawn policy with svc's hardening (SAFE_GIT_CONFIG: no hooks, fsmonitor or submodules).
// Talking to the origin, the GitHub token goes only where the push would send it (src/engine/git-token.ts), through
// GIT_ASKPASS, with no system or global config to carry it elsewhere (a helper, a proxy, a URL rule). Local work on
// svc's own mirror and checkouts reads no config but the repository's own, which svc wrote.
// Must not: put the token in argv, a URL, a file or an error message.
import { runCollect } from '../spawn/start.ts';
import { SAFE_GIT_CONFIG } from '../engine/git.ts';
import { askpassEnv, tokenGoesTo, withAskpass } from '../engine/git-token.ts';

/** git's own reason a managed-checkout step failed (its first stderr line); never holds the token. */
export class ManagedGitError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ManagedGitError';
  }
}

export interface ManagedGitOptions {
  /** The server's environment: GITHUB_TOKEN or GH_TOKEN, GITHUB_API_URL (the token's host), PATH, HOME, CA settings. */
  env: NodeJS.ProcessEnv;
  /** A git that talks to the origin and runs longer than this is killed (a hung server, a huge first clone). */
  networkTimeoutMs: number;
}

const ISOLATED = { GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_TERMINAL_PROMPT: '0' };
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
  async function run(cwd: string, argv: string[], extra: Record<string, string>, what: string, timeout?: number) {
    const done = await runCollect(['git', ...SAFE_GIT_CONFIG, ...argv], {
      kind: 'tool', base: opts.env, extra, cwd, maxBuffer: OUTPUT_CAP, ...(timeout ? { timeout } : {}),
    });
    if (done.status === 0) return done.stdout;
    const reason = done.stderr.split('\n').map((l) => l.trim()).find(Boolean)
      ?? (done.status === null ? `no answer within ${Math.round((timeout ?? 0) / 1000)} s` : `exit ${done.status}`);
    throw new ManagedGitError(`${what}: ${reason.slice(0, 300)}`);
  }

  const token = opts.env.GITHUB_TOKEN || opts.env.GH_TOKEN || null;
  return {
    local: (cwd, args, what) => run(cwd, args, ISOLATED, what),
    async remote(cwd, url, args, what) {
      const timeout = opts.networkTimeoutMs;
      if (!token || !tokenGoesTo(url, opts.env)) {
        // The user's own credentials (ssh keys, their helper) as for any git of theirs; never svc's token.
        return run(cwd, args, { GIT_TERMINAL_PROMPT: '0' }, what, timeout);
      }
      // credential.helper= empties the helper list; the askpass answers with the token, which lives in env only.
      return withAskpass((askpass) => run(cwd, ['-c', 'credential.helper=', ...args],
        { ...ISOLATED, ...askpassEnv(askpass, token) }, what, timeout));
    },
  };
}
