// What every figure needs: sizes and durations for the chosen mode, a scrubbed environment with a temp
// HOME for the servers, the ceiling server, and a log line writer (stderr, so stdout stays the table).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServerProcess } from './processes.ts';
import { SECRET_NAMES } from '../../src/settings-registry.ts';

export interface BenchOptions {
  quick: boolean;
  /** Figure names to run (empty = all). */
  only: string[];
  runs: number;
  /** Directory for server CPU profiles (`--profile[=DIR]`), or undefined. */
  profile: string | undefined;
}

export interface BenchContext {
  options: BenchOptions;
  outDir: string;
  tmp: string;
  env: NodeJS.ProcessEnv;
  ceiling: ServerProcess;
  warmupMs: number;
  durationMs: number;
  /** Alternating ceiling/target rounds per ratio figure: the median resists noisy neighbours. */
  rounds: number;
  log(line: string): void;
}

export function parseOptions(argv: readonly string[]): BenchOptions {
  const quick = argv.includes('--quick');
  const onlyArg = argv.find((a) => a.startsWith('--only='));
  const runsArg = argv.find((a) => a.startsWith('--runs='));
  const runs = runsArg ? Number(runsArg.slice('--runs='.length)) : quick ? 100_000 : 1_000_000;
  if (!Number.isInteger(runs) || runs < 1000) throw new Error(`--runs must be an integer >= 1000 (got "${runsArg}")`);
  const profileArg = argv.find((a) => a === '--profile' || a.startsWith('--profile='));
  const profile = profileArg === undefined ? undefined
    : profileArg.includes('=') ? profileArg.slice('--profile='.length) : 'test-output/bench/profiles';
  return { quick, only: onlyArg ? onlyArg.slice('--only='.length).split(',').filter(Boolean) : [], runs, profile };
}

/**
 * The servers get a temp HOME and none of the caller's SVC_* settings, so the bench never touches ~/.svc, and none
 * of the credentials or trace exporter svc calls out with: a GITHUB_TOKEN in the shell would make every /webhook
 * delivery ask api.github.com whether its author may write. The bench never reaches a public address.
 */
export function benchEnv(home: string, from: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(from)) {
    if (!k.startsWith('SVC_') && !k.startsWith('OTEL_') && !SECRET_NAMES.has(k)) env[k] = v;
  }
  env.HOME = home;
  // --access-log: every svc server writes its access log line per request (SVC_ACCESS_LOG), to show its cost.
  if (process.argv.includes('--access-log')) env.SVC_ACCESS_LOG = '1';
  return env;
}

export function makeTmp(): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), 'svc-bench-'));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}
