// Where svc's GitHub token may go over git (docs/engine.md, "A credential goes to exactly one origin").
// Must not: write the token anywhere but the environment of the one git child that asks for it.
import { readFileSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { RefusedError } from '../errors.ts';
import { setting } from '../settings-registry.ts';
import { shownValue } from '../one-line.ts';
import { withScratch } from '../spawn/svc-paths.ts';
import { GitRedirectedError } from './git.ts';
import { redactSecrets } from './text.ts';

// Quoted variables in a `case` pattern match literally.
const ASKPASS = `#!/bin/sh
case "$1" in
  "Username for '$SVC_GIT_CREDENTIAL_URL': ") printf '%s\\n' x-access-token ;;
  "Password for '$SVC_GIT_CREDENTIAL_USER_URL': ") printf '%s\\n' "$SVC_GIT_PUSH_TOKEN" ;;
  *) printf 'svc askpass: refused a credential for "%s": the token is only for "%s"\\n' "$1" \\
       "$SVC_GIT_CREDENTIAL_URL" >&2
     exit 1 ;;
esac
`;

const WITH_AUTHORITY = /^([a-z][a-z0-9+.-]*):\/\/([^/?#]*)([^?#]*)/i;

/** The host svc pushes to and opens pull requests on: github.com, or GITHUB_API_URL's (a GitHub Enterprise). */
export function githubWebHost(env: NodeJS.ProcessEnv): { hostname: string; port: string } {
  // A malformed one is a BadSettingError naming it (exit 2), never the parser's bare "Invalid URL".
  const set = setting(env, 'GITHUB_API_URL');
  const api = set ? new URL(set) : null;
  return !api || api.hostname === 'api.github.com' ? { hostname: 'github.com', port: '' } : api;
}

/** An http(s) remote's host; null for ssh, whose host may be an alias of the user's ssh config (`github-work` for a
 * second account, GitHub's `ssh.github.com`) that svc's push goes through, and for a path. */
export function httpRemoteHost(url: string): string | null {
  const parsed = URL.parse(url);
  return parsed && /^https?:$/.test(parsed.protocol) ? parsed.hostname : null;
}

/** A remote URL's host, or an scp-like `git@host:owner/name`'s; null for a path. */
export function remoteHost(url: string): string | null {
  return URL.parse(url)?.hostname || /^[^@/]+@([^:/]+):/.exec(url)?.[1] || null;
}

/** Whether the token may go to `url`: https on https://github.com's (or GITHUB_API_URL's) host and port, bare. */
function tokenGoesTo(url: string, env: NodeJS.ProcessEnv): boolean {
  // Written as `scheme://authority` too: URL.parse also takes `https:github.com/o/r` or a leading space.
  const parsed = WITH_AUTHORITY.test(url) ? URL.parse(url) : null;
  if (!parsed) return false; // scp-like ssh or a local path: the user's own credentials, never ours
  const own = githubWebHost(env);
  return parsed.protocol === 'https:' && parsed.hostname === own.hostname && parsed.port === own.port &&
    !parsed.username && !parsed.password && !parsed.search && !parsed.hash;
}

/** An https URL tokenGoesTo allowed, as git names it in a credential prompt (useHttpPath); `user@` before its host. */
function credentialUrl(url: string, user: string | null = null): string {
  const m = WITH_AUTHORITY.exec(url)!;
  const path = m[3]!.replace(/^\/+|\/+$/g, '');
  return `${m[1]}://${user ? `${user}@` : ''}${m[2]}${path ? `/${path}` : ''}`;
}

/** Runs `body` with the git settings that answer a credential prompt for `url` with `token` and nothing else (none
 * when the token may not go there); a GitRedirectedError from `body` becomes the refusal naming where it pointed. */
export async function withGitToken<T>(
  url: string, token: string | null, env: NodeJS.ProcessEnv, service: GitService,
  body: (config: string[], extra: Record<string, string>) => T | Promise<T>,
): Promise<T> {
  try {
    if (!token || !tokenGoesTo(url, env)) return await body([], {});
    return await withScratch('askpass', async (dir) => {
      const askpass = join(dir, 'askpass');
      writeFileSync(askpass, ASKPASS, { mode: 0o700 });
      return await body(['-c', 'credential.useHttpPath=true'], {
        GIT_ASKPASS: askpass, SVC_GIT_PUSH_TOKEN: token, GIT_TERMINAL_PROMPT: '0',
        SVC_GIT_CREDENTIAL_URL: credentialUrl(url), SVC_GIT_CREDENTIAL_USER_URL: credentialUrl(url, 'x-access-token'),
      });
    });
  } catch (err) {
    if (err instanceof GitRedirectedError) throw await redirectRefusal(url, service, env);
    throw err;
  }
}

type GitService = 'git-upload-pack' | 'git-receive-pack';

/** A git that could carry a credential was redirected; nothing was sent to the other host. */
export class CredentialRedirectError extends RefusedError {}

/** Where `url`'s server redirects git's first request, asked without a credential (TLS trusting what git would). */
function redirectTarget(url: string, service: string, env: NodeJS.ProcessEnv): Promise<string | null> {
  const target = URL.parse(`${url.replace(/\/+$/, '')}/info/refs?service=${service}`);
  const secure = target?.protocol === 'https:';
  if (!target || (!secure && target.protocol !== 'http:')) return Promise.resolve(null);
  return new Promise((resolve) => {
    const answered = (res: IncomingMessage): void => {
      res.resume();
      const { location } = res.headers;
      const status = res.statusCode ?? 0;
      const to = status >= 300 && status < 400 && location ? URL.parse(location, target.href) : null;
      if (!to) return resolve(null);
      // Where git's repository is: the path before the `/info/refs?service=` it was asked for.
      to.search = '';
      to.hash = '';
      resolve(shownValue(to.href.replace(/\/info\/refs$/, '')));
    };
    try {
      const ca = secure && env.GIT_SSL_CAINFO ? readFileSync(env.GIT_SSL_CAINFO) : undefined;
      const options = { method: 'GET', headers: { 'user-agent': 'git/svc' }, timeout: 30_000, ...(ca ? { ca } : {}) };
      // Taken when asked, never imported: see test/unit/http-imports.test.ts.
      const { request } = process.getBuiltinModule(secure ? 'node:https' : 'node:http');
      const req = request(target, options, answered);
      req.on('timeout', () => req.destroy());
      req.on('error', () => resolve(null));
      req.end();
    } catch {
      resolve(null);
    }
  });
}

/** Why a git to a remote failed, for an error: its first stderr line, cut as a log's is (git drops a password from the
 * URL it names only up to its first `@`), else how it ended. */
export function gitFailure(done: { stderr: string; status: number | null }, timeoutMs: number): string {
  const said = redactSecrets(done.stderr.split('\n').map((l) => l.trim()).find(Boolean) ?? '');
  return said || (done.status === null ? `no answer within ${Math.round(timeoutMs / 1000)} s` : `exit ${done.status}`);
}

/** The refusal for a git to `url` that met a redirect: it names both places when the server says where it points. */
export async function redirectRefusal(
  url: string, service: GitService, env: NodeJS.ProcessEnv,
): Promise<CredentialRedirectError> {
  const to = await redirectTarget(url, service, env);
  const from = shownValue(url);
  const where = to ? `"${to}"` : 'another address (the server did not say where)';
  return new CredentialRedirectError(`The git server at "${from}" redirected to ${where}: svc follows no redirect, ` +
    'so a credential never reaches another host; set the remote to the address it now lives at');
}
