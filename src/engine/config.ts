// The project's engine config .svc/config.json: the default provider and `command` providers (argv arrays, no shell).
import { isJsonObject } from '../untrusted.ts';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { BadSettingError } from '../errors.ts';

export interface EngineConfig {
  provider: string | null;
  /** `writable`: folders the provider's CLI writes (absolute, or relative to HOME), writable inside its sandbox. */
  providers: Record<string, { command: string[]; writable?: string[] }>;
}

/** A folder a provider may write: absolute, or relative to HOME without climbing out of it. */
function isFolderName(value: unknown): value is string {
  return typeof value === 'string' && value !== '' && !value.includes('\0') && !value.split('/').includes('..');
}

export function loadEngineConfig(repo: string): EngineConfig {
  const path = join(repo, '.svc', 'config.json');
  if (!existsSync(path)) return { provider: null, providers: {} };
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    throw new BadSettingError('.svc/config.json is not valid JSON');
  }
  if (!isJsonObject(raw)) throw new BadSettingError('.svc/config.json must hold a JSON object');
  const o = raw as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (key !== 'provider' && key !== 'providers') {
      throw new BadSettingError(`Unknown key "${key}" in .svc/config.json (allowed: provider, providers)`);
    }
  }
  const providers: EngineConfig['providers'] = {};
  const list = o.providers ?? {};
  if (!isJsonObject(list)) throw new BadSettingError('.svc/config.json providers must be an object');
  for (const [name, value] of Object.entries(list as Record<string, unknown>)) {
    providers[name] = readProvider(name, value);
  }
  if (o.provider !== undefined && o.provider !== null && typeof o.provider !== 'string') {
    throw new BadSettingError('.svc/config.json provider must be a name');
  }
  return { provider: (o.provider as string | undefined) ?? null, providers };
}

/** One entry of `providers`: `{ command, writable? }` under a simple lowercase name. */
function readProvider(name: string, value: unknown): EngineConfig['providers'][string] {
  const where = `.svc/config.json providers.${name}`;
  const command = (value as { command?: unknown } | null)?.command;
  const writable = (value as { writable?: unknown } | null)?.writable;
  const keys = typeof value === 'object' && value !== null ? Object.keys(value) : [];
  const extra = keys.filter((k) => k !== 'command' && k !== 'writable');
  if (extra.length) throw new BadSettingError(`Unknown key "${extra[0]}" in ${where} (allowed: command, writable)`);
  if (!/^[a-z0-9][a-z0-9_-]{0,31}$/.test(name)) {
    throw new BadSettingError(`Provider name "${name}" in .svc/config.json is not a simple lowercase name`);
  }
  if (!Array.isArray(command) || command.length === 0 || !command.every((a) => typeof a === 'string' && a !== '')) {
    throw new BadSettingError(`${where}.command must be a non-empty argv array of strings`);
  }
  if (writable !== undefined && (!Array.isArray(writable) || !writable.every(isFolderName))) {
    throw new BadSettingError(`${where}.writable must be an array of folder paths (absolute or under HOME)`);
  }
  return writable === undefined ? { command: command as string[] } : { command: command as string[], writable };
}
