// Opens the receipt-carrying pull request on the run's pinned target (docs/engine.md); never merges or deploys.
// Must not: send the token anywhere the push would not (git-token.ts), or change the repository.
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pushBranch, type PushTarget } from './git-push.ts';
import type { GroupWatch } from './git-group.ts';
import { urlWithoutSecrets } from './text.ts';
import {
  githubWebHost, gitFailure, httpRemoteHost, redirectRefusal, remoteHost, withGitToken,
} from './git-token.ts';
import { gitArgv, gitBaseEnv, gitConfigEnv, gitExtraEnv, redirectedUrl } from './git.ts';
import { runCollect, runSync, type ChildSpec } from '../spawn/start.ts';
import { FailedError, RefusedError, UnavailableError } from '../errors.ts';
import { isLoopbackHost } from '../http/guards.ts';
import { runPageUrl } from '../run-json.ts';
import { which, withScratch } from '../spawn/svc-paths.ts';
import { orNull } from '../spawn/tree.ts';
import { githubFetch } from './github-rest.ts';
import { countOrNull, objOrNull, str, tryParseJson } from '../untrusted.ts';

/** The run's page on SVC_PUBLIC_URL for its PR body; null when unset, not http(s), or loopback (a dead link). */
export function publicRunPage(env: NodeJS.ProcessEnv, source: string, run: string): string | null {
  const base = URL.parse(env.SVC_PUBLIC_URL ?? '');
  if (!base || !/^https?:$/.test(base.protocol) || base.username || isLoopbackHost(base.hostname)) return null;
  return runPageUrl(base.href, source, run);
}

const NO_CREDENTIALS = 'No GitHub credentials: set GITHUB_TOKEN or GH_TOKEN, or log in with gh';

interface PrRequest {
  workdir: string;
  branch: string;
  base: string;
  title: string;
  body: string;
  draft: boolean;
  /** Pinned before the agent ran (the plan's push_target): the only place the branch goes and the PR is opened on. */
  target: PushTarget;
  env: NodeJS.ProcessEnv;
  /** Where the push's group is recorded while it runs (git-group.ts): a run's PR always has one. */
  watch?: GroupWatch;
}

type PrResult = { url: string; number: number | null; via: 'rest' | 'gh' };

// What the git gh runs may never do: run a hook, a file monitor, or enter a submodule (whose own config an agent
// could have written, filters included).
const GH_GIT_CONFIG: readonly (readonly [string, string])[] = [['core.hooksPath', '/dev/null'],
  ['core.fsmonitor', 'false'], ['diff.ignoreSubmodules', 'all'], ['submodule.recurse', 'false'],
  ['status.submoduleSummary', 'false']];

/** gh keeps its own login under HOME, never svc's tokens; the git it runs reads no global config and runs no hook. */
function ghEnv(env: NodeJS.ProcessEnv, ceiling?: string): ChildSpec {
  // From a scratch folder git finds no repository, even with a temp folder inside one.
  const config = { ...gitConfigEnv(GH_GIT_CONFIG), ...(ceiling ? { GIT_CEILING_DIRECTORIES: ceiling } : {}) };
  return { kind: 'tool', base: env, extra: gitExtraEnv(config) };
}

/** What opens the pull request: the token (from the environment or `gh auth token`), else gh itself; null: nothing. */
function githubCredential(env: NodeJS.ProcessEnv): { token: string | null; gh: string | null } | null {
  const set = env.GITHUB_TOKEN || env.GH_TOKEN;
  if (set) return { token: set, gh: null };
  const gh = which('gh', env.PATH);
  if (!gh) return null;
  // Not logged in that way: gh itself opens the PR.
  const token = orNull(() => runSync([gh, 'auth', 'token'], { ...ghEnv(env), stderr: 'ignore' }).trim()) || null;
  return token ? { token, gh: null } : { token: null, gh };
}

/** The pinned target's owner/name: the only repository a run's PR and its comments go to. */
function targetRepo(target: PushTarget): string {
  if (!target.repo) throw new RefusedError('Cannot tell the GitHub owner/name of origin');
  return target.repo;
}

async function createViaRest(req: PrRequest, token: string): Promise<PrResult> {
  const { title, branch: head, base, body, draft } = req;
  const res = await githubFetch(req.env, token, 'POST', `/repos/${targetRepo(req.target)}/pulls`,
    { title, head, base, body, draft });
  const text = await res.text();
  if (!res.ok) {
    throw new FailedError(`GitHub answered ${res.status} when opening the pull request: ${text.slice(0, 300)}`);
  }
  // The answer is another server's: read through typed readers, so an odd one fails the same way as a missing URL.
  const json = objOrNull(tryParseJson(text));
  const url = str(json?.html_url);
  if (!url) throw new FailedError('GitHub did not return the pull request URL');
  return { url, number: countOrNull(json?.number), via: 'rest' };
}

/** gh's `--repo` value, `[HOST/]OWNER/REPO`: gh then never picks the repository from the config's remotes. */
function ghRepo(target: PushTarget): string {
  const repo = targetRepo(target);
  const host = remoteHost(target.url);
  return host ? `${host}/${repo}` : repo;
}

function createViaGh(req: PrRequest, gh: string): PrResult {
  const repo = ghRepo(req.target);
  return withScratch('pr', (dir) => {
    const bodyFile = join(dir, 'body.md');
    writeFileSync(bodyFile, req.body);
    const args = ['pr', 'create', '--repo', repo, '--head', req.branch, '--base', req.base, '--title', req.title,
      '--body-file', bodyFile, ...(req.draft ? ['--draft'] : [])];
    // Never in the worktree: gh runs `git status` where it starts, and the agent wrote everything there (a submodule
    // with its own filters). `--repo` and `--head` name all gh needs, so an empty folder does.
    let out: string;
    try {
      out = runSync([gh, ...args], { ...ghEnv(req.env, dirname(dir)), cwd: dir, maxBuffer: 16 * 1024 * 1024 });
    } catch (err) {
      // gh before 2.19 wants a git repository where it starts even when told --repo (cli/cli #5075, #6527).
      // gh's own words only: the error's message also holds the command line, the brief's title among it.
      const said = (err as { stderr?: unknown }).stderr;
      if (typeof said !== 'string' || !/^fatal: not a git repository/m.test(said)) throw err;
      throw new FailedError('gh pr create failed with "not a git repository": gh older than 2.19 needs a checkout ' +
        'svc does not give it; upgrade gh to 2.19 or later, or set GITHUB_TOKEN', { cause: err });
    }
    const url = out.trim().split('\n').pop() ?? '';
    const number = /\/pull\/(\d+)/.exec(url)?.[1];
    return { url, number: number ? Number(number) : null, via: 'gh' };
  });
}

export async function openPullRequest(req: PrRequest): Promise<PrResult> {
  const credential = githubCredential(req.env);
  // Nothing is pushed when no pull request could be opened afterwards: a branch without its PR helps nobody.
  if (!credential) throw new RefusedError(`${NO_CREDENTIALS} (nothing was pushed)`);
  await pushBranch(req.workdir, req.target, req.branch, credential.token, req.env, req.branch,
    req.watch ?? null);
  if (credential.token) return createViaRest(req, credential.token);
  return createViaGh(req, credential.gh!);
}

const LS_REMOTE_TIMEOUT_MS = 60_000;

/**
 * What git says when it could not ask the origin at all: no such host, a refused or reset connection, a timeout. That
 * blames neither the credential nor the address, and may pass by itself; anything else git says (a 401/403/404, a
 * failed login, an unknown repository, a certificate or host key it rejects) stays a refusal.
 */
const ORIGIN_UNREACHABLE = new RegExp([
  'could not resolve host', 'could not resolve hostname', 'name or service not known',
  'temporary failure in name resolution', 'connection refused', 'connection reset', 'connection timed out',
  'operation timed out', 'timed out after', 'network is unreachable', 'no route to host', 'failed to connect to',
  "couldn't connect to server",
].join('|'), 'i');

/** The origin could not be asked at all (DNS, connection, timeout): infra, worth a retry, no one's fault yet. */
export class OriginUnreachableError extends UnavailableError {}

/** `git ls-remote URL HEAD` with the credential the push would use: null, or git's first stderr line and whether
 * the origin refused (rather than never answered). */
async function lsRemote(
  url: string, token: string | null, env: NodeJS.ProcessEnv,
): Promise<{ said: string; refused: boolean } | null> {
  return withScratch('ls-remote', async (cwd) => {
    const done = await withGitToken(url, token, env, 'git-upload-pack', (config, extra) => runCollect(
      gitArgv([...config, 'ls-remote', '--quiet', '--', url, 'HEAD']),
      { kind: 'tool', base: gitBaseEnv(env), extra: gitExtraEnv(extra), cwd, timeout: LS_REMOTE_TIMEOUT_MS },
    ));
    if (done.status === 0) return null;
    if (redirectedUrl(done.stderr) !== null) throw await redirectRefusal(url, 'git-upload-pack', env);
    const refused = done.status !== null && !ORIGIN_UNREACHABLE.test(done.stderr);
    return { said: gitFailure(done, LS_REMOTE_TIMEOUT_MS), refused };
  });
}

/**
 * Refuses (a RefusedError) unless a credential in `env` exists and the origin answers as the push would ask it; an
 * origin that could not be asked at all is an OriginUnreachableError, which blames neither.
 */
export async function checkPrPossible(target: PushTarget, env: NodeJS.ProcessEnv): Promise<void> {
  const credential = githubCredential(env);
  if (credential === null) throw new RefusedError(NO_CREDENTIALS);
  // A token opens the PR on GITHUB_API_URL's GitHub (createViaRest), which holds no repository of another host: the
  // run would fail once its agent ran. gh alone names the origin's host itself (ghRepo), where it may be logged in.
  // An ssh origin's host may be an alias of the user's ssh config for GitHub's: only an http(s) one is told apart.
  const host = httpRemoteHost(target.url);
  const github = githubWebHost(env).hostname.toLowerCase();
  if (credential.token !== null && host !== null && host !== github) {
    throw new RefusedError(`The origin "${urlWithoutSecrets(target.url)}" is on ${host}, and svc opens pull ` +
      `requests only on ${github} (GitHub, or the host of GITHUB_API_URL)`);
  }
  const problem = await lsRemote(target.url, credential.token, env);
  if (problem === null) return;
  if (!problem.refused) {
    throw new OriginUnreachableError(`The origin "${urlWithoutSecrets(target.url)}" could not be reached to check ` +
      `that the pull request can be pushed (${problem.said}); try again once it answers`);
  }
  throw new RefusedError(`The origin "${urlWithoutSecrets(target.url)}" cannot be reached as configured ` +
    `(${problem.said}): ` +
    'fix the credential (GITHUB_TOKEN, GH_TOKEN or gh auth login) or `git remote set-url origin URL`');
}

/** The token pushes, fetches and GitHub API calls send (GITHUB_TOKEN, GH_TOKEN or `gh auth token`), or null. */
export function githubToken(env: NodeJS.ProcessEnv): string | null {
  return githubCredential(env)?.token ?? null;
}

/** Posts `body` as a comment on pull request `number`; a RefusedError without a token (gh alone does not post it). */
export async function commentOnPullRequest(
  target: PushTarget, number: number, body: string, env: NodeJS.ProcessEnv,
): Promise<void> {
  const token = githubToken(env);
  if (!token) throw new RefusedError(`${NO_CREDENTIALS} (the comment needs a token)`);
  const res = await githubFetch(env, token, 'POST', `/repos/${targetRepo(target)}/issues/${number}/comments`, { body });
  if (!res.ok) throw new FailedError(`GitHub answered ${res.status} when commenting on the pull request`);
}
