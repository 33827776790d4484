// The worker: drives one run through provider → checks → receipt → PR (mode "start"/"resume"), or re-verifies it
// ("verify").
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { openRunContext, type RunContext } from './run-context.ts';
import { loadPolicy, type Policy } from './policy.ts';
import { passedEnvFor, runSettings } from './run-settings.ts';
import { loadOperatorConfig } from './operator-config.ts';
import { cappedLimits } from './setting-authority.ts';
import { createWorktree } from './git.ts';
import { identityOf, signalGroup } from './proc-group.ts';
import { isChildOf } from './worker-identity.ts';
import { runProvider } from './provider-phase.ts';
import { collectDiff, saveDiff, verifyWork, writeReceipt, maybeOpenPr } from './finish-phase.ts';
import { type WorkerMode } from './run-state.ts';
import { isoNow } from '../iso-time.ts';
import { TERMINAL } from '../run-json.ts';
import { worktreeDir } from './paths.ts';
import { runSandboxMode, type RunSandbox } from './sandbox.ts';
import { prepareMemoryCgroup } from '../spawn/memory-cgroup.ts';

const MIB = 1024 * 1024;
import { openRunGate } from './egress.ts';
import { signsLater, evidenceOf, EVIDENCE_ARTIFACT, type RunEvidence } from './evidence.ts';
import { failedRequiredCheck, requiredCheckError, type CheckResult } from './checks.ts';
import { pushTargetFor } from './launch.ts';
import { errorMessage } from '../errors.ts';

function prepareWorkdir(ctx: RunContext): void {
  const { state } = ctx;
  if (!state.worktree) return;
  const path = worktreeDir(state.repo_path, state.run);
  if (!existsSync(path)) createWorktree(state.repo_path, path, state.branch!, state.base_sha ?? 'HEAD');
  if (state.workdir !== path) ctx.update({ workdir: path });
}

/** `checkAnyway`: a limit ended the provider, and the checks still say what its work is worth (not_verified). */
/**
 * How the provider phase ended: `failure` is null when it succeeded. A run a limit ended (`limit`) or its budget
 * ended (`over-budget`) still has its checks run on what exists; one past its budget opens no PR and is `stopped`.
 */
interface Ending {
  kind: 'done' | 'failed' | 'limit' | 'over-budget';
  failure: string | null;
  exitCode: number | null;
}

/** The one finish sequence: diff, checks, the receipt (or the pod's evidence), the PR when allowed, the status. */
async function finish(ctx: RunContext, policy: Policy, sandbox: RunSandbox, end: Ending): Promise<void> {
  const diff = collectDiff(ctx, sandbox);
  saveDiff(ctx, diff);
  const checks = end.kind === 'failed' ? [] : await verifyWork(ctx, policy, sandbox);
  if (ctx.stopRequested()) return;
  const ended = isoNow();
  ctx.update({ ended_at: ended });
  const overBudget = end.kind === 'over-budget';
  if (signsLater(ctx.env)) {
    return leaveEvidence(ctx, overBudget ? 'over_budget' : 'finished', end.failure, end.exitCode, checks);
  }
  const receipt = writeReceipt(ctx, checks, diff, end.failure !== null, sandbox);
  const checkFailed = end.failure === null ? failedRequiredCheck(checks) : null;
  let error = end.failure ?? (checkFailed ? requiredCheckError(checkFailed) : null);
  if (!error) error = await maybeOpenPr(ctx, policy, receipt);
  else if (ctx.state.pr) ctx.event('pr', { opened: false, reason: `verdict ${receipt.verdict}: ${error}` });
  const status = overBudget ? 'stopped' : error ? 'failed' : 'succeeded';
  const failed_check = overBudget ? undefined : checkFailed?.name ?? null;
  ctx.setStatus(status, {
    error, ...(failed_check === undefined ? {} : { failed_check }), ended_at: ended, exit_code: end.exitCode,
    question: null,
  });
}

/**
 * In a Kubernetes pod's run container (SVC_SIGN_LATER=1, no key there): the evidence for the signer container, and
 * the run stays `running`: the signer issues the receipt, opens the PR and sets the final status (src/pod/sign.ts).
 */
function leaveEvidence(
  ctx: RunContext, outcome: RunEvidence['outcome'], error: string | null, exitCode: number | null,
  checks: CheckResult[],
): void {
  const evidence = evidenceOf(ctx.state.run, outcome, error, exitCode, checks);
  ctx.saveArtifact(EVIDENCE_ARTIFACT, JSON.stringify(evidence, null, 2) + '\n');
  ctx.event('evidence', { outcome, checks: checks.length });
  ctx.say('evidence written: the signer container issues the receipt');
}

/** A run made by an older svc has no pinned push target: it is pinned here, still before this worker's agent runs. */
function pinPushTarget(ctx: RunContext): void {
  if (ctx.state.push_target !== undefined) return;
  ctx.update({ push_target: pushTargetFor(ctx.state.repo_path, ctx.state.pr) });
}

const RESUMED_NOTE =
  'This run was resumed: your earlier changes are already in the working tree. Continue the task from there.';

/** The project's policy with its limits held within the operator's caps (each lowered one said in the log). */
function runPolicy(ctx: RunContext): Policy {
  const policy = loadPolicy(ctx.state.repo_path);
  const { limits, notes } = cappedLimits(policy.limits, loadOperatorConfig(ctx.env).limits);
  for (const note of notes) ctx.event('log', { stream: 'svc', text: note });
  return notes.length ? { ...policy, limits } : policy;
}

async function startOrResume(ctx: RunContext, mode: WorkerMode): Promise<void> {
  const policy = runPolicy(ctx);
  pinPushTarget(ctx);
  const { state } = ctx;
  const workdir = state.worktree ? worktreeDir(state.repo_path, state.run) : state.repo_path;
  const settings = runSettings(state.provider || null, state.repo_path, workdir, ctx.env);
  // What the settings rule left out of this run (a server-started run's refusals among them), before the agent starts.
  for (const note of settings.notes) {
    ctx.event('log', { stream: 'svc', text: note });
    ctx.say(note);
  }
  const provider = settings.provider;
  const sandbox = await withGate(ctx, policy, settings.passedEnv);
  try {
    prepareWorkdir(ctx);
    const spec = readFileSync(join(ctx.dir, 'spec.md'), 'utf8');
    const notes = mode === 'resume' ? [RESUMED_NOTE] : [];
    const outcome = await runProvider(ctx, provider, spec, {
      maxUsd: policy.max_usd, notes, sandbox, limits: policy.limits,
    });
    if (outcome.kind === 'stopped' || ctx.stopRequested()) return;
    await finish(ctx, policy, sandbox, outcome.kind === 'done'
      ? { kind: 'done', failure: null, exitCode: 0 }
      : { kind: outcome.kind, failure: outcome.error, exitCode: outcome.exitCode });
  } finally {
    await sandbox.gate?.close();
  }
}

/** The run's sandbox mode and, when sandboxed, its egress gate (closed by the caller once the checks are done). */
async function withGate(ctx: RunContext, policy: Policy, passed: Record<string, string>): Promise<RunSandbox> {
  const mode = runSandboxMode(ctx, policy);
  if (mode.kind === 'none') return { mode, gate: null, passed };
  // The first sandbox's memory cgroup is made while the gate and the worktree are prepared (memory-cgroup.ts).
  prepareMemoryCgroup(policy.limits.memory_mb * MIB);
  return { mode, gate: await openRunGate(ctx, policy), passed };
}

async function reverify(ctx: RunContext): Promise<void> {
  const policy = runPolicy(ctx);
  const sandbox = await withGate(ctx, policy, passedEnvFor(ctx.state.repo_path, ctx.state.workdir, ctx.env));
  try {
    ctx.event('log', { stream: 'svc', text: 'verify: re-running checks' });
    const diff = collectDiff(ctx, sandbox);
    saveDiff(ctx, diff);
    const checks = await verifyWork(ctx, policy, sandbox);
    if (ctx.stopRequested()) return;
    // A run its checks failed is judged again on these checks; one that failed before them stays failed.
    const failedBeforeChecks = ctx.state.status === 'failed' && ctx.state.error !== null && !ctx.state.failed_check;
    writeReceipt(ctx, checks, diff, failedBeforeChecks, sandbox);
  } finally {
    await sandbox.gate?.close();
  }
}

/** Runs in the detached worker process; the exit code is 0 when the run succeeded. */
export async function executeRun(
  dir: string, env: NodeJS.ProcessEnv, mode: WorkerMode, say: (t: string) => void,
): Promise<number> {
  const ctx = openRunContext(dir, env, { ship: env.SVC_SHIP !== '0', say });
  const onSignal = () => ctx.requestStop('signal');
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('SIGHUP', onSignal);
  // Whatever happens to this process, the provider's group must not outlive it.
  // ctx.state.child may still be what state.json said at start, so it gets the same owner check as any stopper's.
  const childOwner = isChildOf(ctx.state.run);
  process.on('exit', () => {
    if (ctx.state.child) signalGroup(ctx.state.child, 'SIGKILL', childOwner);
  });
  try {
    if (mode !== 'verify') {
      if (ctx.state.status === 'stopping' || (mode === 'start' && ctx.state.status === 'stopped')) {
        ctx.setStatus('stopped', { ended_at: ctx.state.ended_at ?? isoNow() });
        return 1;
      }
      ctx.update({ ...identityOf(process.pid), ended_at: null, error: null });
      ctx.setStatus('running');
      await startOrResume(ctx, mode);
    } else {
      await reverify(ctx);
    }
    if (ctx.stopRequested() && !TERMINAL.has(ctx.state.status)) {
      ctx.setStatus('stopped', { ended_at: isoNow(), question: null, child: null });
    }
  } catch (err) {
    const message = errorMessage(err);
    if (mode === 'verify') ctx.event('error', { message });
    else ctx.setStatus('failed', { error: message, ended_at: isoNow(), question: null });
  } finally {
    if (ctx.state.child) signalGroup(ctx.state.child, 'SIGKILL', childOwner);
    ctx.update({ child: null, pid: mode === 'verify' ? ctx.state.pid : null });
    await ctx.close();
  }
  return ctx.state.status === 'succeeded' ? 0 : 1;
}
