// Opens the receipt-carrying pull request: push svc/<run> to origin, then GitHub REST (or gh). Never merges, never
// deploys.
// The GitHub token reaches exactly one child, the push (through GIT_ASKPASS), and only when origin is that GitHub host;
// origin is what the repository's config file said when the run was made (the run's pinned push target), read by svc,
// never rewritten by the config's URL rules; the pull request is opened on that same repository.
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { pinnedOrigin, cleanPush, type PushTarget } from './git-push.ts';
import { tokenGoesTo, withAskpassSync } from './git-token.ts';
import { which } from '../spawn/which.ts';
import { runSync, type ChildSpec } from '../spawn/start.ts';
import { FailedError, RefusedError } from '../errors.ts';
import { GitRedirectedError, redirectRefusal } from './git-redirect.ts';
import { GIT_ISOLATION_ENV } from './host-git.ts';

export { githubHost } from './git-token.ts';

export const NO_CREDENTIALS_FIX = 'set GITHUB_TOKEN or GH_TOKEN, or log in with gh';
export const NO_CREDENTIALS = `No GitHub credentials: ${NO_CREDENTIALS_FIX} (nothing was pushed)`;

export interface PrRequest {
  workdir: string;
  branch: string;
  base: string;
  title: string;
  body: string;
  draft: boolean;
  /** Pinned before the agent ran (the plan's push_target): the only place the branch goes and the PR is opened on. */
  target: PushTarget;
  env: NodeJS.ProcessEnv;
}

export interface PrResult {
  url: string;
  number: number | null;
  via: 'rest' | 'gh';
}

// gh may run git itself: no global or system config, and no hooks, through git's environment config.
const GH_GIT_CONFIG = {
  ...GIT_ISOLATION_ENV, GIT_CONFIG_COUNT: '2',
  GIT_CONFIG_KEY_0: 'core.hooksPath', GIT_CONFIG_VALUE_0: '/dev/null',
  GIT_CONFIG_KEY_1: 'core.fsmonitor', GIT_CONFIG_VALUE_1: 'false',
};

/** gh keeps its own login under HOME; it never gets svc's tokens (it is only used when none is set). */
function ghEnv(env: NodeJS.ProcessEnv): ChildSpec {
  return { kind: 'tool', base: env, extra: GH_GIT_CONFIG };
}

function githubToken(env: NodeJS.ProcessEnv): string | null {
  if (env.GITHUB_TOKEN) return env.GITHUB_TOKEN;
  if (env.GH_TOKEN) return env.GH_TOKEN;
  const gh = which('gh', env.PATH);
  if (!gh) return null;
  try {
    const token = runSync([gh, 'auth', 'token'], { ...ghEnv(env), stderr: 'ignore' }).trim();
    return token || null;
  } catch {
    return null;
  }
}

async function createViaRest(req: PrRequest, token: string): Promise<PrResult> {
  const slug = req.target.repo;
  if (!slug) throw new RefusedError('Cannot tell the GitHub owner/name of origin');
  const base = (req.env.GITHUB_API_URL || 'https://api.github.com').replace(/\/+$/, '');
  const res = await fetch(`${base}/repos/${slug}/pulls`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      accept: 'application/vnd.github+json',
      'x-github-api-version': '2022-11-28',
      'content-type': 'application/json',
      'user-agent': 'svc',
    },
    body: JSON.stringify({ title: req.title, head: req.branch, base: req.base, body: req.body, draft: req.draft }),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  if (!res.ok) {
    throw new FailedError(`GitHub answered ${res.status} when opening the pull request: ${text.slice(0, 300)}`);
  }
  const json = JSON.parse(text) as { html_url?: string; number?: number };
  if (!json.html_url) throw new FailedError('GitHub did not return the pull request URL');
  return { url: json.html_url, number: json.number ?? null, via: 'rest' };
}

/** gh's `--repo` value, `[HOST/]OWNER/REPO`: gh then never picks the repository from the config's remotes. */
function ghRepo(target: PushTarget): string {
  if (!target.repo) throw new RefusedError('Cannot tell the GitHub owner/name of origin');
  let host: string | null = null;
  try {
    host = new URL(target.url).hostname || null;
  } catch {
    host = /^[^@/]+@([^:/]+):/.exec(target.url)?.[1] ?? null; // scp-like git@host:owner/name
  }
  return host ? `${host}/${target.repo}` : target.repo;
}

function createViaGh(req: PrRequest, gh: string): PrResult {
  const repo = ghRepo(req.target);
  const dir = mkdtempSync(join(tmpdir(), 'svc-pr-'));
  try {
    const bodyFile = join(dir, 'body.md');
    writeFileSync(bodyFile, req.body);
    const args = ['pr', 'create', '--repo', repo, '--head', req.branch, '--base', req.base, '--title', req.title];
    args.push('--body-file', bodyFile);
    if (req.draft) args.push('--draft');
    const out = runSync([gh, ...args], { ...ghEnv(req.env), cwd: req.workdir, maxBuffer: 16 * 1024 * 1024 });
    const url = out.trim().split('\n').pop() ?? '';
    const number = /\/pull\/(\d+)/.exec(url)?.[1];
    return { url, number: number ? Number(number) : null, via: 'gh' };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Pushes the branch to the run's pinned target, provided the config still names it, never through the config's URL
 * rules, helpers or proxies (src/engine/git-push.ts); the token goes along only to an https URL on the token's own
 * GitHub host.
 */
export async function pushBranch(
  workdir: string, target: PushTarget, branch: string, token: string | null, env: NodeJS.ProcessEnv,
): Promise<void> {
  const origin = pinnedOrigin(workdir, target);
  try {
    if (!token || !tokenGoesTo(origin.url, env)) {
      cleanPush(workdir, origin, branch, { askpass: null, token: null });
      return;
    }
    withAskpassSync((askpass) => cleanPush(workdir, origin, branch, { askpass, token }));
  } catch (err) {
    if (err instanceof GitRedirectedError) throw await redirectRefusal(origin.url, 'git-receive-pack', env);
    throw err;
  }
}

/** What opens the pull request: the token (from the environment or `gh auth token`), else gh itself; null: nothing. */
export function githubCredential(env: NodeJS.ProcessEnv): { token: string | null; gh: string | null } | null {
  const token = githubToken(env);
  const gh = token ? null : which('gh', env.PATH);
  return token || gh ? { token, gh } : null;
}

export async function openPullRequest(req: PrRequest): Promise<PrResult> {
  const credential = githubCredential(req.env);
  // Nothing is pushed when no pull request could be opened afterwards: a branch without its PR helps nobody.
  if (!credential) throw new RefusedError(NO_CREDENTIALS);
  await pushBranch(req.workdir, req.target, req.branch, credential.token, req.env);
  if (credential.token) return createViaRest(req, credential.token);
  return createViaGh(req, credential.gh!);
}
