// Merges the pull request a run's receipt covers, and no other: the PR named by the run's pr_url must be in the
// receipt's repo on the receipt's branch, and GitHub is told the receipt's head commit so later pushes are refused.
import type { Receipt } from '../engine/receipt.ts';
import { githubHeaders } from '../engine/pr.ts';

interface PullJson {
  state?: unknown;
  base?: { repo?: { full_name?: unknown } | null };
  head?: { ref?: unknown; sha?: unknown; repo?: { full_name?: unknown } | null };
}

const NAME = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,100}$/;

/** owner/repo/number from a PR page URL; names are checked so a stored URL cannot steer the API path elsewhere. */
function pullOf(prUrl: string): { owner: string; repo: string; number: string } | null {
  const m = /\/([^/]+)\/([^/]+)\/pull\/(\d+)\/?$/.exec(prUrl);
  if (!m || !NAME.test(m[1]!) || !NAME.test(m[2]!)) return null;
  return { owner: m[1]!, repo: m[2]!, number: m[3]! };
}

function same(a: unknown, b: string): boolean {
  return typeof a === 'string' && a.toLowerCase() === b.toLowerCase();
}

/** Why the PR is not the one the receipt covers, or null when it is. */
function pullMismatch(pull: PullJson, receipt: Receipt): string | null {
  if (!same(pull.base?.repo?.full_name, receipt.repo)) {
    const base = String(pull.base?.repo?.full_name ?? 'an unknown repository');
    return `The pull request is in ${base}, not ${receipt.repo} as the receipt says`;
  }
  if (pull.head?.ref !== receipt.branch || !same(pull.head?.repo?.full_name, receipt.repo)) {
    const head = `${String(pull.head?.repo?.full_name ?? '?')}:${String(pull.head?.ref ?? '?')}`;
    return `The pull request merges ${head}, not ${receipt.repo}:${receipt.branch} as the receipt says`;
  }
  if (typeof pull.head?.sha === 'string' && pull.head.sha !== receipt.head_sha) {
    return `The pull request head is ${pull.head.sha.slice(0, 12)}, ` +
      `not the receipt's ${receipt.head_sha!.slice(0, 12)}: it has commits the receipt does not cover`;
  }
  return null;
}

/** Returns null once merged, else why not. */
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
    const mismatch = pullMismatch((await got.json()) as PullJson, receipt);
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
    return `GitHub could not be reached: ${(err as Error).message}`;
  }
}
