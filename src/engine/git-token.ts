// Where svc's GitHub token may go over git, and how: one rule for the push (pr.ts) and the trigger server's fetch of a
// managed repository (src/trigger/managed-checkout.ts). The token goes only to an https URL on the token's own GitHub
// host, with no user name or password in it, and only through GIT_ASKPASS: never in argv, a URL, a file or a log.
// Must not: write the token anywhere but the environment of the one git child that asks for it.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

// Answers git's username/password prompts; the token is in this process's environment only (never a file or argv).
const ASKPASS = `#!/bin/sh
case "$1" in
  Username*|username*) printf '%s\\n' x-access-token ;;
  *) printf '%s\\n' "$SVC_GIT_PUSH_TOKEN" ;;
esac
`;

/** The web host a GitHub token belongs to: github.com, or the GITHUB_API_URL host (GitHub Enterprise). */
export function githubHost(env: NodeJS.ProcessEnv): string {
  const api = env.GITHUB_API_URL ? new URL(env.GITHUB_API_URL).hostname : 'api.github.com';
  return api === 'api.github.com' ? 'github.com' : api;
}

/** Whether the token may be offered to `url`: https on the token's host, no credentials of its own. */
export function tokenGoesTo(url: string, env: NodeJS.ProcessEnv): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false; // scp-like ssh or a local path: the user's own credentials, never ours
  }
  return parsed.protocol === 'https:' && parsed.hostname === githubHost(env) && !parsed.username && !parsed.password;
}

/** The environment names that make one git child answer a credential prompt with `token` and nothing else. */
export function askpassEnv(askpass: string, token: string): Record<string, string> {
  return { GIT_ASKPASS: askpass, SVC_GIT_PUSH_TOKEN: token, GIT_TERMINAL_PROMPT: '0' };
}

/** Runs `body` with an askpass script in a private temporary folder, removed afterwards. */
export async function withAskpass<T>(body: (askpass: string) => T | Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-askpass-'));
  try {
    const askpass = join(dir, 'askpass');
    writeFileSync(askpass, ASKPASS, { mode: 0o700 });
    return await body(askpass);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The synchronous form of withAskpass, for the push. */
export function withAskpassSync<T>(body: (askpass: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'svc-askpass-'));
  try {
    const askpass = join(dir, 'askpass');
    writeFileSync(askpass, ASKPASS, { mode: 0o700 });
    return body(askpass);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
