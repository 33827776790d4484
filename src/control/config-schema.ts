// Control Plane settings as data (name, type, default, description, secret) and their validation; no storage here.
import { isJsonObject } from '../json-value.ts';
import { isAbsolute } from 'node:path';
import { invalidField } from '../http/http-error.ts';
import type { ConfigStore } from '../db/control-stores.ts';
import { isBuiltin } from '../engine/providers.ts';
import { isRelativeProgram, PROVIDER_NAME } from '../engine/config.ts';

export interface Setting {
  key: string;
  type: 'string' | 'integer' | 'path[]' | 'providers';
  /** `null` means "unset"; every setting accepts null to go back to its default. */
  default: unknown;
  description: string;
  secret: boolean;
  /** A detail of this machine (its paths, the commands it runs): shown only to a caller loopback-only routes admit. */
  loopbackOnly?: boolean;
  min?: number;
}

export const SETTINGS: readonly Setting[] = [
  {
    key: 'default_provider', type: 'string', default: null, secret: false,
    description: 'Provider /v1/start uses when a request names none: a built-in name, a provider of the operator\'s ' +
      'operator.json or a key of `providers`; ' +
      'null leaves the choice to the project (.svc/config.json "provider", else the first built-in on PATH)',
  },
  {
    key: 'providers', type: 'providers', default: {}, secret: false, loopbackOnly: true,
    description: 'Command providers: name → {"command": [argv…]}, the operator\'s for every run this server starts; ' +
      'the prompt arrives on stdin and in SVC_TASK_FILE',
  },
  {
    key: 'repos', type: 'path[]', default: [], secret: false, loopbackOnly: true,
    description: 'Absolute paths of repositories runs may be started in (when non-empty, /v1/start refuses any ' +
      'other); their folder names are listed by /v1/repos',
  },
  {
    key: 'max_concurrent_runs', type: 'integer', default: 2, min: 1, secret: false,
    description: 'How many runs of this source may be queued, running, blocked or stopping at once; start, resume ' +
      'and retry beyond it answer 429',
  },
  {
    key: 'retention_days', type: 'integer', default: 0, min: 0, secret: false,
    description: 'Days to keep ended runs (with their events and artifacts) after they end; 0 keeps them forever',
  },
];
export const REDACTED = '***';

export type ConfigValues = Record<string, unknown>;

function kindOf(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number' && !Number.isInteger(value)) return 'number';
  return typeof value === 'number' ? 'integer' : typeof value;
}

function invalid(key: string, message: string): never {
  throw invalidField(key, message);
}

/** The setting goes to each run's launcher as one environment variable, which Linux caps at 128 KiB. */
const MAX_PROVIDERS_BYTES = 64 * 1024;

function checkProviders(value: unknown): void {
  const bad = (message: string): never => invalid('providers', message);
  if (!isJsonObject(value)) {
    bad(`Setting "providers" must be an object of name → {"command": [strings]} (got ${kindOf(value)})`);
  }
  if (Buffer.byteLength(JSON.stringify(value)) > MAX_PROVIDERS_BYTES) {
    bad(`Setting "providers" must be at most ${MAX_PROVIDERS_BYTES / 1024} KiB as JSON`);
  }
  for (const [name, spec] of Object.entries(value as Record<string, unknown>)) {
    if (!PROVIDER_NAME.test(name)) {
      bad(`Setting "providers" has a bad name "${name.slice(0, 64)}" (lowercase letters, digits, - and _)`);
    }
    if (isBuiltin(name)) {
      bad(`Setting "providers.${name}" would hide the built-in provider of that name`);
    }
    if (!isJsonObject(spec)) bad(`Setting "providers.${name}" must be an object {"command": [strings]}`);
    for (const k of Object.keys(spec as object)) {
      if (k !== 'command') bad(`Unknown setting "providers.${name}.${k.slice(0, 64)}"`);
    }
    const command = (spec as { command?: unknown }).command;
    if (!Array.isArray(command) || command.length === 0 ||
      !command.every((a) => typeof a === 'string' && a.length > 0 && !a.includes('\0'))) {
      bad(`Setting "providers.${name}.command" must be a non-empty array of non-empty strings`);
    }
    if (isRelativeProgram((command as string[])[0]!)) {
      bad(`Setting "providers.${name}.command" must start with a program on PATH or an absolute path`);
    }
  }
}

function checkValue(setting: Setting, value: unknown): void {
  const { key, type } = setting;
  const bad = (message: string): never => invalid(key, message);
  if (type === 'string') {
    if (typeof value !== 'string' || value.length === 0 || value.length > 4096) {
      bad(`Setting "${key}" must be a non-empty string (got ${kindOf(value)})`);
    }
  } else if (type === 'integer') {
    if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
      bad(`Setting "${key}" must be an integer (got ${kindOf(value)})`);
    }
    const n = value as number;
    if (setting.min !== undefined && n < setting.min) {
      bad(`Setting "${key}" must be at least ${setting.min} (got ${n})`);
    }
  } else if (type === 'path[]') {
    if (!Array.isArray(value)) bad(`Setting "${key}" must be an array of absolute paths (got ${kindOf(value)})`);
    for (const p of value as unknown[]) {
      if (typeof p !== 'string' || !isAbsolute(p) || p.includes('\0')) {
        bad(`Setting "${key}" must hold absolute paths only`);
      }
    }
  } else {
    checkProviders(value);
  }
}

/** The providers, by name, a run has besides the built-ins, given the `providers` setting: the server's reads the
 * operator's files too (config.ts controlRunProviders). */
type RunProviders = (setting: unknown) => Readonly<Record<string, unknown>>;

const settingAlone: RunProviders = (setting) => (isJsonObject(setting) ? setting : {});

/** Nothing is applied unless every key passes; a secret sent back as "***" keeps the stored value. */
export function mergeConfig(
  current: ConfigValues, update: Record<string, unknown>, runProviders: RunProviders = settingAlone,
  schema: readonly Setting[] = SETTINGS,
): ConfigValues {
  const next = { ...current };
  for (const [key, value] of Object.entries(update)) {
    const setting = schema.find((s) => s.key === key);
    if (!setting) invalid(key.slice(0, 128), `Unknown setting "${key.slice(0, 128)}"`);
    if (setting.secret && value === REDACTED) continue;
    if (value === null) {
      next[key] = structuredClone(setting.default);
      continue;
    }
    checkValue(setting, value);
    next[key] = structuredClone(value);
  }
  // Asked when either changes (an operator file edited since is the run's to report), and of those files only when
  // neither a built-in nor the setting has the name.
  const provider = next.default_provider;
  const asked = Object.hasOwn(update, 'default_provider') || Object.hasOwn(update, 'providers');
  if (asked && typeof provider === 'string' && !isBuiltin(provider) &&
    !Object.hasOwn(settingAlone(next.providers), provider) && !Object.hasOwn(runProviders(next.providers), provider)) {
    invalid('default_provider', `Setting "default_provider" names unknown provider "${provider.slice(0, 64)}"`);
  }
  return next;
}

/** Stored values over defaults, dropping keys the schema no longer has (a downgrade or removed setting). */
export function withDefaults(stored: ConfigValues): ConfigValues {
  const value = (s: Setting) => (Object.hasOwn(stored, s.key) ? stored[s.key] : structuredClone(s.default));
  return Object.fromEntries(SETTINGS.map((s) => [s.key, value(s)]));
}

/**
 * What a caller is shown: secrets as "***"; loopback-only settings (DESIGN §4: repositories and machine actions are
 * loopback only, /v1/repos and /v1/projects among them) left out unless the caller is local.
 */
export function redactConfig(
  values: ConfigValues, caller: 'local' | 'remote', schema: readonly Setting[] = SETTINGS,
): ConfigValues {
  const out = { ...values };
  for (const s of schema) {
    if (s.loopbackOnly && caller === 'remote') delete out[s.key];
    else if (s.secret && out[s.key] !== null && out[s.key] !== undefined) out[s.key] = REDACTED;
  }
  return out;
}

/** The settings in force: everything that reads config reads it through this. */
export function readEffectiveConfig(store: ConfigStore): { config: ConfigValues; version: number } {
  const stored = store.read();
  return { config: withDefaults(stored.values), version: stored.version };
}
