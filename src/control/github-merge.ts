// Merges the pull request a run's receipt covers, and no other: the PR named by the run's pr_url must be in the
// receipt's repo on the receipt's branch, and GitHub is told the receipt's head commit so later pushes are refused.
import type { Receipt } from '../engine/receipt.ts';
import { githubHeaders } from '../engine/pr.ts';
import { obj, str } from '../untrusted.ts';
import { errorMessage } from '../errors.ts';

const NAME = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,100}$/;

/** owner/repo/number from a PR page URL; names are checked so a stored URL cannot steer the API path elsewhere. */
function pullOf(prUrl: string): { owner: string; repo: string; number: string } | null {
  const m = /\/([^/]+)\/([^/]+)\/pull\/(\d+)\/?$/.exec(prUrl);
  if (!m || !NAME.test(m[1]!) || !NAME.test(m[2]!)) return null;
  return { owner: m[1]!, repo: m[2]!, number: m[3]! };
}

/** Why the PR (GitHub's answer, read as untrusted) is not the one the receipt covers, or null when it is. */
function pullMismatch(pull: unknown, receipt: Receipt): string | null {
  const base = str(obj(obj(obj(pull).base).repo).full_name);
  const head = obj(obj(pull).head);
  const headRepo = str(obj(head.repo).full_name);
  const inRepo = (name: string | null) => name?.toLowerCase() === receipt.repo.toLowerCase();
  if (!inRepo(base)) {
    return `The pull request is in ${base ?? 'an unknown repository'}, not ${receipt.repo} as the receipt says`;
  }
  if (head.ref !== receipt.branch || !inRepo(headRepo)) {
    const merges = `${headRepo ?? '?'}:${str(head.ref) ?? '?'}`;
    return `The pull request merges ${merges}, not ${receipt.repo}:${receipt.branch} as the receipt says`;
  }
  if (typeof head.sha === 'string' && head.sha !== receipt.head_sha) {
    return `The pull request head is ${head.sha.slice(0, 12)}, ` +
      `not the receipt's ${receipt.head_sha!.slice(0, 12)}: it has commits the receipt does not cover`;
  }
  return null;
}

/** Null once merged, else why not. */
export async function mergeReceiptPull(
  env: NodeJS.ProcessEnv, prUrl: string, receipt: Receipt,
): Promise<string | null> {
  const pull = pullOf(prUrl);
  if (!pull) return `Cannot read the pull request from ${prUrl}`;
  if (!receipt.branch || receipt.branch !== `svc/${receipt.run}`) {
    return `The receipt names branch ${String(receipt.branch)}, not svc/${receipt.run}`;
  }
  if (!receipt.head_sha || !/^[0-9a-f]{40}$/.test(receipt.head_sha)) return 'The receipt names no head commit';
  const token = env.GITHUB_TOKEN || env.GH_TOKEN;
  if (!token) return 'No GitHub token (GITHUB_TOKEN or GH_TOKEN) is set for the Control Plane';
  const apiBase = (env.GITHUB_API_URL || 'https://api.github.com').replace(/\/+$/, '');
  const api = `${apiBase}/repos/${pull.owner}/${pull.repo}/pulls/${pull.number}`;
  try {
    const got = await fetch(api, { headers: githubHeaders(token), signal: AbortSignal.timeout(30_000) });
    if (!got.ok) {
      return `GitHub answered ${got.status} when reading the pull request: ${(await got.text()).slice(0, 200)}`;
    }
    const mismatch = pullMismatch(await got.json(), receipt);
    if (mismatch) return mismatch;
    // sha: GitHub refuses the merge (409) if the head moved after we looked (DESIGN §4: merge what the receipt covers).
    const res = await fetch(`${api}/merge`, {
      method: 'PUT',
      headers: { ...githubHeaders(token), 'content-type': 'application/json' },
      body: JSON.stringify({ sha: receipt.head_sha }),
      signal: AbortSignal.timeout(30_000),
    });
    if (res.ok) return null;
    return `GitHub answered ${res.status}: ${(await res.text()).slice(0, 200)}`;
  } catch (err) {
    return `GitHub could not be reached: ${errorMessage(err)}`;
  }
}
