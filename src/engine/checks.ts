// Runs the policy's checks (argv arrays, never a shell) in the agent's sandbox; the verdict they give (DESIGN §3).
import { createHash } from 'node:crypto';
import { spawnGroup } from './spawn-group.ts';
import type { Policy } from './policy.ts';
import type { Verdict } from '../run-json.ts';
import type { RunContext } from './run-context.ts';
import { agentSandbox, type RunSandbox } from './sandbox.ts';

const CHECK_OUTPUT_CAP = 256 * 1024;

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

/** The checks, one after another in the run's working tree, each in a process group a stop can reach. */
export async function runChecks(ctx: RunContext, policy: Policy, sandbox: RunSandbox): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  try {
    for (const { name, run: argv, required } of policy.checks) {
      if (ctx.stopRequested()) break;
      const started = Date.now();
      const run = spawnGroup(argv, {
        cwd: ctx.state.workdir,
        env: ctx.env,
        extra: { ...sandbox.env, SVC_RUN_ID: ctx.state.run },
        maxBytes: CHECK_OUTPUT_CAP,
        timeoutMs: policy.limits.check_timeout_s * 1000,
        // A check runs code the agent wrote: in the sandbox, with no provider's login folders.
        sandbox: agentSandbox(ctx, sandbox, argv[0]!, null, policy.limits),
      });
      ctx.setChild(run.identity);
      const done = await run.done;
      const output = done.truncated ? Buffer.concat([done.output, Buffer.from('\n[output truncated]\n')]) : done.output;
      const artifact = `checks/${name.replace(/[^A-Za-z0-9._-]/g, '_')}.log`;
      ctx.saveArtifact(artifact, output);
      const exit_code = done.code;
      const duration_ms = Date.now() - started;
      const output_sha256 = createHash('sha256').update(output).digest('hex');
      results.push({ name, argv, required, exit_code, duration_ms, output_sha256, artifact });
      ctx.event('check', { name, exit_code, duration_ms, required, artifact });
      ctx.say(`check ${name} exit ${exit_code}`);
    }
  } finally {
    ctx.setChild(null);
  }
  return results;
}

/** The verdict from the check results, the diff and whether the run itself failed; gaps say what was missing. */
export function decideVerdict(
  input: { checks: CheckResult[]; diffFiles: number; runFailed: boolean },
): { verdict: Verdict; gaps: string[] } {
  const requiredFailed = input.checks.filter((c) => c.required && c.exit_code !== 0);
  if (input.runFailed || requiredFailed.length > 0) {
    const gaps = requiredFailed.map((c) => `required check "${c.name}" failed`);
    if (input.runFailed) gaps.unshift('the run failed');
    if (input.diffFiles === 0) gaps.push('the diff is empty');
    return { verdict: 'not_verified', gaps };
  }
  const gaps: string[] = [];
  if (!input.checks.some((c) => c.required)) gaps.push('no required checks configured');
  for (const c of input.checks) if (!c.required && c.exit_code !== 0) gaps.push(`optional check "${c.name}" failed`);
  if (input.diffFiles === 0) gaps.push('the diff is empty');
  return { verdict: gaps.length === 0 ? 'verified' : 'verified_with_gaps', gaps };
}
