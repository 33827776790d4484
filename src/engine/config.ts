// The engine's settings files: .svc/config.json, the operator's files, and what `svc trust` trusted.
import { isJsonObject, obj, tryParseJson } from '../untrusted.ts';
import { readFileSync, existsSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { BadSettingError } from '../errors.ts';
import { onlyKeys, parseNetwork, readLimits, type RunLimits } from './policy.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { isSecretName } from '../spawn/start.ts';
import { orNull, realOrNull } from '../spawn/tree.ts';
import { writeJsonAtomic } from './safe-fs.ts';
import { readRepoSvcFile } from './plain-tree.ts';

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
  /** The operator's caps on every run's limits (operator.json only). */
  limits?: Partial<RunLimits>;
  /** Where every run's gate may connect (operator.json `network.allow` only): the one way to open an address the
   * gate refuses, such as a local model server's `127.0.0.2:8080` (docs/gate.md "Address rules"). */
  network?: string[];
}

const badSetting = (message: string): Error => new BadSettingError(message);

/** A folder a provider may write: absolute, or relative to HOME without climbing out of it. */
function isFolderName(value: unknown): value is string {
  return typeof value === 'string' && value !== '' && !value.includes('\0') && !value.split('/').includes('..');
}

/** A provider's name wherever one is given (config files, /v1/config, POST /v1/start), so all accept the same. */
export const PROVIDER_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;

function isEnvName(value: unknown): value is string {
  return typeof value === 'string' && /^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(value);
}

/** A repository's config.json larger than this is not one a person wrote. */
const MAX_CONFIG = 1024 * 1024;

/** `<repo>/.svc/config.json` read once (as policy.json is: never through a link, never unbounded), with its path and
 * the sha256 of the bytes parsed (`svc trust`); or null. */
export function readEngineConfigFile(repo: string): { config: EngineConfig; path: string; sha256: string } | null {
  const file = readRepoSvcFile(repo, 'config.json', MAX_CONFIG, (why) => new BadSettingError(`.svc/${why}`));
  if (file === null) return null;
  const config = parseEngineConfig(file.bytes, '.svc/config.json', ['provider', 'providers', 'env']);
  return { config, path: file.path, sha256: file.sha256 };
}

/** Parses a config file's bytes; `where` names the file in errors, `keys` are the top-level keys it may hold. */
export function parseEngineConfig(bytes: Buffer, where: string, keys: readonly string[]): EngineConfig {
  const raw = tryParseJson(bytes.toString('utf8'));
  if (raw === undefined) throw new BadSettingError(`${where} is not valid JSON`);
  if (!isJsonObject(raw)) throw new BadSettingError(`${where} must hold a JSON object`);
  onlyKeys(raw, keys, where, badSetting);
  const providers: EngineConfig['providers'] = {};
  const list = raw.providers ?? {};
  if (!isJsonObject(list)) throw new BadSettingError(`${where} providers must be an object`);
  for (const [name, value] of Object.entries(list)) providers[name] = readProvider(name, value, where);
  if (raw.provider !== undefined && raw.provider !== null && typeof raw.provider !== 'string') {
    throw new BadSettingError(`${where} provider must be a name`);
  }
  if (raw.env !== undefined && (!Array.isArray(raw.env) || !raw.env.every(isEnvName))) {
    throw new BadSettingError(`${where} env must be an array of environment variable names`);
  }
  const config: EngineConfig = { provider: (raw.provider as string | undefined) ?? null, providers };
  if (raw.env !== undefined) config.env = raw.env as string[];
  if (raw.limits !== undefined) config.limits = readLimits(raw.limits, where, false, badSetting);
  if (raw.network !== undefined) config.network = parseNetwork(raw.network, where, badSetting, ['allow']).allow;
  return config;
}

function readProvider(name: string, value: unknown, file: string): ProviderEntry {
  const where = `${file} providers.${name}`;
  const { command, writable } = obj(value);
  if (isJsonObject(value)) onlyKeys(value, ['command', 'writable'], where, badSetting);
  if (!PROVIDER_NAME.test(name)) {
    throw new BadSettingError(`Provider name "${name}" in ${file} is not a simple lowercase name`);
  }
  if (!Array.isArray(command) || command.length === 0 || !command.every((a) => typeof a === 'string' && a !== '')) {
    throw new BadSettingError(`${where}.command must be a non-empty argv array of strings`);
  }
  if (command.some((arg: string) => arg.includes('\0'))) {
    throw new BadSettingError(`${where}.command has an argument with a NUL byte, which no program can be given`);
  }
  if (writable !== undefined && (!Array.isArray(writable) || !writable.every(isFolderName))) {
    throw new BadSettingError(`${where}.writable must be an array of folder paths (absolute or under HOME)`);
  }
  return writable === undefined ? { command: command as string[] } : { command: command as string[], writable };
}

export type OperatorConfig = Required<Omit<EngineConfig, 'provider'>>;

/** Both operator files merged; a broken one is an error naming it (fail closed, like the repository's config). */
export function loadOperatorConfig(env: NodeJS.ProcessEnv): OperatorConfig {
  const merged: OperatorConfig = { env: [], providers: {}, limits: {}, network: [] };
  for (const path of ['/etc/svc/operator.json', join(svcHomeOf(env), 'operator.json')]) {
    if (!existsSync(path)) continue;
    const config = parseEngineConfig(readFileSync(path), path, ['env', 'providers', 'limits', 'network']);
    // The system file's caps and the home file's both hold: the lower wins.
    for (const [key, cap] of Object.entries(config.limits ?? {}) as [keyof RunLimits, number][]) {
      merged.limits[key] = Math.min(merged.limits[key] ?? cap, cap);
    }
    for (const name of config.env ?? []) if (!merged.env.includes(name)) merged.env.push(name);
    for (const entry of config.network ?? []) if (!merged.network.includes(entry)) merged.network.push(entry);
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

/** The operator's passed names for a server's launcher; none when its file is unreadable (the run then fails). */
export function operatorPassedEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  return orNull(() => passedValues(loadOperatorConfig(env).env, env)) ?? {};
}

// Which repository config files a person trusted (`svc trust`, as direnv does: real path and sha256 of the bytes),
// kept in ~/.svc/trust.json; only CLI runs consult it (docs/engine.md "Who may set what").
type TrustRecord = { path: string; sha256: string; trusted_at: string };

export function trustFile(env: NodeJS.ProcessEnv): string {
  return join(svcHomeOf(env), 'trust.json');
}

/** The real path a record is keyed by: links resolved, so two names of one file share one record. */
function trustKey(path: string): string {
  const folder = realOrNull(dirname(path));
  // Gone: a record of a removed file is still found by the path it was trusted under.
  return realOrNull(path) ?? (folder === null ? path : join(folder, basename(path)));
}

export function readTrust(env: NodeJS.ProcessEnv): TrustRecord[] {
  const path = trustFile(env);
  if (!existsSync(path)) return [];
  const raw = tryParseJson(readFileSync(path, 'utf8'));
  if (raw === undefined) {
    throw new BadSettingError(`${path} is not valid JSON; remove it and trust your repositories again`);
  }
  const files = isJsonObject(raw) ? raw.files : undefined;
  if (!Array.isArray(files)) throw new BadSettingError(`${path} must hold {"version":1,"files":[…]}`);
  return files.filter((f): f is TrustRecord => isJsonObject(f) && typeof f.path === 'string' &&
    typeof f.sha256 === 'string' && typeof f.trusted_at === 'string');
}

function writeTrust(env: NodeJS.ProcessEnv, files: TrustRecord[]): void {
  writeJsonAtomic(trustFile(env), { version: 1, files }, 0o600);
}

/** Whether `path` was trusted with these exact bytes (their sha256), or trusted and changed since, or never. */
export function trustOf(env: NodeJS.ProcessEnv, path: string, sha256: string): 'trusted' | 'changed' | null {
  const key = trustKey(path);
  const record = readTrust(env).find((r) => r.path === key);
  return record ? (record.sha256 === sha256 ? 'trusted' : 'changed') : null;
}

export function addTrust(env: NodeJS.ProcessEnv, path: string, sha256: string): TrustRecord {
  const record = { path: trustKey(path), sha256, trusted_at: new Date().toISOString() };
  writeTrust(env, [...readTrust(env).filter((r) => r.path !== record.path), record]);
  return record;
}

export function revokeTrust(env: NodeJS.ProcessEnv, path: string): boolean {
  const key = trustKey(path);
  const files = readTrust(env);
  const kept = files.filter((r) => r.path !== key);
  if (kept.length === files.length) return false;
  writeTrust(env, kept);
  return true;
}
