// The operator's settings (DESIGN §7a): `/etc/svc/operator.json`, then `~/.svc/operator.json` (the latter wins per
// provider name). Only these files, never a repository, may pass environment into the agent, make host folders
// writable for it, or define a provider under a built-in's name. Neither file is ever visible inside a sandbox.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseEngineConfig, type ProviderEntry } from './config.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { isSecretName } from '../spawn/env.ts';

export interface OperatorConfig {
  /** Names of svc's environment variables the agent and the checks receive (never one of svc's own secrets). */
  env: string[];
  /** Command providers the operator defines; a built-in's name replaces that built-in. */
  providers: Record<string, ProviderEntry>;
  /** The files read, for messages. */
  files: string[];
}

export const SYSTEM_OPERATOR_FILE = '/etc/svc/operator.json';

export function operatorFiles(env: NodeJS.ProcessEnv): string[] {
  return [SYSTEM_OPERATOR_FILE, join(svcHomeOf(env), 'operator.json')];
}

/** Both files merged; a broken one is an error naming it (fail closed, like the repository's config). */
export function loadOperatorConfig(env: NodeJS.ProcessEnv): OperatorConfig {
  const merged: OperatorConfig = { env: [], providers: {}, files: [] };
  for (const path of operatorFiles(env)) {
    if (!existsSync(path)) continue;
    const config = parseEngineConfig(readFileSync(path), path, ['env', 'providers']);
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
