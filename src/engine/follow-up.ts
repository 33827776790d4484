// Follow-up runs (docs/engine.md): a run that continues a pull request svc opened, from its branch's head now.
// Must not: push over commits it did not build on (a person's), or open a second pull request.
import { join } from 'node:path';
import { BadInputError, RefusedError, errorMessage } from '../errors.ts';
import { isValidSegment } from './ids.ts';
import { artifactsDir, runDir } from './paths.ts';
import { commentOnPullRequest, githubToken } from './pr.ts';
import { fetchBranchHead, pushBranch, type PushTarget } from './git-push.ts';
import { urlWithoutSecrets } from './text.ts';
import { localRun, localRuns, signsLater, type ProviderSession, type RunState } from './run-state.ts';
import { inheritSession } from './provider-session.ts';
import { receiptMarkdown, type Receipt } from './receipt.ts';
import type { RunContext } from './run-context.ts';
import { TERMINAL } from '../run-json.ts';
import { obj, str, tryParseJson } from '../untrusted.ts';
import { readOrNull } from '../spawn/tree.ts';

/** What a follow-up run records (state.json `follow_up`), and what `svc start --follow-up BRANCH [--pr-url URL]
 * [--previous SOURCE/RUN --previous-receipt HEX]` asks (without --previous, its start finds the run before it). */
export type FollowUp = NonNullable<RunState['follow_up']>;

/** A branch svc names for a run (svc/<run>): the only kind a follow-up continues. */
const RUN_BRANCH = /^svc\/[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;
const DIGEST = /^[0-9a-f]{64}$/;

/** The request checked, or a BadInputError naming the flag. */
export function followUpRequest(values: {
  branch: string; prUrl?: string | undefined; previous?: string | undefined; previousReceipt?: string | undefined;
}): FollowUp {
  if (!RUN_BRANCH.test(values.branch)) {
    throw new BadInputError(`--follow-up needs a branch svc made for a run (svc/<run>), not "${values.branch}"`);
  }
  const prUrl = values.prUrl ?? null;
  if (prUrl !== null && (URL.parse(prUrl)?.href !== prUrl || !/^https?:/.test(prUrl))) {
    throw new BadInputError('--pr-url must be an http(s) URL');
  }
  const previous = values.previous ?? null;
  const parts = previous?.split('/');
  if (parts && (parts.length !== 2 || !parts.every(isValidSegment))) {
    throw new BadInputError('--previous must be SOURCE/RUN');
  }
  const previousReceipt = values.previousReceipt ?? null;
  if (previousReceipt !== null && (!DIGEST.test(previousReceipt) || previous === null)) {
    throw new BadInputError('--previous-receipt must be a receipt integrity (64 hex digits), with --previous');
  }
  const [source, run] = parts ?? [];
  const before = source && run ? { source, run, receipt: previousReceipt } : null;
  return { branch: values.branch, pr_url: prUrl, previous: before };
}

export function receiptIntegrity(repo: string, run: string): string | null {
  const text = readOrNull(join(artifactsDir(runDir(repo, run)), 'receipt.json'));
  const integrity = str(obj(tryParseJson(text ?? '')).integrity);
  return integrity !== null && DIGEST.test(integrity) ? integrity : null;
}

/** Without --previous: the newest ended run of this checkout on the PR's branch (that opened it, or followed). */
function previousOnBranch(repo: string, branch: string): FollowUp['previous'] {
  const onBranch = localRuns(repo).filter(({ state }) => TERMINAL.has(state.status) &&
    (state.branch === branch && state.pr || state.follow_up?.branch === branch));
  // Run ids sort by creation time.
  const last = onBranch.sort((a, b) => a.run.localeCompare(b.run)).pop();
  return last ? { source: last.state.source, run: last.run, receipt: receiptIntegrity(repo, last.run) } : null;
}

/** Where a follow-up starts (the PR branch's head on the origin now) and what it records; refused if it can't push. */
export async function followUpStart(
  repo: string, target: PushTarget | null, req: FollowUp, env: NodeJS.ProcessEnv,
): Promise<{ base: string; followUp: FollowUp }> {
  // A pod's run container holds no GitHub credential, and its signer pushes the branch as a new pull request.
  if (signsLater(env)) throw new RefusedError('Follow-up runs are not supported under the Kubernetes executor yet');
  if (target === null) {
    throw new RefusedError('Refusing to start a follow-up: the policy says pr.open = "never", so nothing could be ' +
      'pushed to the pull request (nothing was started)');
  }
  const base = await fetchBranchHead(repo, target, req.branch, githubToken(env), env).catch((err: unknown) => {
    throw new RefusedError(`The pull request branch "${req.branch}" cannot be fetched from ` +
      `"${urlWithoutSecrets(target.url)}" (${errorMessage(err)}): nothing was started`, { cause: err });
  });
  const previous = req.previous ?? previousOnBranch(repo, req.branch);
  return { base, followUp: { branch: req.branch, pr_url: req.pr_url, previous } };
}

/** The previous run's CLI session, when it is in this checkout with the same provider; null: a fresh session. A run
 * folder the repository commits (or hides behind a committed link) is its content, not svc's run (localRun). */
export function followUpSession(repo: string, followUp: FollowUp, provider: string): ProviderSession | null {
  const prior = followUp.previous;
  const previous = prior === null ? null : localRun(repo, prior.run);
  if (!previous || previous.source !== prior?.source || previous.provider !== provider) return null;
  return inheritSession(previous.provider_session);
}

/** The follow-up's task: the PR it continues, then the task as given (fenced as untrusted data by the prompt). */
export function followUpSpec(spec: string, req: FollowUp): string {
  const pr = req.pr_url ? `the pull request ${req.pr_url}` : 'a pull request svc opened';
  return [
    `# Follow-up on ${pr}`, '',
    `The working tree holds the pull request's branch \`${req.branch}\` as it is on the origin now: the earlier ` +
      'work is already committed there. Make the changes asked below on top of it.', '',
    spec,
  ].join('\n');
}

/** The branch moved on the origin since the run fetched it (someone pushed): svc does not push over it. */
class BranchMovedError extends RefusedError {}

/** Pushes a follow-up's svc/<run> branch to the PR's branch, unless it moved since the run started from it (git itself
 * refuses anything but a fast forward should a push land meanwhile), and takes the PR's address; the run's error when
 * it did not. */
export async function pushFollowUpRun(
  ctx: RunContext, target: PushTarget, receipt: Receipt,
): Promise<string | null> {
  const { state } = ctx;
  const f = state.follow_up!;
  try {
    const token = githubToken(ctx.env);
    const now = await fetchBranchHead(state.repo_path, target, f.branch, token, ctx.env);
    if (now !== state.base_sha) {
      throw new BranchMovedError(`the branch "${f.branch}" moved on the origin since this run started from it ` +
        `(${state.base_sha.slice(0, 12)} then, ${now.slice(0, 12)} now: someone pushed to it); svc never pushes over ` +
        'commits it did not build on, so nothing was pushed: ask again (/svc …) for a follow-up on the new head');
    }
    await pushBranch(state.workdir, target, state.branch!, token, ctx.env, f.branch, ctx.groupWatch());
  } catch (err) {
    const reason = errorMessage(err);
    ctx.event('pr', { opened: false, follow_up: true, branch: f.branch, moved: err instanceof BranchMovedError,
      reason });
    return `Follow-up not pushed: ${reason}`;
  }
  ctx.update({ pr_url: f.pr_url });
  ctx.event('pr', { opened: false, follow_up: true, pushed: true, branch: f.branch, head_sha: state.head_sha,
    url: f.pr_url });
  ctx.say(`pushed to the pull request's branch ${f.branch}${f.pr_url ? ` (${f.pr_url})` : ''}`);
  await commentReceipt(ctx, target, receipt);
  return null;
}

/** The follow-up's comment on its PR: what it pushed, the run before it, and its receipt (`svc receipt verify`). */
function receiptComment(state: RunState, receipt: Receipt): string {
  const before = receipt.follows?.run ? `\`${receipt.follows.source}/${receipt.follows.run}\`` : 'an earlier run';
  const link = receipt.follows?.receipt ? ` (its receipt's integrity \`${receipt.follows.receipt}\`)` : '';
  const lead = `Follow-up run \`${receipt.source}/${receipt.run}\` by svc pushed ` +
    `\`${(receipt.head_sha ?? '').slice(0, 12)}\` to this pull request. Verdict: **${receipt.verdict}**. It follows ` +
    `${before}${link}.`;
  const diff = `Diff: ${receipt.diff.files} files, +${receipt.diff.insertions} -${receipt.diff.deletions}.`;
  return receiptMarkdown([lead], state.brief, [diff], receipt);
}

/** Posts the receipt on the PR (its number from pr_url); a failure is noted in the run's log, never fails the run. */
async function commentReceipt(ctx: RunContext, target: PushTarget, receipt: Receipt): Promise<void> {
  const number = /\/pull\/(\d+)$/.exec(ctx.state.follow_up?.pr_url ?? '')?.[1];
  if (!number) return;
  try {
    await commentOnPullRequest(target, Number(number), receiptComment(ctx.state, receipt), ctx.env);
    ctx.event('log', { stream: 'svc', text: `receipt commented on pull request #${number}` });
  } catch (err) {
    ctx.note(`the receipt was not commented on pull request #${number}: ${errorMessage(err)}`);
  }
}
