// .svc/policy.json (DESIGN §6); an unknown key is an error, as a typo must not silently loosen the gate.
import { join } from 'node:path';
import { isJsonObject } from '../json-value.ts';
import { tryParseJson } from '../untrusted.ts';
import { readRepoSvcFile } from './plain-tree.ts';
import type { Verdict } from '../run-json.ts';
import { RefusedError } from '../errors.ts';
import { GatePolicyError, parseGatePolicy } from '../gate/policy.ts';

/** A .svc/policy.json that svc refuses: the message names the key and what it must be. */
export class PolicyError extends RefusedError {}

/** `limits` (DESIGN §7a "It ends"): what one run's agents may spend, by default and at most (a policy.json's bound;
 * the operator's caps have none); each key's enforcer in docs/engine.md. */
const LIMIT_RANGES = {
  provider_timeout_s: [3600, 7 * 24 * 3600],
  run_timeout_s: [4 * 3600, 7 * 24 * 3600],
  check_timeout_s: [900, 24 * 3600],
  processes: [1024, 65536],
  memory_mb: [8192, 1024 * 1024],
  file_mb: [1024, 1024 * 1024],
  disk_mb: [4096, 1024 * 1024],
  invocations: [25, 1000],
} satisfies Record<string, [number, number]>;
export type RunLimits = Record<keyof typeof LIMIT_RANGES, number>;
const LIMIT_KEYS = Object.keys(LIMIT_RANGES) as (keyof RunLimits)[];
export const DEFAULT_LIMITS = Object.fromEntries(LIMIT_KEYS.map((key) => [key, LIMIT_RANGES[key][0]])) as RunLimits;

/** Refuses a key that is not `allowed` (a typo must not silently loosen anything), as `fail`'s error. */
export function onlyKeys(
  value: object, allowed: readonly string[], where: string, fail = (message: string): Error => new PolicyError(message),
): void {
  const unknown = Object.keys(value).find((key) => !allowed.includes(key));
  if (unknown !== undefined) throw fail(`Unknown key "${unknown}" in ${where} (allowed: ${allowed.join(', ')})`);
}

/** A file's `limits` (policy.json's, or the operator's caps: no maximum): known keys, whole numbers. */
export function readLimits(
  raw: unknown, where: string, bounded: boolean, fail: (message: string) => Error,
): Partial<RunLimits> {
  if (!isJsonObject(raw)) throw fail(`${where} limits must be an object`);
  const limits: Partial<RunLimits> = {};
  onlyKeys(raw, LIMIT_KEYS, `${where} limits`, fail);
  for (const [key, value] of Object.entries(raw)) {
    const max = bounded ? LIMIT_RANGES[key as keyof RunLimits][1] : Infinity;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
      throw fail(`${where} limits.${key} must be a whole number ${bounded ? `from 1 to ${max}` : 'of at least 1'}`);
    }
    limits[key as keyof RunLimits] = value;
  }
  return limits;
}

export interface Policy {
  checks: ReturnType<typeof parseCheck>[];
  pr: { open: 'verified' | 'verified_with_gaps' | 'never'; draft: boolean; base: string | null };
  max_usd: number | null;
  /** How agents are confined (DESIGN §7a): null when the file does not say, which means "bwrap". */
  sandbox: 'bwrap' | 'none' | null;
  limits: RunLimits;
  /** Where the agents may connect through the egress gate (docs/gate.md); the model APIs are always reachable. */
  network: { allow: string[]; deny: string[] };
}

function parseCheck(raw: unknown, i: number) {
  const where = `policy.json checks[${i}]`;
  if (!isJsonObject(raw)) throw new PolicyError(`${where} must be an object`);
  onlyKeys(raw, ['name', 'run', 'required'], where);
  if (typeof raw.name !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$/.test(raw.name)) {
    throw new PolicyError(`${where}.name must be a short name of letters, digits, space, ".", "_" or "-"`);
  }
  if (!Array.isArray(raw.run) || raw.run.length === 0 || !raw.run.every((a) => typeof a === 'string' && a !== '')) {
    throw new PolicyError(`${where}.run must be a non-empty argv array of strings (no shell)`);
  }
  if (raw.required !== undefined && typeof raw.required !== 'boolean') {
    throw new PolicyError(`${where}.required must be true or false`);
  }
  return { name: raw.name, run: raw.run as string[], required: raw.required !== false };
}

/** `network: {allow, deny}` (the operator's file: `keys` allow only): host patterns, each checked now so a typo fails
 * the run before it starts. */
export function parseNetwork(
  raw: unknown, where = 'policy.json', fail = (message: string): Error => new PolicyError(message),
  keys: readonly string[] = ['allow', 'deny'],
): Policy['network'] {
  if (raw === undefined || raw === null) return { allow: [], deny: [] };
  if (!isJsonObject(raw)) throw fail(`${where} network must be an object`);
  onlyKeys(raw, keys, `${where} network`, fail);
  try {
    parseGatePolicy(raw);
  } catch (err) {
    if (err instanceof GatePolicyError) throw fail(`${where} network: ${err.message}`);
    throw err;
  }
  return { allow: (raw.allow ?? []) as string[], deny: (raw.deny ?? []) as string[] };
}

/** A key's value when `valid`, `fallback` when it is absent, else the PolicyError that it `must` be otherwise. */
function optional<T>(value: unknown, fallback: T, valid: (value: unknown) => boolean, must: string): T {
  if (value === undefined) return fallback;
  if (!valid(value)) throw new PolicyError(`policy.json ${must}`);
  return value as T;
}

export function parsePolicy(raw: unknown): Policy {
  if (!isJsonObject(raw)) throw new PolicyError('policy.json must hold a JSON object');
  onlyKeys(raw, ['checks', 'pr', 'max_usd', 'sandbox', 'limits', 'network'], 'policy.json');
  const checksRaw = raw.checks ?? [];
  if (!Array.isArray(checksRaw)) throw new PolicyError('policy.json checks must be an array');
  const checks = checksRaw.map(parseCheck);
  const twice = checks.find((c, i) => checks.findIndex((other) => other.name === c.name) !== i);
  if (twice) throw new PolicyError(`policy.json has two checks named "${twice.name}"`);
  const pr: Policy['pr'] = { open: 'verified', draft: true, base: null };
  if (raw.pr !== undefined) {
    if (!isJsonObject(raw.pr)) throw new PolicyError('policy.json pr must be an object');
    onlyKeys(raw.pr, ['open', 'draft', 'base'], 'policy.json pr');
    pr.open = optional(raw.pr.open, pr.open, (v) => v === 'verified' || v === 'verified_with_gaps' || v === 'never',
      'pr.open must be "verified", "verified_with_gaps" or "never"');
    pr.draft = optional(raw.pr.draft, pr.draft, (v) => typeof v === 'boolean', 'pr.draft must be true or false');
    pr.base = optional(raw.pr.base ?? undefined, pr.base,
      (v) => typeof v === 'string' && /^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$/.test(v), 'pr.base must be a branch name');
  }
  const maxUsd = optional<number | null>(raw.max_usd ?? undefined, null,
    (v) => typeof v === 'number' && Number.isFinite(v) && v > 0, 'max_usd must be a positive number or null');
  const sandbox = optional<Policy['sandbox']>(raw.sandbox ?? undefined, null, (v) => v === 'bwrap' || v === 'none',
    'sandbox must be "bwrap" or "none"');
  const limits = raw.limits === undefined || raw.limits === null
    ? {} : readLimits(raw.limits, 'policy.json', true, (message) => new PolicyError(message));
  const network = parseNetwork(raw.network);
  return { checks, pr, max_usd: maxUsd, sandbox, limits: { ...DEFAULT_LIMITS, ...limits }, network };
}

export const DEFAULT_POLICY: Policy = parsePolicy({});

/** The largest policy.json read: a repository's file is read by the servers too, so it is never read unbounded. */
const MAX_POLICY = 64 * 1024;

/**
 * Reads `<repo>/.svc/policy.json` without following a symbolic link (plain-tree.ts: a repository could point it at
 * /dev/zero or a host file); missing gives the defaults, anything else broken throws (fail closed). With its path and
 * the sha256 of the bytes parsed (`svc trust`; null when there is no file).
 */
export function loadPolicyFile(repo: string): { policy: Policy; path: string; sha256: string | null } {
  const file = readRepoSvcFile(repo, 'policy.json', MAX_POLICY, (why) => new PolicyError(why));
  if (file === null) return { policy: DEFAULT_POLICY, path: join(repo, '.svc', 'policy.json'), sha256: null };
  const raw = tryParseJson(file.bytes.toString('utf8'));
  if (raw === undefined) throw new PolicyError('policy.json is not valid JSON');
  return { policy: parsePolicy(raw), path: file.path, sha256: file.sha256 };
}

const RANK: Record<Verdict, number> = { verified: 2, verified_with_gaps: 1, not_verified: 0 };

export function verdictAccepted(policy: Policy, verdict: Verdict | null): boolean {
  if (verdict === null || policy.pr.open === 'never') return false;
  return RANK[verdict] >= RANK[policy.pr.open];
}
