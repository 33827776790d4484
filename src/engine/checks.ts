// Runs the policy's checks (argv arrays, never a shell) with capped output, one `check` event and artifact each.
import { createHash } from 'node:crypto';
import { spawnGroup } from './spawn-group.ts';
import type { CheckSpec } from './policy.ts';
import type { SandboxPlan } from '../spawn/bwrap-argv.ts';

export const CHECK_OUTPUT_CAP = 256 * 1024;
export const CHECK_TIMEOUT_MS = 15 * 60 * 1000;

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

/**
 * The first required check that failed, or null. The run keeps its name (RunState.failed_check) as a typed field, so
 * nothing has to recognise a check failure from the error text below.
 */
export function failedRequiredCheck<C extends CheckOutcome>(checks: readonly C[]): C | null {
  return checks.find((c) => c.required && c.exit_code !== 0) ?? null;
}

/** The run's error when a required check failed: for people to read, never to be parsed. */
export function requiredCheckError(check: CheckOutcome): string {
  return `Required check "${check.name}" failed (exit ${check.exit_code})`;
}

export function artifactName(name: string): string {
  return `checks/${name.replace(/[^A-Za-z0-9._-]/g, '_')}.log`;
}

export interface CheckHooks {
  /** svc's environment; checks get the spawn policy's 'agent' environment derived from it, plus `extra`. */
  env: NodeJS.ProcessEnv;
  extra?: Record<string, string>;
  cwd: string;
  /** Wall-clock time for one check (policy limits.check_timeout_s). */
  timeoutMs?: number;
  /** The sandbox each check runs in (it runs code the agent wrote); null when the run has none. */
  sandboxFor: (argv: string[]) => { bwrap: string; plan: SandboxPlan } | null;
  /** Called with the running check's group so a stop can reach it. */
  onSpawn?: (identity: { pid: number; pgid: number; proc_start: string | null }) => void;
  saveArtifact: (path: string, content: Buffer) => void;
  event: (kind: string, data: Record<string, unknown>) => void;
  stopped: () => boolean;
}

export async function runChecks(checks: CheckSpec[], hooks: CheckHooks): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  for (const check of checks) {
    if (hooks.stopped()) break;
    const started = Date.now();
    const run = spawnGroup(check.run, {
      cwd: hooks.cwd,
      env: hooks.env,
      extra: hooks.extra,
      maxBytes: CHECK_OUTPUT_CAP,
      timeoutMs: hooks.timeoutMs ?? CHECK_TIMEOUT_MS,
      sandbox: hooks.sandboxFor(check.run),
    });
    hooks.onSpawn?.(run.identity);
    const done = await run.done;
    const output = done.truncated ? Buffer.concat([done.output, Buffer.from('\n[output truncated]\n')]) : done.output;
    const artifact = artifactName(check.name);
    hooks.saveArtifact(artifact, output);
    const result: CheckResult = {
      name: check.name,
      argv: check.run,
      required: check.required,
      exit_code: done.code,
      duration_ms: Date.now() - started,
      output_sha256: createHash('sha256').update(output).digest('hex'),
      artifact,
    };
    const { name, exit_code, duration_ms, required } = result;
    hooks.event('check', { name, exit_code, duration_ms, required, artifact });
    results.push(result);
  }
  return results;
}
