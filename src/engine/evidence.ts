// What a Kubernetes pod's run container leaves for the signer (SVC_SIGN_LATER=1): the check results and how the run
// ended, as artifacts/evidence.json. The run container is where the agent ran, so the signer reads this file as
// untrusted input (typed readers only) and treats every value in it as "reported", never as verified.
import { RefusedError } from '../errors.ts';
import { obj, str } from '../untrusted.ts';
import type { CheckResult } from './checks.ts';

export const EVIDENCE_ARTIFACT = 'evidence.json';
export const EVIDENCE_TYPE = 'svc.run_evidence';

/** Whether this run leaves the receipt to a signer container (set only by the pod spec). */
export function signsLater(env: NodeJS.ProcessEnv): boolean {
  return env.SVC_SIGN_LATER === '1';
}

/** A check result as the run container reported it (its log artifact's name aside). */
export type ReportedCheck = Omit<CheckResult, 'artifact'>;

export interface RunEvidence {
  type: typeof EVIDENCE_TYPE;
  version: 1;
  run: string;
  /** How the worker ended: finished (checks ran unless the run failed) or stopped at its budget. */
  outcome: 'finished' | 'over_budget';
  /** The run's own failure (provider failed, budget), not a failed check. */
  error: string | null;
  exit_code: number | null;
  checks: ReportedCheck[];
}

export function evidenceOf(
  run: string, outcome: RunEvidence['outcome'], error: string | null, exitCode: number | null, checks: CheckResult[],
): RunEvidence {
  return {
    type: EVIDENCE_TYPE, version: 1, run, outcome, error, exit_code: exitCode,
    checks: checks.map(({ artifact: _artifact, ...reported }) => reported),
  };
}

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
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new EvidenceError('evidence.json is not JSON');
  }
  const e = obj(raw);
  if (e.type !== EVIDENCE_TYPE || e.version !== 1) {
    throw new EvidenceError('evidence.json is not run evidence (type, version)');
  }
  if (e.run !== run) throw new EvidenceError('evidence.json names another run');
  if (e.outcome !== 'finished' && e.outcome !== 'over_budget') {
    throw new EvidenceError('evidence.json has no known outcome');
  }
  if (!Array.isArray(e.checks) || e.checks.length > MAX_CHECKS) {
    throw new EvidenceError('evidence.json checks must be a short array');
  }
  const checks = e.checks.map(readCheck);
  if (checks.some((c) => c === null)) throw new EvidenceError('evidence.json holds a malformed check');
  return {
    type: EVIDENCE_TYPE, version: 1, run, outcome: e.outcome, error: str(e.error)?.slice(0, 2000) ?? null,
    exit_code: intOrNull(e.exit_code), checks: checks as ReportedCheck[],
  };
}
