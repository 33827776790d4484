// The one way svc asks GitHub's REST API: its base setting, its headers, and a call that never follows a redirect.
// Must not: send the token anywhere but GITHUB_API_URL's origin (DESIGN §7a).
import { settingOr } from '../settings-registry.ts';

/** The headers of every GitHub REST call svc makes: a run's PR, the Control Plane's merge, the trigger's calls. */
export function githubHeaders(token: string): Record<string, string> {
  return {
    authorization: `Bearer ${token}`, accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28',
    'user-agent': 'svc',
  };
}

/** `path` starts with `/`; a `body` is sent as JSON. Any status resolves; a network error or 30 s rejects. */
export function githubFetch(
  env: NodeJS.ProcessEnv, token: string, method: string, path: string, body?: unknown,
): Promise<Response> {
  const json = body === undefined ? {} : { 'content-type': 'application/json' };
  return fetch(`${settingOr(env, 'GITHUB_API_URL').replace(/\/+$/, '')}${path}`, {
    method, headers: { ...githubHeaders(token), ...json }, body: body === undefined ? null : JSON.stringify(body),
    // Never followed with the token or the body: a 3xx is an answer that is not ok.
    signal: AbortSignal.timeout(30_000), redirect: 'manual',
  });
}
