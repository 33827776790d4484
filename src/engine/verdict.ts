// The verdict of DESIGN §3 from check results, the diff and whether the run itself failed; gaps say what was missing.
import type { CheckResult } from './checks.ts';
import type { Verdict } from '../run-json.ts';

export function decideVerdict(
  input: { checks: CheckResult[]; diffFiles: number; runFailed: boolean },
): { verdict: Verdict; gaps: string[] } {
  const requiredFailed = input.checks.filter((c) => c.required && c.exit_code !== 0);
  if (input.runFailed || requiredFailed.length > 0) {
    const gaps = requiredFailed.map((c) => `required check "${c.name}" failed`);
    if (input.runFailed) gaps.unshift('the run failed');
    return { verdict: 'not_verified', gaps };
  }
  const gaps: string[] = [];
  if (!input.checks.some((c) => c.required)) gaps.push('no required checks configured');
  for (const c of input.checks) if (!c.required && c.exit_code !== 0) gaps.push(`optional check "${c.name}" failed`);
  if (input.diffFiles === 0) gaps.push('the diff is empty');
  return { verdict: gaps.length === 0 ? 'verified' : 'verified_with_gaps', gaps };
}
