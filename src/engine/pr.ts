// Opens the receipt-carrying pull request: push svc/<run> to origin, then GitHub REST (or gh). Never merges, never deploys.
import { execFileSync } from 'node:child_process';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { git, repoName } from './git.ts';
import { which } from './which.ts';

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

function githubToken(env: NodeJS.ProcessEnv): string | null {
  if (env.GITHUB_TOKEN) return env.GITHUB_TOKEN;
  if (env.GH_TOKEN) return env.GH_TOKEN;
  const gh = which('gh', env.PATH);
  if (!gh) return null;
  try {
    const token = execFileSync(gh, ['auth', 'token'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], env }).trim();
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
    const out = execFileSync(gh, args, { cwd: req.workdir, encoding: 'utf8', env: req.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const url = out.trim().split('\n').pop() ?? '';
    const number = /\/pull\/(\d+)/.exec(url)?.[1];
    return { url, number: number ? Number(number) : null, via: 'gh' };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function openPullRequest(req: PrRequest): Promise<PrResult> {
  git(req.workdir, ['push', '--quiet', 'origin', `${req.branch}:refs/heads/${req.branch}`], req.env);
  const token = githubToken(req.env);
  if (token) return createViaRest(req, token);
  const gh = which('gh', req.env.PATH);
  if (gh) return createViaGh(req, gh);
  throw new Error('No GitHub credentials: set GITHUB_TOKEN or GH_TOKEN, or log in with gh');
}
