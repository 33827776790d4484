// The GitHub REST calls the trigger server makes itself, HTTPS only, bounded in time and size. Must not: send the
// token anywhere but the API base.
import { FailedError, UnavailableError } from '../errors.ts';
import { createHttpsPoster } from './https-post.ts';
import { githubHeaders } from '../engine/github-rest.ts';
import { tryParseJson } from '../untrusted.ts';

export type GithubApi = ReturnType<typeof createGithubApi>;

/** `gh`: the settings' API base and token; `ca`: an extra CA to trust (tests' loopback stand-in). */
export function createGithubApi(gh: { apiUrl: string; token: string } | undefined, ca?: string | Buffer) {
  // A review's hundred comments can be more than a vendor's answer to a summary.
  const post = createHttpsPoster({ ca, cap: 1024 * 1024 });
  // GitHub gives up on a delivery after 10 s: a question asked while one waits must leave time for the answer.
  const ask = createHttpsPoster({ ca, cap: 1024 * 1024, timeoutMs: 5_000 });
  const send = async (method: string, path: string, body = '', poster = post): Promise<unknown> => {
    if (!gh) throw new UnavailableError('GITHUB_TOKEN (or GH_TOKEN) is not set: svc cannot call the GitHub API');
    const res = await poster(new URL(`${gh.apiUrl}${path}`), githubHeaders(gh.token), body, method);
    if (res.status < 200 || res.status > 299) {
      throw new FailedError(`GitHub answered ${res.status} to ${method} ${path.slice(0, 200)}`);
    }
    const value = res.text === '' ? null : tryParseJson(res.text);
    if (value === undefined) throw new FailedError(`GitHub's answer to ${method} ${path.slice(0, 200)} is not JSON`);
    return value;
  };
  return {
    /** A token is set: GitHub can be asked, and what it cannot say is a no. */
    configured: gh !== undefined,
    /** `path` starts with `/`; a FailedError on any non-2xx answer. */
    get: (path: string) => send('GET', path),
    /** As `get`, within 5 s: asked while a GitHub delivery waits for its answer. */
    getWhileDelivering: (path: string) => send('GET', path, '', ask),
    /** `body` is Markdown in svc's own words. */
    async comment(repo: string, number: number, body: string): Promise<void> {
      await send('POST', `/repos/${repo}/issues/${number}/comments`, JSON.stringify({ body }));
    },
  };
}
