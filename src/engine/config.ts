// The project's engine config .svc/config.json: the default provider and `command` providers (argv arrays, no shell).
// The operator's file (operator-config.ts) has the same provider shape. Which of these settings a run may use is
// decided in one place, setting-authority.ts.
import { isJsonObject } from '../untrusted.ts';
import { readFileSync, existsSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { BadSettingError } from '../errors.ts';

export interface ProviderEntry {
  command: string[];
  /** Folders the provider's CLI writes (absolute, or relative to HOME), writable inside its sandbox. */
  writable?: string[];
  /** Not read from a file: false when only the program file itself may be shown, not its folder (setting-authority). */
  showFolder?: boolean;
}

export interface EngineConfig {
  provider: string | null;
  providers: Record<string, ProviderEntry>;
  /** Names of svc's environment variables passed to the agent and the checks (an operator setting). */
  env?: string[];
}

/** The repository's config file as read: its parsed settings, where it is, and the hash of the exact bytes parsed. */
export interface EngineConfigFile {
  config: EngineConfig;
  path: string;
  sha256: string;
}

/** A folder a provider may write: absolute, or relative to HOME without climbing out of it. */
function isFolderName(value: unknown): value is string {
  return typeof value === 'string' && value !== '' && !value.includes('\0') && !value.split('/').includes('..');
}

/** An environment variable's name, as a shell would take it. */
export function isEnvName(value: unknown): value is string {
  return typeof value === 'string' && /^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(value);
}

/** Reads `<repo>/.svc/config.json` once; null when there is none. The hash is of the bytes that were parsed. */
export function readEngineConfigFile(repo: string): EngineConfigFile | null {
  const path = join(repo, '.svc', 'config.json');
  if (!existsSync(path)) return null;
  const bytes = readFileSync(path);
  return {
    config: parseEngineConfig(bytes, '.svc/config.json', ['provider', 'providers', 'env']),
    path,
    sha256: createHash('sha256').update(bytes).digest('hex'),
  };
}

export function loadEngineConfig(repo: string): EngineConfig {
  return readEngineConfigFile(repo)?.config ?? { provider: null, providers: {} };
}

/** Parses a config file's bytes; `where` names the file in errors, `keys` are the top-level keys it may hold. */
export function parseEngineConfig(bytes: Buffer, where: string, keys: readonly string[]): EngineConfig {
  return parseEngineConfigValue(parseJsonFile(bytes, where), where, keys);
}

export function parseJsonFile(bytes: Buffer, where: string): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new BadSettingError(`${where} is not valid JSON`);
  }
}

/** The parsed form: `provider`, `providers`, `env` are read; other keys in `keys` are the caller's to read. */
export function parseEngineConfigValue(raw: unknown, where: string, keys: readonly string[]): EngineConfig {
  if (!isJsonObject(raw)) throw new BadSettingError(`${where} must hold a JSON object`);
  const o = raw as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (!keys.includes(key)) {
      throw new BadSettingError(`Unknown key "${key}" in ${where} (allowed: ${keys.join(', ')})`);
    }
  }
  const providers: EngineConfig['providers'] = {};
  const list = o.providers ?? {};
  if (!isJsonObject(list)) throw new BadSettingError(`${where} providers must be an object`);
  for (const [name, value] of Object.entries(list as Record<string, unknown>)) {
    providers[name] = readProvider(name, value, where);
  }
  if (o.provider !== undefined && o.provider !== null && typeof o.provider !== 'string') {
    throw new BadSettingError(`${where} provider must be a name`);
  }
  if (o.env !== undefined && (!Array.isArray(o.env) || !o.env.every(isEnvName))) {
    throw new BadSettingError(`${where} env must be an array of environment variable names`);
  }
  const config: EngineConfig = { provider: (o.provider as string | undefined) ?? null, providers };
  if (o.env !== undefined) config.env = o.env as string[];
  return config;
}

/** One entry of `providers`: `{ command, writable? }` under a simple lowercase name. */
function readProvider(name: string, value: unknown, file: string): ProviderEntry {
  const where = `${file} providers.${name}`;
  const command = (value as { command?: unknown } | null)?.command;
  const writable = (value as { writable?: unknown } | null)?.writable;
  const keys = typeof value === 'object' && value !== null ? Object.keys(value) : [];
  const extra = keys.filter((k) => k !== 'command' && k !== 'writable');
  if (extra.length) throw new BadSettingError(`Unknown key "${extra[0]}" in ${where} (allowed: command, writable)`);
  if (!/^[a-z0-9][a-z0-9_-]{0,31}$/.test(name)) {
    throw new BadSettingError(`Provider name "${name}" in ${file} is not a simple lowercase name`);
  }
  if (!Array.isArray(command) || command.length === 0 || !command.every((a) => typeof a === 'string' && a !== '')) {
    throw new BadSettingError(`${where}.command must be a non-empty argv array of strings`);
  }
  if (writable !== undefined && (!Array.isArray(writable) || !writable.every(isFolderName))) {
    throw new BadSettingError(`${where}.writable must be an array of folder paths (absolute or under HOME)`);
  }
  return writable === undefined ? { command: command as string[] } : { command: command as string[], writable };
}
