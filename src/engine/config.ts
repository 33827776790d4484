// The project's engine config .svc/config.json: the default provider and `command` providers (argv arrays, no shell).
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';

export interface EngineConfig {
  provider: string | null;
  providers: Record<string, { command: string[] }>;
}

export function loadEngineConfig(repo: string): EngineConfig {
  const path = join(repo, '.svc', 'config.json');
  if (!existsSync(path)) return { provider: null, providers: {} };
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    throw new Error('.svc/config.json is not valid JSON');
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new Error('.svc/config.json must hold a JSON object');
  const o = raw as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (key !== 'provider' && key !== 'providers') throw new Error(`Unknown key "${key}" in .svc/config.json (allowed: provider, providers)`);
  }
  const providers: EngineConfig['providers'] = {};
  const list = o.providers ?? {};
  if (typeof list !== 'object' || list === null || Array.isArray(list)) throw new Error('.svc/config.json providers must be an object');
  for (const [name, value] of Object.entries(list as Record<string, unknown>)) {
    const command = (value as { command?: unknown } | null)?.command;
    if (!/^[a-z0-9][a-z0-9_-]{0,31}$/.test(name)) throw new Error(`Provider name "${name}" in .svc/config.json is not a simple lowercase name`);
    if (!Array.isArray(command) || command.length === 0 || !command.every((a) => typeof a === 'string' && a !== '')) {
      throw new Error(`.svc/config.json providers.${name}.command must be a non-empty argv array of strings`);
    }
    providers[name] = { command: command as string[] };
  }
  if (o.provider !== undefined && o.provider !== null && typeof o.provider !== 'string') throw new Error('.svc/config.json provider must be a name');
  return { provider: (o.provider as string | undefined) ?? null, providers };
}
