// `limits` in .svc/policy.json (DESIGN §7a "It ends"): what one run's agents may spend. Every key is optional; the
// defaults are what a user would expect of an unattended run on a shared build host (docs/engine.md "Limits").
import { PolicyError } from './policy-error.ts';

export interface RunLimits {
  /** Wall-clock seconds for one provider invocation, and for the whole run's provider phase. */
  provider_timeout_s: number;
  run_timeout_s: number;
  /** Wall-clock seconds for one check. */
  check_timeout_s: number;
  /** Processes at once inside a sandbox. */
  processes: number;
  /** Resident memory of a sandbox's processes together (each process's writable memory is capped the same). */
  memory_mb: number;
  /** The largest file an agent may write, and how much the worktree may grow in all. */
  file_mb: number;
  disk_mb: number;
  /** How many times a run's provider is invoked (the first, plus one per answered question or resume). */
  invocations: number;
}

export const DEFAULT_LIMITS: RunLimits = {
  provider_timeout_s: 3600,
  run_timeout_s: 4 * 3600,
  check_timeout_s: 900,
  processes: 1024,
  memory_mb: 8192,
  file_mb: 1024,
  disk_mb: 4096,
  invocations: 25,
};

const MAXIMA: RunLimits = {
  provider_timeout_s: 7 * 24 * 3600,
  run_timeout_s: 7 * 24 * 3600,
  check_timeout_s: 24 * 3600,
  processes: 65536,
  memory_mb: 1024 * 1024,
  file_mb: 1024 * 1024,
  disk_mb: 1024 * 1024,
  invocations: 1000,
};

export function parseLimits(raw: unknown): RunLimits {
  if (raw === undefined || raw === null) return DEFAULT_LIMITS;
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new PolicyError('policy.json limits must be an object');
  const limits = { ...DEFAULT_LIMITS };
  const given = raw as Record<string, unknown>;
  for (const key of Object.keys(given)) {
    if (!(key in DEFAULT_LIMITS)) {
      const allowed = Object.keys(DEFAULT_LIMITS).join(', ');
      throw new PolicyError(`Unknown key "${key}" in policy.json limits (allowed: ${allowed})`);
    }
    const value = given[key];
    const max = MAXIMA[key as keyof RunLimits];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
      throw new PolicyError(`policy.json limits.${key} must be a whole number from 1 to ${max}`);
    }
    limits[key as keyof RunLimits] = value;
  }
  return limits;
}
