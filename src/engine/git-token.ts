// Where svc's GitHub token may go over git, and how: one rule for the push (pr.ts), the --pr check (pr-check.ts) and
// the trigger server's fetch of a managed repository (src/trigger/managed-checkout.ts). The token goes only to an
// https URL on the token's own GitHub origin (scheme, host and port), with no user name, password, query or fragment,
// and only through GIT_ASKPASS: never in argv, a URL, a file or a log. The askpass answers only git's prompt for that
// one URL (credential.useHttpPath makes git name the path too) and refuses, on stderr, any other; git follows no
// redirect (src/engine/host-git.ts), so the URL it asks about is the one svc gave it.
// Must not: write the token anywhere but the environment of the one git child that asks for it.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

// Answers git's username/password prompts for the one URL svc named, and nothing else; the token is in this process's
// environment only (never a file or argv). Quoted variables in a `case` pattern match literally.
const ASKPASS = `#!/bin/sh
case "$1" in
  "Username for '$SVC_GIT_CREDENTIAL_URL': ") printf '%s\\n' x-access-token ;;
  "Password for '$SVC_GIT_CREDENTIAL_USER_URL': ") printf '%s\\n' "$SVC_GIT_PUSH_TOKEN" ;;
  *) printf 'svc askpass: refused a credential for "%s": the token is only for "%s"\\n' "$1" \\
       "$SVC_GIT_CREDENTIAL_URL" >&2
     exit 1 ;;
esac
`;

const TOKEN_USER = 'x-access-token';

/** The web host a GitHub token belongs to: github.com, or the GITHUB_API_URL host (GitHub Enterprise). */
export function githubHost(env: NodeJS.ProcessEnv): string {
  return tokenOrigin(env).hostname;
}

/** The origin a GitHub token belongs to: https://github.com, or GITHUB_API_URL's host and port (GitHub Enterprise). */
export function tokenOrigin(env: NodeJS.ProcessEnv): { hostname: string; port: string } {
  const api = env.GITHUB_API_URL ? new URL(env.GITHUB_API_URL) : null;
  if (!api || api.hostname === 'api.github.com') return { hostname: 'github.com', port: '' };
  return { hostname: api.hostname, port: api.port };
}

/**
 * Whether the token may be offered to `url`: https on the token's own host and port, with no credentials, query or
 * fragment of its own.
 */
export function tokenGoesTo(url: string, env: NodeJS.ProcessEnv): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false; // scp-like ssh or a local path: the user's own credentials, never ours
  }
  const own = tokenOrigin(env);
  return parsed.protocol === 'https:' && parsed.hostname === own.hostname && parsed.port === own.port &&
    !parsed.username && !parsed.password && !parsed.search && !parsed.hash;
}

/**
 * The URL as git names it in a credential prompt with credential.useHttpPath (scheme, authority as written, path
 * without its outer slashes); `user` is put in front of the host as git does once it has a user name.
 */
export function credentialUrl(url: string, user: string | null = null): string {
  const m = /^([a-z][a-z0-9+.-]*):\/\/([^/?#]*)([^?#]*)/i.exec(url);
  if (!m) throw new RangeError('not a URL with an authority');
  const path = m[3]!.replace(/^\/+|\/+$/g, '');
  return `${m[1]}://${user ? `${user}@` : ''}${m[2]}${path ? `/${path}` : ''}`;
}

/**
 * The git arguments and environment names that make one git child answer a credential prompt for `url` with `token`
 * and nothing else: git names the path in its prompt, and the askpass answers only for that URL.
 */
export function askpassEnv(askpass: string, token: string, url: string): Record<string, string> {
  return {
    GIT_ASKPASS: askpass, SVC_GIT_PUSH_TOKEN: token, GIT_TERMINAL_PROMPT: '0',
    SVC_GIT_CREDENTIAL_URL: credentialUrl(url), SVC_GIT_CREDENTIAL_USER_URL: credentialUrl(url, TOKEN_USER),
  };
}

/** The `-c` settings a git that may be handed the token runs with (its prompt names the repository's path too). */
export const TOKEN_GIT_CONFIG = ['-c', 'credential.useHttpPath=true'] as const;

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
