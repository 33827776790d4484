// The Evidence Receipt (DESIGN §6) with the verdict its checks give, and the evidence a Kubernetes pod's run container
// leaves for its signer.
import { createHash, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { canonicalJson } from '../canonical-json.ts';
import { keyIdOf, loadOrCreateSigningKey, type SigningKey } from '../keys.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { orNull } from '../spawn/tree.ts';
import type { CostFigures, MeteredCost, RunFailure, RunJson, Verdict } from '../run-json.ts';
import type { EgressDenial, EgressHost } from '../gate/evidence.ts';
import { RefusedError } from '../errors.ts';
import { obj, oneOf, str, tryParseJson } from '../untrusted.ts';
import { fence } from './text.ts';
import type { RunState } from './run-state.ts';
import type { DiffResult } from './diff.ts';
import type { RunContext } from './run-context.ts';

export const RECEIPT_TYPE = 'svc.evidence_receipt';

export interface CheckResult {
  name: string;
  argv: string[];
  required: boolean;
  exit_code: number | null;
  duration_ms: number;
  output_sha256: string;
  artifact: string;
}

type CheckOutcome = Pick<CheckResult, 'name' | 'required' | 'exit_code'>;

/** The first required check that failed, or null (its name is kept as RunState.failed_check, never parsed). */
export function failedRequiredCheck<C extends CheckOutcome>(checks: readonly C[]): C | null {
  return checks.find((c) => c.required && c.exit_code !== 0) ?? null;
}

/** The run's error when a required check failed: for people to read, never to be parsed. */
export function requiredCheckError(check: CheckOutcome): string {
  return `Required check "${check.name}" failed (exit ${check.exit_code})`;
}

/** The verdict from the check results, the diff and whether the run itself failed; gaps say what was missing, `gaps`
 * given what else was (the network not fully accounted for, checks the signer could not match): they make a verified
 * run verified_with_gaps. */
export function decideVerdict(
  input: { checks: readonly CheckOutcome[]; diffFiles: number; runFailed: boolean; gaps?: readonly string[] },
): { verdict: Verdict; gaps: string[] } {
  const more = input.gaps ?? [];
  const requiredFailed = input.checks.filter((c) => c.required && c.exit_code !== 0);
  if (input.runFailed || requiredFailed.length > 0) {
    const gaps = requiredFailed.map((c) => `required check "${c.name}" failed`);
    if (input.runFailed) gaps.unshift('the run failed');
    if (input.diffFiles === 0) gaps.push('the diff is empty');
    return { verdict: 'not_verified', gaps: [...gaps, ...more] };
  }
  const gaps: string[] = [];
  if (!input.checks.some((c) => c.required)) gaps.push('no required checks configured');
  for (const c of input.checks) if (!c.required && c.exit_code !== 0) gaps.push(`optional check "${c.name}" failed`);
  if (input.diffFiles === 0) gaps.push('the diff is empty');
  gaps.push(...more);
  return { verdict: gaps.length === 0 ? 'verified' : 'verified_with_gaps', gaps };
}

export interface ReceiptBody extends Pick<RunState, 'source' | 'run' | 'group_id' | 'repo' | 'branch' | 'base_sha' |
  'head_sha' | 'spec_sha256' | 'provider' | 'started_at' | 'ended_at'> {
  type: typeof RECEIPT_TYPE;
  version: 1;
  /** A follow-up's: the PR branch it pushed to, the run before it there and that receipt's integrity (a chain). */
  follows?: { branch: string; source: string | null; run: string | null; receipt: string | null };
  checks: ReportedCheck[];
  diff: { files: number; insertions: number; deletions: number; patch_sha256: string; paths: string[] };
  cost: ReceiptCost;
  verdict: Verdict;
  gaps: string[];
  issued_at: string;
  /** A pod signer's receipt: the fields it established, and those the run container reported (docs/deploy.md). */
  attestation?: { by: 'pod-signer'; verified: string[]; reported: string[] };
  /** Whether the agent was confined to the egress gate, its patterns and what the gate saw (false: no claim). */
  network?: ReceiptNetwork;
  /** When the agent was invoked again: "session" if its CLI always continued, else "summary" (docs/engine.md). */
  resumed?: 'session' | 'summary';
  /** Why the run failed, as known when signed (null: it had not). */
  failure?: RunFailure | null;
  /** The OpenTelemetry trace the run's spans belong to (src/trace.ts). */
  trace_id?: string;
}

/** The gate's metered figures when it metered the run, else the agent's; both signed beside them (docs/gate.md). */
interface ReceiptCost {
  usd: number | null;
  tokens_in: number | null;
  tokens_out: number | null;
  source?: 'metered' | 'reported' | null;
  reported?: CostFigures | null;
  metered?: MeteredCost | null;
}

export function receiptCost(
  run: Pick<RunJson, 'cost_usd' | 'tokens_in' | 'tokens_out'> & Partial<Pick<RunJson, 'reported' | 'metered'>>,
): ReceiptCost {
  const reported = run.reported ?? null;
  const metered = run.metered ?? null;
  const source = metered !== null && metered.cost_usd !== null ? 'metered' : reported !== null ? 'reported' : null;
  return { usd: run.cost_usd, tokens_in: run.tokens_in, tokens_out: run.tokens_out, source, reported, metered };
}

export interface ReceiptNetwork {
  confined: boolean;
  allow: string[];
  deny: string[];
  connections: number;
  denied: number;
  hosts: Array<{ host: string; port: number; connections: number; bytes_up: number; bytes_down: number }>;
  denials: EgressDenial[];
}

export const UNCONFINED: ReceiptNetwork = {
  confined: false, allow: [], deny: [], connections: 0, denied: 0, hosts: [], denials: [],
};

/** At most this many hosts and denials are listed; egress.jsonl (or the gate's log) has every connection. */
const NETWORK_ROWS = 50;
export function confinedNetwork(
  policy: { allow: string[]; deny: string[] },
  seen: { connections: number; denied: number; hosts: EgressHost[]; denials: EgressDenial[] },
): ReceiptNetwork {
  return {
    confined: true,
    allow: policy.allow,
    deny: policy.deny,
    connections: seen.connections,
    denied: seen.denied,
    hosts: seen.hosts.filter((h) => h.allowed > 0).sort((a, b) => b.allowed - a.allowed).slice(0, NETWORK_ROWS).map(
      (h) => ({ host: h.host, port: h.port, connections: h.allowed, bytes_up: h.bytesUp, bytes_down: h.bytesDown }),
    ),
    denials: [...seen.denials].sort((a, b) => b.count - a.count).slice(0, NETWORK_ROWS),
  };
}

export interface Receipt extends ReceiptBody {
  kid: string;
  integrity: string;
  signature: string;
}

function receiptDigest(receipt: Record<string, unknown>): Buffer {
  const { integrity: _i, signature: _s, ...rest } = receipt;
  return createHash('sha256').update(canonicalJson(rest)).digest();
}

export function issueReceipt(body: ReceiptBody, key: SigningKey): Receipt {
  const withKid = { ...body, kid: key.kid };
  const digest = receiptDigest(withKid);
  const signature = sign(null, digest, key.privateKey).toString('base64');
  return { ...withKid, integrity: digest.toString('hex'), signature };
}

/** The diff as a receipt states it: its figures and the paths it touched. */
export function receiptDiff(diff: Omit<DiffResult, 'patch'>): ReceiptBody['diff'] {
  const { insertions, deletions, patch_sha256 } = diff;
  return { files: diff.files.length, insertions, deletions, patch_sha256, paths: diff.files.map((f) => f.path) };
}

/** Signs `body` with this machine's key, saves it as the run's receipt.json and records its verdict on the run (a
 * pod signer's receipt, one with an attestation, says who issued it). */
export function saveReceipt(ctx: RunContext, body: ReceiptBody): Receipt {
  const receipt = issueReceipt(body, loadOrCreateSigningKey(svcHomeOf(ctx.env)));
  ctx.saveArtifact('receipt.json', JSON.stringify(receipt, null, 2) + '\n');
  const { verdict, integrity, kid, gaps } = receipt;
  const by = body.attestation?.by;
  ctx.event('receipt', { verdict, integrity, kid, gaps, ...(by ? { by } : {}) });
  ctx.update({ verdict });
  ctx.say(`receipt issued${by ? ' by the signer' : ''}: verdict ${verdict}`);
  return receipt;
}

interface ReceiptCheck {
  ok: boolean;
  problem: 'malformed' | 'integrity_mismatch' | 'unknown_key' | 'bad_signature' | null;
  message: string;
  receipt: Receipt | null;
}

export function keyRingOf(pems: string[]): Map<string, KeyObject> {
  const ring = new Map<string, KeyObject>();
  for (const pem of pems) {
    const key = createPublicKey(pem);
    ring.set(keyIdOf(key), key);
  }
  return ring;
}

function signedBy(key: KeyObject, digest: Buffer, signature: string): boolean {
  return orNull(() => verify(null, digest, key, Buffer.from(signature, 'base64'))) === true;
}

function rejected(problem: NonNullable<ReceiptCheck['problem']>, message: string): ReceiptCheck {
  return { ok: false, problem, message, receipt: null };
}

export function verifyReceipt(value: unknown, ring: Map<string, KeyObject>): ReceiptCheck {
  const r = value as Partial<Receipt> | null;
  if (
    typeof r !== 'object' || r === null || r.type !== RECEIPT_TYPE ||
    typeof r.integrity !== 'string' || typeof r.signature !== 'string' || typeof r.kid !== 'string'
  ) {
    return rejected('malformed', 'Not an Evidence Receipt: type, kid, integrity or signature is missing');
  }
  const digest = receiptDigest(r as Record<string, unknown>);
  if (digest.toString('hex') !== r.integrity) {
    return rejected('integrity_mismatch', 'Integrity mismatch: the receipt was changed after it was issued');
  }
  const key = ring.get(r.kid);
  if (!key) return rejected('unknown_key', `Unknown key: no public key with kid "${r.kid}" is known here`);
  if (!signedBy(key, digest, r.signature)) {
    return rejected('bad_signature', `Bad signature: key "${r.kid}" did not sign this receipt`);
  }
  const message = `Receipt OK: run ${r.source}/${r.run}, verdict ${r.verdict}, signed by ${r.kid}`;
  return { ok: true, problem: null, message, receipt: r as Receipt };
}

/** A PR body or comment about a run: `lead`, the run's task (untrusted text, fenced), `rest`, then the receipt in a
 * folded block that receiptFromMarkdown reads back. */
export function receiptMarkdown(lead: string[], brief: string, rest: string[], receipt: Receipt): string {
  return [
    ...lead,
    '',
    'Task (untrusted text from the run input):',
    fence(brief, 'text'),
    '',
    ...rest,
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

export function receiptFromMarkdown(text: string): unknown {
  const m = /<!-- svc-receipt -->\s*```+json\n([\s\S]*?)\n```+/.exec(text);
  return m ? tryParseJson(m[1]!) ?? null : null;
}

// What a Kubernetes pod's run container leaves for the signer (SVC_SIGN_LATER=1): the check results and how the run
// ended, as artifacts/evidence.json. The run container is where the agent ran, so the signer reads this file as
// untrusted input (typed readers only) and treats every value in it as "reported", never as verified.
export const EVIDENCE_ARTIFACT = 'evidence.json';
export const EVIDENCE_TYPE = 'svc.run_evidence';

/** A check as a receipt or the evidence records it: its log artifact's name left out. */
export type ReportedCheck = Omit<CheckResult, 'artifact'>;

export function reportedChecks(checks: CheckResult[]): ReportedCheck[] {
  return checks.map(({ artifact: _artifact, ...reported }) => reported);
}

export interface RunEvidence {
  type: typeof EVIDENCE_TYPE;
  version: 1;
  run: string;
  /** How the worker ended: finished (checks ran unless the run failed) or stopped at its budget. */
  outcome: 'finished' | 'over_budget';
  /** The run's own failure (provider failed, budget), not a failed check. */
  error: string | null;
  /** Its class as the run container's provider phase decided it (config: its CLI said it is not logged in). */
  failure_class: EvidenceClass | null;
  exit_code: number | null;
  checks: ReportedCheck[];
}

/** The failure classes a run container decides (the signer establishes the rest itself). */
const EVIDENCE_CLASSES = ['agent', 'config', 'limit'] as const;
type EvidenceClass = (typeof EVIDENCE_CLASSES)[number];

export class EvidenceError extends RefusedError {}

const MAX_CHECKS = 200;

function intOrNull(value: unknown): number | null {
  return typeof value === 'number' && Number.isInteger(value) ? value : null;
}

function readCheck(value: unknown): ReportedCheck | null {
  const c = obj(value);
  const name = str(c.name);
  const argv = Array.isArray(c.argv) && c.argv.length > 0 && c.argv.every((a) => typeof a === 'string')
    ? (c.argv as string[])
    : null;
  if (!name || !argv || typeof c.required !== 'boolean') return null;
  const output = typeof c.output_sha256 === 'string' && /^[0-9a-f]{64}$/.test(c.output_sha256) ? c.output_sha256 : '';
  const duration = Math.max(0, intOrNull(c.duration_ms) ?? 0);
  const exit = intOrNull(c.exit_code);
  return { name, argv, required: c.required, exit_code: exit, duration_ms: duration, output_sha256: output };
}

/** Parses evidence.json of run `run`; throws EvidenceError for anything that is not well-formed evidence of it. */
export function readEvidence(text: string, run: string): RunEvidence {
  const raw = tryParseJson(text);
  if (raw === undefined) throw new EvidenceError('evidence.json is not JSON');
  const e = obj(raw);
  if (e.type !== EVIDENCE_TYPE || e.version !== 1) {
    throw new EvidenceError('evidence.json is not run evidence (type, version)');
  }
  if (e.run !== run) throw new EvidenceError('evidence.json names another run');
  const outcome = oneOf(e.outcome, ['finished', 'over_budget'] as const);
  if (!outcome) throw new EvidenceError('evidence.json has no known outcome');
  if (!Array.isArray(e.checks) || e.checks.length > MAX_CHECKS) {
    throw new EvidenceError('evidence.json checks must be a short array');
  }
  const checks = e.checks.map(readCheck);
  if (checks.some((c) => c === null)) throw new EvidenceError('evidence.json holds a malformed check');
  return {
    type: EVIDENCE_TYPE, version: 1, run, outcome, error: str(e.error)?.slice(0, 2000) ?? null,
    failure_class: oneOf(e.failure_class, EVIDENCE_CLASSES),
    exit_code: intOrNull(e.exit_code), checks: checks as ReportedCheck[],
  };
}
