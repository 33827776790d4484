// The operator's settings (DESIGN §7a): `/etc/svc/operator.json`, then `~/.svc/operator.json` (the latter wins per
// provider name). Only these files, never a repository, may pass environment into the agent, make host folders
// writable for it, define a provider under a built-in's name, or cap the limits a repository's policy
// sets. Neither file is ever visible inside a sandbox.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseEngineConfigValue, parseJsonFile, type ProviderEntry } from './config.ts';
import { DEFAULT_LIMITS, type RunLimits } from './policy-limits.ts';
import { BadSettingError } from '../errors.ts';
import { isJsonObject } from '../untrusted.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { isSecretName } from '../spawn/env.ts';

export interface OperatorConfig {
  /** Names of svc's environment variables the agent and the checks receive (never one of svc's own secrets). */
  env: string[];
  /** Command providers the operator defines; a built-in's name replaces that built-in. */
  providers: Record<string, ProviderEntry>;
  /** Caps on a repository's `limits` (and on the defaults): the lower of the two applies. */
  limits: Partial<RunLimits>;
  /** The files read, for messages. */
  files: string[];
}

/** `limits`: the same keys as policy.json's, each a whole number of at least 1. */
function readCaps(raw: unknown, where: string): Partial<RunLimits> {
  if (raw === undefined) return {};
  if (!isJsonObject(raw)) throw new BadSettingError(`${where} limits must be an object`);
  const caps: Partial<RunLimits> = {};
  for (const [key, value] of Object.entries(raw)) {
    if (!(key in DEFAULT_LIMITS)) {
      const allowed = Object.keys(DEFAULT_LIMITS).join(', ');
      throw new BadSettingError(`Unknown key "${key}" in ${where} limits (allowed: ${allowed})`);
    }
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
      throw new BadSettingError(`${where} limits.${key} must be a whole number of at least 1`);
    }
    caps[key as keyof RunLimits] = value;
  }
  return caps;
}

export const SYSTEM_OPERATOR_FILE = '/etc/svc/operator.json';

export function operatorFiles(env: NodeJS.ProcessEnv): string[] {
  return [SYSTEM_OPERATOR_FILE, join(svcHomeOf(env), 'operator.json')];
}

/** Both files merged; a broken one is an error naming it (fail closed, like the repository's config). */
export function loadOperatorConfig(env: NodeJS.ProcessEnv): OperatorConfig {
  const merged: OperatorConfig = { env: [], providers: {}, limits: {}, files: [] };
  for (const path of operatorFiles(env)) {
    if (!existsSync(path)) continue;
    const raw = parseJsonFile(readFileSync(path), path);
    const config = parseEngineConfigValue(raw, path, ['env', 'providers', 'limits']);
    // The system file's caps and the home file's both hold: the lower wins.
    for (const [key, cap] of Object.entries(readCaps((raw as Record<string, unknown>).limits, path))) {
      const name = key as keyof RunLimits;
      merged.limits[name] = Math.min(merged.limits[name] ?? cap, cap);
    }
    merged.files.push(path);
    for (const name of config.env ?? []) if (!merged.env.includes(name)) merged.env.push(name);
    Object.assign(merged.providers, config.providers);
  }
  return merged;
}

/** The values of the names the operator passes, taken from `env` (svc's own secrets never among them). */
export function passedValues(names: readonly string[], env: NodeJS.ProcessEnv): Record<string, string> {
  const values: Record<string, string> = {};
  for (const name of names) {
    const value = env[name];
    if (value !== undefined && !isSecretName(name) && !name.startsWith('SVC_')) values[name] = value;
  }
  return values;
}

/**
 * What a server's launcher adds to its run's allowlisted environment: the operator's names, so they reach the run's
 * agents as they do a CLI run's. An unreadable operator file passes nothing here; the run itself then fails on it.
 */
export function operatorPassedEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  try {
    return passedValues(loadOperatorConfig(env).env, env);
  } catch {
    return {};
  }
}
