// After the provider: diff, checks (argv arrays, never a shell, in the agent's sandbox), verdict, receipt, PR and
// status; also `--verify` and `--open-pr`.
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { hash } from 'node:crypto';
import { onEndSignal, openRunContext, type RunContext } from './run-context.ts';
import { verdictAccepted, type Policy } from './policy.ts';
import { pushFollowUpRun } from './follow-up.ts';
import type { RunPlan } from './run-plan.ts';
import { readPlan } from './plan-reuse.ts';
import {
  commitAll, git, gitBaseEnv, hostGit, runWorktreeGitDir, treeGit, UnreadableTreeError, type GitRun,
} from './git.ts';
import { diffCommits, diffWorkingTree, emptyDiff, type DiffResult } from './diff.ts';
import {
  decideVerdict, failedRequiredCheck, requiredCheckError, saveReceipt, confinedNetwork, reportedChecks,
  EVIDENCE_ARTIFACT, EVIDENCE_TYPE, RECEIPT_TYPE, UNCONFINED, receiptMarkdown, receiptCost, receiptDiff,
  verifyReceipt, type CheckResult, type Receipt, type ReceiptBody, type RunEvidence,
} from './receipt.ts';
import { loadOrCreateSigningKey } from '../keys.ts';
import { homeOf, svcHomeOf } from '../spawn/svc-paths.ts';
import { readOrNull } from '../spawn/tree.ts';
import { tryParseJson } from '../untrusted.ts';
import { checkPrPossible, openPullRequest, publicRunPage } from './pr.ts';
import { ConflictError, FailedError, errorMessage } from '../errors.ts';
import { redactSecrets } from './text.ts';
import { runFailure, type RunFailure } from '../run-json.ts';
import { artifactsDir, projectOf } from './paths.ts';
import { readState, signsLater, type RunState } from './run-state.ts';
import { refuseHeldRun } from './last-worker.ts';
import { takeRun } from './run-take.ts';
import { agentSandbox, protocolFiles, watchedLimits, type RunSandbox } from './sandbox.ts';
import { gitSandboxPlan } from '../spawn/agent-plan.ts';
import { bwrapArgv, closeSandboxFds, openSandboxFds } from '../spawn/bwrap-argv.ts';
import { runSync } from '../spawn/start.ts';
import { spawnGroup } from './spawn-group.ts';
import type { ProviderOutcome } from './provider-phase.ts';
import { inSpan } from '../trace.ts';

const NOTHING_CHANGED = 'The agent finished without changing any file';

/** The one finish sequence; a run a limit or its budget ended still has its checks run on what exists. */
export async function finish(
  ctx: RunContext, plan: RunPlan, sandbox: RunSandbox, end: Exclude<ProviderOutcome, { kind: 'stopped' }>,
): Promise<void> {
  const exitCode = end.kind === 'done' ? 0 : end.exitCode;
  const { diff, unreadable } = diffOrUnreadable(ctx, sandbox);
  // An agent that exits 0 having changed nothing did not do the task; a follow-up may find its work already done.
  const idle = end.kind === 'done' && diff.files.length === 0 && !ctx.state.follow_up && unreadable === null;
  const failure = end.kind !== 'done' ? end.error : unreadable ?? (idle ? NOTHING_CHANGED : null);
  const checks = end.kind === 'failed' || idle || unreadable !== null ? []
    : await inSpan('svc.checks', {}, () => runChecks(ctx, plan.policy, sandbox));
  if (ctx.stopRequested()) return;
  const ended = new Date().toISOString();
  ctx.update({ ended_at: ended });
  const overBudget = end.kind === 'over-budget';
  const config = end.kind === 'failed' && end.config;
  if (signsLater(ctx.env)) {
    // In a pod's run container (no key there): the evidence; its signer sets the rest (src/pod/sign.ts).
    const outcome = overBudget ? 'over_budget' : 'finished';
    const evidence: RunEvidence = { type: EVIDENCE_TYPE, version: 1, run: ctx.state.run, outcome, error: failure,
      failure_class: failure === null ? null : config ? 'config' : end.kind === 'limit' ? 'limit' : 'agent',
      exit_code: exitCode, checks: reportedChecks(checks) };
    ctx.saveArtifact(EVIDENCE_ARTIFACT, JSON.stringify(evidence, null, 2) + '\n');
    ctx.event('evidence', { outcome, checks: checks.length });
    return ctx.say('evidence written: the signer container issues the receipt');
  }
  const checkFailed = failure === null ? failedRequiredCheck(checks) : null;
  let error = failure ?? (checkFailed ? requiredCheckError(checkFailed) : null);
  const cls = {
    done: idle || unreadable !== null ? 'agent' : 'checks', failed: 'agent', 'over-budget': 'budget', limit: 'limit',
  } as const;
  const failed = error === null ? null : runFailure(config ? 'config' : cls[end.kind], error);
  const receipt = await inSpan('svc.receipt', {},
    () => writeReceipt(ctx, checks, diff, failure !== null, sandbox, failed));
  if (receipt === null) return;
  let prFailure: RunFailure | null = null;
  if (!error) {
    error = await inSpan('svc.pr', { 'svc.pr.wanted': ctx.state.pr }, () => maybeOpenPr(ctx, plan, receipt));
    // The forge or the network said no after the agent's work was done and signed: svc's side (`svc runs pr` retries).
    if (error) prFailure = runFailure('infra', error);
  } else if (ctx.state.pr) ctx.event('pr', { opened: false, reason: `verdict ${receipt.verdict}: ${error}` });
  const status = overBudget ? 'stopped' : error ? 'failed' : 'succeeded';
  const failed_check = overBudget ? undefined : checkFailed?.name ?? null;
  ctx.setStatus(status, {
    error, ...(failed_check === undefined ? {} : { failed_check }), ended_at: ended, exit_code: exitCode,
    question: null, failure: failed ?? prFailure,
  });
}

/** `--verify`: the diff, the checks and a new receipt; the run's status stays. */
export async function reverify(ctx: RunContext, plan: RunPlan, sandbox: RunSandbox): Promise<void> {
  ctx.event('log', { stream: 'svc', text: 'verify: re-running checks' });
  const diff = collectDiff(ctx, sandbox);
  const checks = await inSpan('svc.checks', {}, () => runChecks(ctx, plan.policy, sandbox));
  if (ctx.stopRequested()) return;
  // A run its checks failed is judged again on these checks; one that failed before them stays failed.
  const failedBeforeChecks = ctx.state.status === 'failed' && ctx.state.error !== null && !ctx.state.failed_check;
  const checkFailed = failedRequiredCheck(checks);
  const failure = failedBeforeChecks ? ctx.state.failure ?? null
    : checkFailed ? runFailure('checks', requiredCheckError(checkFailed)) : null;
  await writeReceipt(ctx, checks, diff, failedBeforeChecks, sandbox, failure);
}

/** The diff, or (with an empty one) why svc's git could not read the tree the agent left: the agent's failure. */
function diffOrUnreadable(ctx: RunContext, sandbox: RunSandbox): { diff: DiffResult; unreadable: string | null } {
  try {
    return { diff: collectDiff(ctx, sandbox), unreadable: null };
  } catch (err) {
    if (!(err instanceof UnreadableTreeError)) throw err;
    ctx.note(err.message);
    return { diff: emptyDiff(), unreadable: err.message };
  }
}

/** Commits (worktree) and diffs what the agent left, with svc's git sandboxed. */
function collectDiff(ctx: RunContext, sandbox: RunSandbox): DiffResult {
  const { state } = ctx;
  const lockDir = state.worktree ? runWorktreeGitDir(state.repo_path, state.workdir) : null;
  const tree = treeGit(state.workdir, postAgentGit(ctx, sandbox), undefined, lockDir);
  const { run } = tree;
  let diff: DiffResult;
  if (state.worktree) {
    const message = `svc: ${state.brief.slice(0, 72)}\n\nRun ${state.source}/${state.run}`;
    const skipped = commitAll(tree, message, state.repo_path);
    for (const path of skipped) {
      ctx.note(`embedded repository ${JSON.stringify(path)} not committed (svc never commits a nested repository)`);
    }
    const head = git(state.workdir, ['rev-parse', 'HEAD'], {}, run).trim();
    ctx.update({ head_sha: head });
    diff = diffCommits(state.workdir, state.base_sha, head, run);
  } else {
    diff = diffWorkingTree(tree, state.base_tree ?? state.base_sha);
  }
  saveDiff(ctx, diff);
  return diff;
}

/** svc's git once an agent has worked in the tree: in a sandbox of its own, or on the host for an unsandboxed run. */
function postAgentGit(ctx: RunContext, { mode }: RunSandbox): GitRun {
  if (mode.kind === 'none') return hostGit;
  const home = homeOf(ctx.env);
  const svcHome = svcHomeOf(ctx.env);
  return (cwd, argv, { extra, scratch, timeout }) => {
    const plan = gitSandboxPlan({ workdir: cwd, repo: ctx.state.repo_path, scratch, home, svcHome, env: ctx.env });
    const fds = openSandboxFds();
    try {
      return runSync(bwrapArgv(mode.bwrap, plan, argv), {
        kind: 'tool', base: gitBaseEnv(process.env), extra, cwd, maxBuffer: 256 * 1024 * 1024, fds, timeout,
      });
    } finally {
      closeSandboxFds(fds);
    }
  };
}

/** The run's diff as its artifacts: the patch, and diffstat.json (its files and counts: the review risk reads it). */
export function saveDiff(ctx: RunContext, diff: DiffResult): void {
  ctx.saveArtifact('diff.patch', diff.patch);
  const { files, insertions, deletions, patch_sha256 } = diff;
  ctx.saveArtifact('diffstat.json', JSON.stringify({ files, insertions, deletions, patch_sha256 }, null, 2));
}

/** The run's receipt, issued after its gate closes; null when a stop was asked by then (a stopped run gets none). */
async function writeReceipt(
  ctx: RunContext, checks: CheckResult[], diff: DiffResult, runFailed: boolean, sandbox: RunSandbox,
  failure: RunFailure | null,
): Promise<Receipt | null> {
  // Closed first: a connection the close ends is recorded then, and the receipt's network section must count it.
  await sandbox.gate?.close();
  // After the last await before the receipt: a stop asked while the gate closed ends the run stopped, with no PR.
  if (ctx.stopRequested()) return null;
  const { state } = ctx;
  const now = new Date().toISOString();
  // The network section's own gaps (earlier sessions' egress records left out) are the verdict's too.
  const seen = sandbox.gate?.summary() ?? null;
  const { verdict, gaps } = decideVerdict({ checks, diffFiles: diff.files.length, runFailed, gaps: seen?.gaps });
  const { source, run, group_id, repo, branch, base_sha, head_sha, provider, started_at } = state;
  return saveReceipt(ctx, {
    type: RECEIPT_TYPE, version: 1, source, run, group_id, repo, branch, base_sha, head_sha,
    ...followsOf(state),
    spec_sha256: hash('sha256', readFileSync(join(ctx.dir, 'spec.md')), 'hex'), provider,
    checks: reportedChecks(checks),
    diff: receiptDiff(diff),
    cost: receiptCost(state),
    verdict, gaps, started_at, ended_at: state.ended_at ?? now, issued_at: now,
    network: sandbox.gate && seen ? confinedNetwork(sandbox.gate.policy, seen) : UNCONFINED,
    ...(state.provider_session?.resumed ? { resumed: state.provider_session.resumed } : {}),
    failure,
    ...(state.trace_id ? { trace_id: state.trace_id } : {}),
  });
}

function prBody(ctx: RunContext, receipt: Receipt): string {
  const checks = receipt.checks.map((c) => `| ${c.name} | ${c.required ? 'required' : 'optional'} | ` +
    `${c.exit_code === 0 ? 'passed' : `failed (${c.exit_code})`} |`);
  const cost = receipt.cost.usd === null ? 'not reported' : `$${receipt.cost.usd.toFixed(4)}`;
  const page = publicRunPage(ctx.env, receipt.source, receipt.run);
  const { source, run, provider, verdict } = receipt;
  const lead = `Run \`${source}/${run}\` by svc (${provider}). Verdict: **${verdict}**.`;
  return receiptMarkdown([lead, ...(page ? ['', `Run page: ${page}`] : [])], ctx.state.brief, [
    ...(checks.length
      ? ['| check | kind | result |', '|---|---|---|', ...checks, '']
      : ['No checks are configured in .svc/policy.json.', '']),
    `Diff: ${receipt.diff.files} files, +${receipt.diff.insertions} -${receipt.diff.deletions}. Cost: ${cost}.`,
    ...(receipt.gaps.length ? ['', `Gaps: ${receipt.gaps.join('; ')}.`] : []),
    '',
    'svc never merges or deploys; review and merge through your usual process.',
  ], receipt);
}

type PrPlan = Pick<RunPlan, 'policy' | 'push_target'>;

/** Why a --pr run with this receipt gets no pull request under its plan; null when it gets one. */
function prWithheld({ policy, push_target }: PrPlan, receipt: Receipt): string | null {
  if (receipt.diff.files === 0) return 'the diff is empty';
  if (policy.pr.open === 'never') return 'the policy says pr.open = "never"';
  if (!verdictAccepted(policy, receipt.verdict)) {
    return `verdict ${receipt.verdict} does not meet the policy's pr.open = "${policy.pr.open}"`;
  }
  // pr.open was "never" when the run was made, so no target was pinned; a policy changed since cannot add one.
  return push_target ? null : 'no push target was pinned when the run was made (pr.open was "never" then)';
}

/** Opens the PR when asked (--pr) and not withheld; otherwise records why not. */
export async function maybeOpenPr(ctx: RunContext, plan: PrPlan, receipt: Receipt): Promise<string | null> {
  const { state } = ctx;
  const { policy, push_target: target } = plan;
  if (!state.pr) return null;
  const reason = prWithheld(plan, receipt);
  if (reason !== null || !target) {
    ctx.event('pr', { opened: false, reason });
    ctx.say(`no pull request: ${reason}`);
    return null;
  }
  // A follow-up pushes to the pull request it continues, and opens none.
  if (state.follow_up) return pushFollowUpRun(ctx, target, receipt);
  try {
    const pr = await openPullRequest({
      workdir: state.workdir,
      branch: state.branch!,
      base: policy.pr.base ?? state.base_branch ?? 'main',
      title: `svc: ${state.brief.slice(0, 100)}`,
      body: prBody(ctx, receipt),
      draft: policy.pr.draft,
      target,
      env: ctx.env,
      watch: ctx.groupWatch(),
    });
    ctx.update({ pr_url: pr.url });
    ctx.event('pr', { opened: true, url: pr.url, number: pr.number, draft: policy.pr.draft, via: pr.via });
    ctx.say(`pull request opened: ${pr.url}`);
    return null;
  } catch (err) {
    // Kept in the run's log, error and failure: no remote's token git or gh quoted.
    const message = redactSecrets(errorMessage(err));
    ctx.event('pr', { opened: false, reason: message });
    return `Pull request not opened: ${message}`;
  }
}

/** What a follow-up run's receipt says it follows. */
function followsOf(state: RunState): Pick<ReceiptBody, 'follows'> {
  const f = state.follow_up;
  if (!f) return {};
  return { follows: { branch: f.branch, source: f.previous?.source ?? null, run: f.previous?.run ?? null,
    receipt: f.previous?.receipt ?? null } };
}

/** Why `state` cannot get its pull request now (its receipt and policy are checked after), or null. */
function prLaterRefusal(state: RunState): string | null {
  const id = `${state.source}/${state.run}`;
  if (!state.pr) return `Run ${id} was not started with --pr`;
  if (state.pr_url) return `Run ${id} already has its pull request: ${state.pr_url}`;
  if (state.status !== 'failed') return `Run ${id} is ${state.status}; only a failed run without its PR gets one`;
  if (state.failed_check) return `Run ${id} failed its required check "${state.failed_check}"`;
  return null;
}

/** The run's receipt, provided svc's own key signed it and it is about this run. */
function ownReceipt(dir: string, state: RunState, env: NodeJS.ProcessEnv): Receipt {
  const value = tryParseJson(readOrNull(join(artifactsDir(dir), 'receipt.json')) ?? '');
  if (value === undefined) throw new ConflictError(`Run ${state.source}/${state.run} has no receipt: verify it first`);
  const key = loadOrCreateSigningKey(svcHomeOf(env));
  const check = verifyReceipt(value, new Map([[key.kid, key.publicKey]]));
  if (!check.ok || !check.receipt) throw new ConflictError(`The run's receipt does not verify: ${check.message}`);
  if (check.receipt.run !== state.run || check.receipt.source !== state.source) {
    throw new ConflictError(`The receipt in run ${state.source}/${state.run} is about another run`);
  }
  return check.receipt;
}

/** `svc start --open-pr`: the PR under the run's plan with its receipt as signed (nothing re-run), or a typed error. */
export async function openPrLater(dir: string, env: NodeJS.ProcessEnv, say: (t: string) => void): Promise<RunState> {
  // Checked and recorded under the run's take lock: no resume, verify or other --open-pr takes it in between.
  const ctx = takeRun(dir, basename(dir), () => {
    // Refused on what the run is, it writes and ships nothing: a running run's worker may be the one writing it.
    const before = readState(dir);
    const refusal = prLaterRefusal(before);
    if (refusal !== null) throw new ConflictError(refusal);
    // So too when a worker holds it: another --open-pr, or a verify, that came after this one's wait.
    refuseHeldRun(before, 'open its pull request', projectOf(dir), dir);
    const opened = openRunContext(dir, env, { say });
    // Its writes and its ship are a worker's: a resume or a verify meanwhile waits, as for one (launch.ts).
    opened.enter();
    return opened;
  });
  // And so is a signal's end: the run has ended, nothing is left to stop, so it goes at once as a worker's last
  // writes do, leaving what it wrote to the next svc command's ship rather than to a `svc ship` by hand.
  const offSignal = onEndSignal(() => ctx.exitNow(false));
  try {
    const plan = readPlan(dir, env, ctx.state.worktree);
    const receipt = ownReceipt(dir, ctx.state, env);
    const withheld = prWithheld(plan, receipt);
    if (withheld !== null) throw new ConflictError(`Run ${ctx.state.source}/${ctx.state.run}: ${withheld}`);
    await checkPrPossible(plan.push_target!, env);
    ctx.event('log', { stream: 'svc', text: 'opening the pull request the run could not open before' });
    const error = await maybeOpenPr(ctx, plan, receipt);
    if (error !== null) {
      ctx.update({ error });
      throw new FailedError(error);
    }
    ctx.setStatus('succeeded', { error: null, failure: null });
    return ctx.state;
  } finally {
    try {
      await ctx.close();
    } finally {
      offSignal();
    }
  }
}

const CHECK_OUTPUT_CAP = 256 * 1024;

/** The checks, one after another in the run's working tree, each in a process group a stop can reach. */
async function runChecks(ctx: RunContext, policy: Policy, sandbox: RunSandbox): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  const files = protocolFiles(ctx);
  try {
    for (const { name, run: argv, required } of policy.checks) {
      if (ctx.stopRequested()) break;
      const started = Date.now();
      // A check runs code the agent wrote: in the sandbox, with no provider's login folders, and the limits svc
      // watches while the agent runs (its disk, its processes) hold for it too.
      const confined = agentSandbox(ctx, sandbox, argv[0]!, null, policy.limits);
      const run = spawnGroup(argv, {
        cwd: ctx.state.workdir,
        env: ctx.env,
        extra: { ...sandbox.env, SVC_RUN_ID: ctx.state.run },
        maxBytes: CHECK_OUTPUT_CAP,
        timeoutMs: policy.limits.check_timeout_s * 1000,
        sandbox: confined,
        watch: watchedLimits(policy.limits, ctx.state.workdir, files, confined),
        onInit: (init) => ctx.setChild({ ...run.identity, init }),
      });
      ctx.setChild(run.identity);
      const done = await run.done;
      const notes = [...done.truncated ? ['[output truncated]'] : [],
        ...done.endedBy ? [`[svc ended the check: ${done.endedBy.message}]`] : []];
      const output = notes.length ? Buffer.concat([done.output, Buffer.from(`\n${notes.join('\n')}\n`)]) : done.output;
      const artifact = `checks/${name.replace(/[^A-Za-z0-9._-]/g, '_')}.log`;
      ctx.saveArtifact(artifact, output);
      const exit_code = done.code;
      const duration_ms = Date.now() - started;
      const output_sha256 = hash('sha256', output, 'hex');
      results.push({ name, argv, required, exit_code, duration_ms, output_sha256, artifact });
      ctx.event('check', { name, exit_code, duration_ms, required, artifact });
      ctx.say(`check ${name} exit ${exit_code}`);
    }
  } finally {
    ctx.setChild(null);
  }
  return results;
}
