// After the provider: commit (worktree) and diff, run the checks, decide the verdict, sign the receipt, open the PR if
// allowed.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import type { RunContext } from './run-context.ts';
import type { Policy } from './policy.ts';
import { verdictAccepted } from './policy.ts';
import type { RunPlan } from './run-plan.ts';
import { commitAll, diffCommits, diffWorkingTree, headSha, type DiffResult } from './git.ts';
import { runChecks, type CheckResult } from './checks.ts';
import { decideVerdict } from './verdict.ts';
import { issueReceipt, confinedNetwork, RECEIPT_TYPE, UNCONFINED, type Receipt } from './receipt.ts';
import { loadOrCreateSigningKey } from '../keys.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { canonicalJson } from '../canonical-json.ts';
import { openPullRequest } from './pr.ts';
import { isoNow } from '../iso-time.ts';
import { errorMessage } from '../errors.ts';
import { fence } from './text.ts';
import { agentSandbox, agentExtraEnv, postAgentGit, type RunSandbox } from './sandbox.ts';

/** Commits (worktree) and diffs what the agent left, with svc's git in its own sandbox (src/engine/sandbox.ts). */
export function collectDiff(ctx: RunContext, sandbox: RunSandbox): DiffResult {
  const { state } = ctx;
  const base = state.base_sha ?? 'HEAD';
  const run = postAgentGit(ctx, sandbox);
  if (state.worktree) {
    const message = `svc: ${state.brief.slice(0, 72)}\n\nRun ${state.source}/${state.run}`;
    const skipped = commitAll(state.workdir, message, state.repo_path, run);
    for (const path of skipped) {
      const text = `embedded repository ${JSON.stringify(path)} not committed (svc never commits a nested repository)`;
      ctx.event('log', { stream: 'svc', text });
      ctx.say(text);
    }
    const head = headSha(state.workdir, run);
    ctx.update({ head_sha: head });
    // Gitlink moves too: the branch pushed carries them, so the receipt lists them.
    return diffCommits(state.workdir, base, head, run);
  }
  return diffWorkingTree(state.workdir, state.base_tree ?? base, run);
}

export function saveDiff(ctx: RunContext, diff: DiffResult): void {
  ctx.saveArtifact('diff.patch', diff.patch);
  const { files, insertions, deletions, patch_sha256 } = diff;
  ctx.saveArtifact('diffstat.json', JSON.stringify({ files, insertions, deletions, patch_sha256 }, null, 2));
}

export async function verifyWork(ctx: RunContext, policy: Policy, sandbox: RunSandbox): Promise<CheckResult[]> {
  return runChecks(policy.checks, {
    cwd: ctx.state.workdir,
    sandboxFor: (argv) => agentSandbox(ctx, sandbox, argv[0]!, null, policy.limits),
    timeoutMs: policy.limits.check_timeout_s * 1000,
    env: ctx.env,
    extra: { ...agentExtraEnv(sandbox), SVC_RUN_ID: ctx.state.run },
    onSpawn: (id) => ctx.setChild(id),
    saveArtifact: (p, c) => ctx.saveArtifact(p, c),
    event: (k, d) => {
      ctx.event(k, d);
      ctx.say(`check ${String(d.name)} exit ${String(d.exit_code)}`);
    },
    stopped: () => ctx.stopRequested(),
  }).finally(() => ctx.setChild(null));
}

export function writeReceipt(
  ctx: RunContext, checks: CheckResult[], diff: DiffResult, runFailed: boolean, sandbox: RunSandbox,
): Receipt {
  const { state } = ctx;
  const { verdict, gaps } = decideVerdict({ checks, diffFiles: diff.files.length, runFailed });
  const spec = readFileSync(join(ctx.dir, 'spec.md'));
  const receipt = issueReceipt(
    {
      type: RECEIPT_TYPE,
      version: 1,
      source: state.source,
      run: state.run,
      group_id: state.group_id,
      repo: state.repo,
      branch: state.branch,
      base_sha: state.base_sha,
      head_sha: state.head_sha,
      spec_sha256: createHash('sha256').update(spec).digest('hex'),
      provider: state.provider,
      checks: checks.map((c) => ({
        name: c.name,
        argv: c.argv,
        required: c.required,
        exit_code: c.exit_code,
        duration_ms: c.duration_ms,
        output_sha256: c.output_sha256,
      })),
      diff: {
        files: diff.files.length,
        insertions: diff.insertions,
        deletions: diff.deletions,
        patch_sha256: diff.patch_sha256,
        paths: diff.files.map((f) => f.path),
      },
      cost: { usd: state.cost_usd, tokens_in: state.tokens_in, tokens_out: state.tokens_out },
      verdict,
      gaps,
      started_at: state.started_at,
      ended_at: state.ended_at ?? isoNow(),
      issued_at: isoNow(),
      network: sandbox.mode.kind !== 'none' && sandbox.gate
        ? confinedNetwork(sandbox.gate.policy, sandbox.gate.summary()) : UNCONFINED,
    },
    loadOrCreateSigningKey(svcHomeOf(ctx.env)),
  );
  ctx.saveArtifact('receipt.json', JSON.stringify(receipt, null, 2) + '\n');
  ctx.event('receipt', { verdict, integrity: receipt.integrity, kid: receipt.kid, gaps });
  ctx.update({ verdict });
  ctx.say(`receipt issued: verdict ${verdict}`);
  return receipt;
}

export function prBody(ctx: RunContext, receipt: Receipt): string {
  const checks = receipt.checks.map(checkRow);
  const cost = receipt.cost.usd === null ? 'not reported' : `$${receipt.cost.usd.toFixed(4)}`;
  return [
    `Run \`${receipt.source}/${receipt.run}\` by svc (${receipt.provider}). Verdict: **${receipt.verdict}**.`,
    '',
    'Task (untrusted text from the run input):',
    fence(ctx.state.brief, 'text'),
    '',
    ...(checks.length
      ? ['| check | kind | result |', '|---|---|---|', ...checks, '']
      : ['No checks are configured in .svc/policy.json.', '']),
    `Diff: ${receipt.diff.files} files, +${receipt.diff.insertions} -${receipt.diff.deletions}. Cost: ${cost}.`,
    ...(receipt.gaps.length ? ['', `Gaps: ${receipt.gaps.join('; ')}.`] : []),
    '',
    'svc never merges or deploys; review and merge through your usual process.',
    '',
    '<details><summary>Evidence Receipt (verify with <code>svc receipt verify</code>)</summary>',
    '',
    '<!-- svc-receipt -->',
    fence(canonicalJson(receipt), 'json'),
    '',
    '</details>',
    '',
  ].join('\n');
}

/** One row of the PR body's table of checks. */
function checkRow(c: Receipt['checks'][number]): string {
  const result = c.exit_code === 0 ? 'passed' : `failed (${c.exit_code})`;
  return `| ${c.name} | ${c.required ? 'required' : 'optional'} | ${result} |`;
}

/**
 * Opens the PR only when asked (--pr), the diff is non-empty and the policy accepts the verdict; otherwise records why
 * not.
 */
export async function maybeOpenPr(
  ctx: RunContext, { policy, push_target: target }: Pick<RunPlan, 'policy' | 'push_target'>, receipt: Receipt,
): Promise<string | null> {
  const { state } = ctx;
  if (!state.pr) return null;
  let reason: string | null = null;
  if (receipt.diff.files === 0) reason = 'the diff is empty';
  else if (policy.pr.open === 'never') reason = 'the policy says pr.open = "never"';
  else if (!verdictAccepted(policy, receipt.verdict)) {
    reason = `verdict ${receipt.verdict} does not meet the policy's pr.open = "${policy.pr.open}"`;
  }
  // pr.open was "never" when the run was made, so no target was pinned; a policy changed since cannot add one.
  else if (!target) reason = 'no push target was pinned when the run was made (pr.open was "never" then)';
  if (reason !== null || !target) {
    ctx.event('pr', { opened: false, reason });
    ctx.say(`no pull request: ${reason}`);
    return null;
  }
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
    });
    ctx.update({ pr_url: pr.url });
    ctx.event('pr', { opened: true, url: pr.url, number: pr.number, draft: policy.pr.draft, via: pr.via });
    ctx.say(`pull request opened: ${pr.url}`);
    return null;
  } catch (err) {
    const message = errorMessage(err);
    ctx.event('pr', { opened: false, reason: message });
    return `Pull request not opened: ${message}`;
  }
}
