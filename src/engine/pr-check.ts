// Before a --pr run's agent starts: could its pull request be opened at all? GitHub credentials exist (a token, or gh
// logged in) and the pinned origin answers `git ls-remote` as configured, with the credential the push would use (the
// same askpass, the same one-URL rule, no redirect). A run that would do its work and then fail for want of either is
// refused before anything is written or spent, with the fix.
// Must not: send the token anywhere the push would not (src/engine/git-token.ts), or change the repository.
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { runCollect } from '../spawn/start.ts';
import { RefusedError } from '../errors.ts';
import { gitArgv, gitBaseEnv, gitExtraEnv } from './host-git.ts';
import { askpassEnv, tokenGoesTo, withAskpass, TOKEN_GIT_CONFIG } from './git-token.ts';
import { redirectedUrl, redirectRefusal } from './git-redirect.ts';
import { githubCredential, NO_CREDENTIALS_FIX } from './pr.ts';
import type { PushTarget } from './git-push.ts';

/** The origin cannot be reached as configured, or no credential exists: nothing was started. */
export class PrNotPossibleError extends RefusedError {}

const LS_REMOTE_TIMEOUT_MS = 60_000;

/** A URL fit for a message: any user name or password in it is dropped. */
function shown(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^@/]*@/i, '$1');
}

/** `git ls-remote URL HEAD` with the credential the push would use; git's first stderr line when it fails. */
async function lsRemote(url: string, token: string | null, env: NodeJS.ProcessEnv): Promise<string | null> {
  const cwd = mkdtempSync(join(tmpdir(), 'svc-ls-remote-'));
  try {
    const run = async (args: string[], extra: Record<string, string>): Promise<string | null> => {
      const done = await runCollect(gitArgv(args), {
        kind: 'tool', base: gitBaseEnv(env), extra: gitExtraEnv(extra), cwd, timeout: LS_REMOTE_TIMEOUT_MS,
      });
      if (done.status === 0) return null;
      if (redirectedUrl(done.stderr) !== null) throw await redirectRefusal(url, 'git-upload-pack', env);
      return done.stderr.split('\n').map((l) => l.trim()).find(Boolean)
        ?? (done.status === null ? `no answer within ${LS_REMOTE_TIMEOUT_MS / 1000} s` : `exit ${done.status}`);
    };
    const args = ['ls-remote', '--quiet', '--', url, 'HEAD'];
    if (!token || !tokenGoesTo(url, env)) return await run(args, {});
    return await withAskpass((askpass) => run([...TOKEN_GIT_CONFIG, ...args], askpassEnv(askpass, token, url)));
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
}

/**
 * Refuses (PrNotPossibleError, or CredentialRedirectError when the origin redirects) unless a pull request could be
 * opened for `target` with what `env` holds.
 */
export async function checkPrPossible(target: PushTarget, env: NodeJS.ProcessEnv): Promise<void> {
  const credential = githubCredential(env);
  if (credential === null) throw new PrNotPossibleError(`No GitHub credentials: ${NO_CREDENTIALS_FIX}`);
  const problem = await lsRemote(target.url, credential.token, env);
  if (problem !== null) {
    throw new PrNotPossibleError(`The origin "${shown(target.url)}" cannot be reached as configured (${problem}): ` +
      'fix the credential (GITHUB_TOKEN, GH_TOKEN or gh auth login) or `git remote set-url origin URL`');
  }
}
