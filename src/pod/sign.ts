// `svc pod sign` (docs/deploy.md "Receipts from pods"): the only container that mounts the signing key. It runs no code
// of the repository or the run, and takes from the run container's files only what it labels "reported".
import { runFailure } from '../run-json.ts';
import { orNull } from '../spawn/tree.ts';
import { readFileSync } from 'node:fs';
import { hash } from 'node:crypto';
import { join } from 'node:path';
import { openRunContext, withCost, type RunContext } from '../engine/run-context.ts';
import { runDir } from '../engine/paths.ts';
import { parseTraceparent } from '../trace.ts';
import { makeRunKey, readState, writeState, type RunState } from '../engine/run-state.ts';
import type { CostFigures, MeteredCost } from '../run-json.ts';
import { countOrNull, figure, obj, str } from '../untrusted.ts';
import {
  saveReceipt, readEvidence, receiptCost, receiptDiff, EVIDENCE_ARTIFACT, RECEIPT_TYPE, type Receipt,
  type ReceiptBody, type ReceiptNetwork, type ReportedCheck, type RunEvidence, decideVerdict, failedRequiredCheck,
  requiredCheckError,
} from '../engine/receipt.ts';
import { maybeOpenPr, saveDiff } from '../engine/finish-phase.ts';
import type { PushTarget } from '../engine/git-push.ts';
import type { Policy } from '../engine/policy.ts';
import { podRepoName, readSeal, readSealedRunKey, storeRun, type Seal } from './seal.ts';
import { verifyCommits, policyAt, UnverifiableError } from './verified-commits.ts';
import { repoSlug } from '../engine/git.ts';
import { emptyDiff, type DiffResult } from '../engine/diff.ts';
import { RefusedError, errorMessage } from '../errors.ts';
import { podGateNetwork, type PodGateNetwork } from './gate-network.ts';
import { copyRunFolder } from './copied-run.ts';
import { runSpent } from '../gate/budgets.ts';
import { isValidSegment } from '../engine/ids.ts';
import { launcherOrigin } from '../engine/spec.ts';
import { safeJson } from '../safe-json.ts';

interface SignOptions {
  run: string;
  source: string;
  /** The shared workspace (read-only here). */
  workspace: string;
  sealedDir: string;
  pr: boolean;
  env: NodeJS.ProcessEnv;
  say: (text: string) => void;
}

/** signRun's options as it passes them on, with the ended_at the copied state.json gave: the run container's word,
 * kept aside (the rows shipped while the signer judges carry none) for the run's end and the receipt. */
type Signing = SignOptions & { claimedEnd: string | null };

/** Fields the signer establishes itself, and those it copies from the run container's report. */
const VERIFIED = ['source', 'run', 'group_id', 'repo', 'branch', 'base_sha', 'head_sha', 'diff', 'checks[].name',
  'checks[].argv', 'checks[].required', 'verdict', 'gaps', 'issued_at'];
const REPORTED = ['checks[].exit_code', 'checks[].duration_ms', 'checks[].output_sha256', 'spec_sha256', 'provider',
  'cost', 'started_at', 'ended_at', 'whether the run itself failed'];

/** The base policy's checks with the results the run container reported for them; anything else is a gap. */
export function reconcileChecks(
  policy: Policy, reported: ReportedCheck[],
): { checks: ReportedCheck[]; gaps: string[] } {
  const gaps: string[] = [];
  const checks = policy.checks.map((spec) => {
    const r = reported.find((c) => c.name === spec.name);
    const same = r && r.argv.length === spec.run.length && r.argv.every((a, i) => a === spec.run[i]);
    const how = r ? 'changed' : 'not run';
    if (!same) gaps.push(`check "${spec.name}" of the base commit's policy was ${how} in the run container`);
    return {
      name: spec.name, argv: spec.run, required: spec.required, exit_code: same ? r.exit_code : null,
      duration_ms: same ? r.duration_ms : 0, output_sha256: same ? r.output_sha256 : '',
    };
  });
  for (const r of reported) {
    if (policy.checks.some((c) => c.name === r.name)) continue;
    gaps.push(`check "${r.name}" is not in the base commit's policy: ignored`);
  }
  return { checks, gaps };
}

/** `head` and `diff` are null when the signer could not establish them (a not_verified receipt). */
function receiptBody(
  ctx: RunContext, opts: Signing, seal: Seal, diff: DiffResult | null, head: string | null, checks: ReportedCheck[],
  verdict: { verdict: Receipt['verdict']; gaps: string[] }, network: ReceiptNetwork | null,
): ReceiptBody {
  const s = ctx.state;
  const issued = new Date().toISOString();
  const spec = orNull(() => readFileSync(join(ctx.dir, 'spec.md')));
  // Only with a gate are the network and `metered` the gate's own; without, state.json's is the run container's.
  const metered = network !== null && typeof s.metered?.cost_usd === 'number';
  const verified = [...VERIFIED, ...(network ? ['network'] : []), ...(metered ? ['cost'] : [])];
  const reported = metered ? [...REPORTED.filter((f) => f !== 'cost'), 'cost.reported'] : REPORTED;
  return {
    type: RECEIPT_TYPE, version: 1, source: opts.source, run: opts.run, group_id: opts.run,
    repo: (seal.origin_url ? repoSlug(seal.origin_url) : null) ?? str(s.repo)?.slice(0, 500) ?? 'workspace',
    branch: `svc/${opts.run}`, base_sha: seal.base_sha, head_sha: head,
    spec_sha256: spec === null ? '' : hash('sha256', spec, 'hex'),
    provider: str(s.provider)?.slice(0, 500) ?? 'unknown',
    checks, diff: receiptDiff(diff ?? { files: [], insertions: 0, deletions: 0, patch_sha256: '' }),
    // With a gate: its metered figures (signerCost), the run container's report beside them.
    cost: network ? receiptCost(s)
      : { usd: figure(s.cost_usd), tokens_in: figure(s.tokens_in), tokens_out: figure(s.tokens_out) },
    verdict: verdict.verdict, gaps: verdict.gaps, started_at: str(s.started_at)?.slice(0, 500) ?? issued,
    ended_at: ended(ctx, opts.claimedEnd).ended_at, issued_at: issued,
    attestation: { by: 'pod-signer', verified, reported },
    ...(network ? { network } : {}),
    ...(s.trace_id ? { trace_id: s.trace_id } : {}),
  };
}

/** The run's cost as the signer states it: the run container's figures kept as reported (the `reported` of the
 * state.json it wrote, or the figures of one without it), `metered` only the gate's (null: nothing metered yet, while
 * the signer judges). */
function signerCost(s: RunState, metered: MeteredCost | null) {
  const said = s.reported === undefined ? s : obj(s.reported);
  const { cost_usd, tokens_in, tokens_out } = said;
  const reported = {
    cost_usd: figure(cost_usd), tokens_in: countOrNull(tokens_in), tokens_out: countOrNull(tokens_out),
  };
  return withCost({ ...s, reported: null, metered: null }, { reported, ...(metered ? { metered } : {}) });
}

/** The run's stop at the max_usd the gate held it to: a pod's budget is not raised (docs/gate.md "Budgets"). It is
 * reached by what the run spent (runSpent): the gate's metered cost, or the larger of it and the run container's
 * report where the gate may have missed a call (a CONNECT tunnel). */
function gateBudgetStop(gate: PodGateNetwork, reported: CostFigures | null): string | null {
  const m = gate.metered;
  if (gate.maxUsd === null) return null;
  const budget = `$${gate.maxUsd.toFixed(2)}`;
  // An unpriced call leaves the run's cost unknown: the gate refused the run from there, and so do we. A call of
  // unknown usage is in the cost at its bounds.
  if (m !== null && m.unpriced > 0) {
    return `Stopped at the max_usd budget of ${budget}: the gate could not price ${m.unpriced} model call(s)`;
  }
  // So does a call counted at bounds its request could not set for certain: its cost may be more.
  if (m?.doubtful) {
    return `Stopped at the max_usd budget of ${budget}: the gate could not count ${m.doubtful} model call(s) ` +
      'for certain';
  }
  const spent = runSpent({ metered: m, reported });
  if (spent < gate.maxUsd) return null;
  const by = (m?.cost_usd ?? 0) >= spent ? 'metered by the gate' : 'as the run container reported';
  return `Stopped at the max_usd budget: spent $${spent.toFixed(2)} of ${budget}, ${by}`;
}

/** A time the run container wrote (text), held between `from` (epoch ms) and now; `fallback` when it is no time. */
function heldTime(claimed: unknown, from: number, fallback: number): string {
  const said = typeof claimed === 'string' ? Date.parse(claimed) : NaN;
  const at = Number.isNaN(said) ? fallback : Math.min(Math.max(said, Number.isNaN(from) ? said : from), Date.now());
  return new Date(at).toISOString();
}

/** The fields every end of the run sets: the run container's ended_at (when it is a time's text) or now, held between
 * the run's start and now. */
function ended(ctx: RunContext, claimed: string | null) {
  const ended_at = heldTime(claimed, Date.parse(String(ctx.state.started_at)), Date.now());
  return { question: null, child: null, ended_at };
}

/** As many `egress` events as a local run sends at most; egress.jsonl keeps every record the gate gave. */
const EGRESS_EVENTS = 500;

/** Ends the run without a receipt: the signer could not establish what it would sign. */
function refuse(ctx: RunContext, claimedEnd: string | null, message: string): void {
  ctx.event('receipt', { issued: false, reason: message });
  const failure = runFailure('policy', message);
  ctx.setStatus('failed', { ...ended(ctx, claimedEnd), error: `No receipt: ${message}`, failure });
}

/** The workspace's commits could not be established: a signed not_verified receipt saying why, and no PR. */
function signUnverified(
  ctx: RunContext, opts: Signing, seal: Seal, reason: string, network: PodGateNetwork | null,
): void {
  const gaps = [`the signer could not verify the run's commits: ${reason}`, ...(network?.gaps ?? [])];
  ctx.update({ base_sha: seal.base_sha, head_sha: null, branch: null, pr: opts.pr });
  saveReceipt(ctx, receiptBody(ctx, opts, seal, null, null, [], { verdict: 'not_verified', gaps },
    network?.network ?? null));
  if (opts.pr) ctx.event('pr', { opened: false, reason: `verdict not_verified: ${reason}` });
  const failure = runFailure('policy', reason);
  ctx.setStatus('failed', { ...ended(ctx, opts.claimedEnd), error: `Not verified: ${reason}`, failure });
}

/** Checks the commits, judges by the base policy and signs. */
function signReceipt(
  ctx: RunContext, opts: Signing, seal: Seal, evidence: RunEvidence, network: PodGateNetwork | null,
): { receipt: Receipt; policy: Policy; checks: ReportedCheck[]; target: PushTarget | null } {
  const head = typeof ctx.state.head_sha === 'string' ? ctx.state.head_sha : '';
  const branch = `svc/${opts.run}`;
  const scratch = join(opts.env.HOME ?? '/tmp', 'git');
  const commits = verifyCommits(opts.workspace, scratch, seal.base_sha, head, branch, seal.origin_url);
  // The PR is pushed from the signer's own repository to the sealed origin, whatever the copied plan pinned.
  const target = seal.origin_url ? { url: seal.origin_url, repo: repoSlug(seal.origin_url) } : null;
  ctx.update({
    base_sha: seal.base_sha, head_sha: head, branch, base_branch: seal.base_branch, pr: opts.pr, workdir: commits.repo,
  });
  saveDiff(ctx, commits.diff);
  const policy = policyAt(commits.repo, seal.base_sha);
  const runFailed = evidence.error !== null;
  const reconciled = runFailed ? { checks: [], gaps: [] } : reconcileChecks(policy, evidence.checks);
  const checks = reconciled.checks;
  // A required check missing or changed already failed the verdict (its exit code is null); anything else is a gap.
  const gaps = [...reconciled.gaps, ...(network?.gaps ?? [])];
  const verdict = decideVerdict({ checks, diffFiles: commits.diff.files.length, runFailed, gaps });
  const receipt = saveReceipt(ctx,
    receiptBody(ctx, opts, seal, commits.diff, head, checks, verdict, network?.network ?? null));
  return { receipt, policy, checks, target };
}

/** The gate's account of the run, read once for every way the run ends (stopped, refused, not verified, signed):
 * its records as the run's evidence, as a local run's gate leaves them (events and egress.jsonl), and its metered
 * cost as the run's, the run container's figures kept as reported (docs/gate.md "Metered cost"). */
async function readGate(ctx: RunContext, opts: Signing, seal: Seal): Promise<PodGateNetwork | null> {
  const gate = await podGateNetwork(opts.env, opts.run, seal.sealed_at);
  if (!gate) return null;
  if (gate.problem) ctx.say(`${gate.problem}: network not confined`);
  for (const record of gate.records.slice(0, EGRESS_EVENTS)) ctx.event('egress', { ...record });
  const lines = gate.records.map((r) => `${JSON.stringify(r)}\n`).join('');
  ctx.saveArtifact('egress.jsonl', lines);
  ctx.update(signerCost(ctx.state, gate.metered));
  return gate;
}

/** The run's final status, and its pull request when asked for and allowed, as `svc start` would end it. Nothing is
 * awaited from here to the pull request: a stop comes only in a batch's answer, taken while something is awaited. */
async function judge(
  ctx: RunContext, opts: Signing, seal: Seal, said: RunEvidence, gate: PodGateNetwork | null,
): Promise<void> {
  const stop = gate && said.outcome !== 'over_budget' ? gateBudgetStop(gate, ctx.state.reported ?? null) : null;
  const evidence: RunEvidence = stop ? { ...said, outcome: 'over_budget', error: stop } : said;
  let signed: ReturnType<typeof signReceipt>;
  try {
    signed = signReceipt(ctx, opts, seal, evidence, gate);
  } catch (err) {
    if (!(err instanceof UnverifiableError)) throw err;
    signUnverified(ctx, opts, seal, err.message, gate);
    return;
  }
  const { receipt, policy, checks, target } = signed;
  const end = { ...ended(ctx, opts.claimedEnd), exit_code: evidence.exit_code };
  if (evidence.outcome === 'over_budget') {
    const reason = `verdict ${receipt.verdict}: ${evidence.error ?? 'over budget'}`;
    if (opts.pr) ctx.event('pr', { opened: false, reason });
    ctx.setStatus('stopped', { ...end, error: evidence.error, failure: runFailure('budget', reason) });
    return;
  }
  const failed = evidence.error === null ? failedRequiredCheck(checks) : null;
  let error = evidence.error ?? (failed ? requiredCheckError(failed) : null);
  const noOrigin = opts.pr && !seal.origin_url;
  if (!error && noOrigin) error = `Pull request not opened: ${seal.origin_problem ?? 'no origin remote'}`;
  else if (!error) error = await maybeOpenPr(ctx, { policy, push_target: target }, receipt);
  else if (opts.pr) ctx.event('pr', { opened: false, reason: `verdict ${receipt.verdict}: ${error}` });
  // The run's failure class is reported (the agent could write it): with a gate, `config` stands only where the gate
  // answered in full and metered no model call.
  const noModelCall = !gate || (!gate.problem && (gate.metered?.calls ?? 0) === 0);
  const reported = evidence.failure_class === 'config' && !noModelCall ? 'agent' : evidence.failure_class ?? 'agent';
  const cls = evidence.error !== null ? reported : failed ? 'checks' : 'infra';
  const failure = error ? runFailure(cls, error) : null;
  ctx.setStatus(error ? 'failed' : 'succeeded', { ...end, error, failed_check: failed?.name ?? null, failure });
}

/** Signs (or refuses) the run the pod spec named and ships it; returns its final state. */
export async function signRun(opts: SignOptions): Promise<RunState> {
  const work = join(opts.env.HOME ?? '/tmp', 'work');
  const dir = runDir(work, opts.run);
  const key = readSealedRunKey(opts.sealedDir);
  // The run moves onto the sealed key first, in a batch of the signer's own: a batch carrying the run folder's events
  // and artifacts, which the agent wrote, can be refused whole for one bad event (engine/run-event.ts), and would leave
  // the run bound to the handed key, which the agent can read. The move also replaces the row the handed key stored
  // (the agent's claims), so a gone Job's outcome is read only from what this signer shipped. A refusal fails it, and
  // so does no answer after a few tries: the stops it takes come nowhere else.
  const seal = readSeal(opts.sealedDir);
  const moved = await storeRun(opts.env, opts.run, seal, { sealed: key });
  if (moved.unstored) opts.say(`svc pod sign: the run is not moved onto the sealed key yet (${moved.unstored})\n`);
  copyRunFolder(runDir(opts.workspace, opts.run), dir);
  // The Control Plane moves the run onto this key from the one handed to the run container (ingest-apply.ts).
  makeRunKey(dir, key);
  const copied = readState(dir);
  if (copied.run !== opts.run || copied.source !== opts.source) {
    // The copy's values are the agent's: quoted unless plain ids, so they carry no line into the signer's log.
    const shown = (value: unknown) => (isValidSegment(value) ? value : safeJson(String(value).slice(0, 100)));
    const named = `${shown(copied.source)}/${shown(copied.run)}`;
    throw new RefusedError(`The run folder names ${named}, not ${opts.source}/${opts.run}`);
  }
  // What only the signer may say is cleared before it ships anything: the copied state.json is the agent's to write,
  // and the run is moved, so a row of a terminal status would be a gone Job's outcome (kubernetes-executor.ts) should
  // the signer die while it judges, which the agent can cause. Its claim of a stop is not one (a stop asked is below).
  const signing: Signing = { ...opts, claimedEnd: typeof copied.ended_at === 'string' ? copied.ended_at : null };
  // Nor is the run ended, nor its cost metered, before the signer reads the gate: stats-store.ts counts a row with an
  // ended_at as ended, and `metered` is only ever the gate's (signerCost); until then the cost shown is the run
  // container's report.
  const cost = signerCost(copied, null);
  // The start too is held between the seal (before any agent code ran) and now: every end is clamped against it.
  const sealedAt = Date.parse(seal.sealed_at);
  const started = heldTime(copied.started_at, sealedAt, Number.isNaN(sealedAt) ? Date.now() : sealedAt);
  // The repository and origin the trigger gave the pod spec: the copy's are the agent's word, and the run's stats and
  // filters name its repository. The row's name is the one the trigger routed the job to, as a local run's
  // (runRepoName); the receipt's is the sealed origin's first (receiptBody), where its pull request goes and which a
  // merge checks it against. The copy's only where neither the spec nor the seal names one.
  writeState(dir, {
    ...copied, ...cost, started_at: started, repo: podRepoName(opts.env, seal) || copied.repo,
    origin: launcherOrigin(opts.env) ?? copied.origin,
    // Every run a trigger starts is a group of its own (a pod's `svc start --run-id`; a retry is the Control Plane's,
    // of a folder it holds): the copy's group is the agent's word, which would list this run among another's attempts.
    group_id: opts.run,
    ended_at: null, status: 'running', error: null, exit_code: null, failure: null,
    failed_check: null, question: null, branch: null,
    repo_path: work, pid: null, pgid: null, proc_start: null, child: null, verdict: null, pr_url: null,
    // The trace is the job's, from the pod spec's SVC_TRACEPARENT: the copied state could name another run's.
    trace_id: parseTraceparent(opts.env.SVC_TRACEPARENT)?.traceId ?? null, updated_at: new Date().toISOString(),
  });
  // A stop the first batch took (asked after the run container's last batch), or the run's deletion, is this signer's
  // to honour, whatever the copied state.json (the agent's to write) says of the run's status.
  // Its events go after every seq the Control Plane stored: the run container's (the agent's to ship, past what its
  // events.jsonl holds, or in one over the copy's cap) would take the seqs of the signer's, stored first, kept. A seq
  // (stored, or the copy's) with no safe integers after it refuses the run (openEventLog).
  const ctx = openRunContext(dir, opts.env, {
    ship: true, say: opts.say, control: moved.control, deletionStops: true, seqAfter: moved.lastSeq,
    // Its ship is the run's only record from the pod: it takes the time it needs, as no resume here waits for it.
    lastShipMs: null,
  });
  try {
    // Replaced on the Control Plane whatever ends the run: the diff.patch and diffstat.json the run container shipped
    // under its handed key are the agent's, and review risk and get_run_diff read them as the run's. signReceipt
    // writes the diff of the commits it checked over this; a stop, a refusal or unverified commits leave it empty.
    saveDiff(ctx, emptyDiff());
    // A stop asked before: taken by the run container's worker (a run stopped before its checks leaves no evidence,
    // src/engine/worker.ts), or by a move whose answer was lost; the Control Plane says so (ingest's stop_asked).
    if (moved.stopAsked) ctx.requestStop('a stop request through the Control Plane');
    // Before any ending, so that each states the gate's metered cost; its batches may take a stop meanwhile. What
    // fails here refuses the run where judging it would (below), unless it was stopped.
    const gate = await readGate(ctx, signing, seal).catch((err: unknown) => ({ unread: err }));
    // A stop taken before the signer signs, asked before it began or while it read the gate: as a local run stopped
    // after its checks, before its receipt (src/engine/finish-phase.ts), no receipt and no pull request.
    const stoppedBy = ctx.stoppedBy();
    if (stoppedBy !== null) {
      const failure = runFailure('stopped', `stopped by ${stoppedBy}`);
      ctx.setStatus('stopped', { ...ended(ctx, signing.claimedEnd), failure });
      return ctx.state;
    }
    let evidence: RunEvidence | null = null;
    try {
      evidence = readEvidence(readFileSync(join(dir, 'artifacts', EVIDENCE_ARTIFACT), 'utf8'), opts.run);
    } catch (err) {
      // Not stopped (above), a run without evidence ends failed, whatever it claims: its claimed stop and reason too.
      refuse(ctx, signing.claimedEnd, `the run container left no usable evidence (${errorMessage(err)})`);
    }
    if (evidence) {
      try {
        if (gate !== null && 'unread' in gate) throw gate.unread;
        await judge(ctx, signing, seal, evidence, gate);
      } catch (err) {
        refuse(ctx, signing.claimedEnd, errorMessage(err));
      }
    }
  } finally {
    await ctx.close();
  }
  return ctx.state;
}
