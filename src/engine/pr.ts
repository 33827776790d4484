// Opens the receipt-carrying pull request: push svc/<run> to origin, then GitHub REST (or gh). Never merges, never deploys.
// The GitHub token reaches exactly one child, the push (through GIT_ASKPASS), and only when origin is that GitHub host.
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { git, repoName } from './git.ts';
import { which } from './which.ts';
import { runSync, type ChildSpec } from '../spawn/start.ts';

export interface PrRequest {
  workdir: string;
  branch: string;
  base: string;
  title: string;
  body: string;
  draft: boolean;
  env: NodeJS.ProcessEnv;
}

export interface PrResult {
  url: string;
  number: number | null;
  via: 'rest' | 'gh';
}

// gh may run git itself: the same no-hooks rule, through git's environment config (GIT_CONFIG_COUNT).
const GH_GIT_CONFIG = {
  GIT_CONFIG_COUNT: '2', GIT_CONFIG_KEY_0: 'core.hooksPath', GIT_CONFIG_VALUE_0: '/dev/null', GIT_CONFIG_KEY_1: 'core.fsmonitor', GIT_CONFIG_VALUE_1: 'false',
};

/** gh keeps its own login under HOME; it never gets svc's tokens (it is only used when none is set). */
function ghEnv(env: NodeJS.ProcessEnv): ChildSpec {
  return { kind: 'tool', base: env, extra: GH_GIT_CONFIG };
}

// Answers git's username/password prompts; the token is in this process's environment only (never a file or argv).
const ASKPASS = `#!/bin/sh
case "$1" in
  Username*|username*) printf '%s\\n' x-access-token ;;
  *) printf '%s\\n' "$SVC_GIT_PUSH_TOKEN" ;;
esac
`;

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
  const slug = repoName(req.workdir);
  if (!slug.includes('/')) throw new Error(`Cannot tell the GitHub owner/name of origin (got "${slug}")`);
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
  if (!res.ok) throw new Error(`GitHub answered ${res.status} when opening the pull request: ${text.slice(0, 300)}`);
  const json = JSON.parse(text) as { html_url?: string; number?: number };
  if (!json.html_url) throw new Error('GitHub did not return the pull request URL');
  return { url: json.html_url, number: json.number ?? null, via: 'rest' };
}

function createViaGh(req: PrRequest, gh: string): PrResult {
  const dir = mkdtempSync(join(tmpdir(), 'svc-pr-'));
  try {
    const bodyFile = join(dir, 'body.md');
    writeFileSync(bodyFile, req.body);
    const args = ['pr', 'create', '--head', req.branch, '--base', req.base, '--title', req.title, '--body-file', bodyFile];
    if (req.draft) args.push('--draft');
    const out = runSync([gh, ...args], { ...ghEnv(req.env), cwd: req.workdir, maxBuffer: 16 * 1024 * 1024 });
    const url = out.trim().split('\n').pop() ?? '';
    const number = /\/pull\/(\d+)/.exec(url)?.[1];
    return { url, number: number ? Number(number) : null, via: 'gh' };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The web host a GitHub token belongs to: github.com, or the GITHUB_API_URL host (GitHub Enterprise). */
export function githubHost(env: NodeJS.ProcessEnv): string {
  const api = env.GITHUB_API_URL ? new URL(env.GITHUB_API_URL).hostname : 'api.github.com';
  return api === 'api.github.com' ? 'github.com' : api;
}

/** Pushes the branch to origin's push URL; the token goes along only to an https URL on the token's own host. */
export function pushBranch(workdir: string, branch: string, token: string | null, env: NodeJS.ProcessEnv): void {
  const url = git(workdir, ['remote', 'get-url', '--push', 'origin']).trim().split('\n')[0]!;
  const refspec = `${branch}:refs/heads/${branch}`;
  let target: URL | null = null;
  try {
    target = new URL(url);
  } catch {
    // scp-like ssh or a local path: the user's own credentials, never ours.
  }
  if (!token || !target || target.protocol !== 'https:' || target.hostname !== githubHost(env) || target.username || target.password) {
    git(workdir, ['push', '--quiet', url, refspec]);
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'svc-askpass-'));
  try {
    const askpass = join(dir, 'askpass');
    writeFileSync(askpass, ASKPASS, { mode: 0o700 });
    // credential.helper= empties the helper list, so no configured helper (a planted one included) sees the token.
    git(workdir, ['-c', 'credential.helper=', 'push', '--quiet', url, refspec], { GIT_ASKPASS: askpass, SVC_GIT_PUSH_TOKEN: token, GIT_TERMINAL_PROMPT: '0' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function openPullRequest(req: PrRequest): Promise<PrResult> {
  const token = githubToken(req.env);
  pushBranch(req.workdir, req.branch, token, req.env);
  if (token) return createViaRest(req, token);
  const gh = which('gh', req.env.PATH);
  if (gh) return createViaGh(req, gh);
  throw new Error('No GitHub credentials: set GITHUB_TOKEN or GH_TOKEN, or log in with gh');
}
