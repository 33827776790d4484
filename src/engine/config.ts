// The engine's settings files: .svc/config.json, the operator's files, what `svc trust` trusted, and who may set what.
import { isJsonObject } from '../json-value.ts';
import { obj, tryParseJson } from '../untrusted.ts';
import { readFileSync, existsSync } from 'node:fs';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { BadSettingError, RefusedError } from '../errors.ts';
import { onlyKeys, parseNetwork, readLimits, type RunLimits } from './policy.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { isPassableName, passedValues } from '../spawn/start.ts';
import { orNull, realOrNull } from '../spawn/tree.ts';
import { writeJsonAtomic } from './safe-fs.ts';
import { readRepoSvcFile } from './plain-tree.ts';
import { within } from '../spawn/bwrap-argv.ts';
import { neverWritable } from '../spawn/never-writable.ts';
import { isBuiltin, type ProviderEntry } from './providers.ts';

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

/** A program named from a folder (`./agent`, `bin/agent`) is found from wherever the process that runs it started: the
 * operator's providers and the Control Plane's have no such folder (a repository's are found from its tree). */
export function isRelativeProgram(program: string): boolean {
  return (program.includes('/') || program.includes('\\')) && !isAbsolute(program);
}

/** The operator's providers (`where`: the file or setting they came from), a relative program refused. */
function operatorsOwn(providers: Record<string, ProviderEntry>, where: string): Record<string, ProviderEntry> {
  for (const [name, { command }] of Object.entries(providers)) {
    if (isRelativeProgram(command[0]!)) {
      throw new BadSettingError(`${where} providers.${name}.command must start with a program on PATH or an ` +
        'absolute path: a relative one would be found from whatever folder svc was started in');
    }
  }
  return providers;
}

type OperatorConfig = Required<Omit<EngineConfig, 'provider'>>;

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
    Object.assign(merged.providers, operatorsOwn(config.providers, path));
  }
  // The Control Plane's settings are the operator's too (DESIGN §7a): its `providers` go over the files' for the runs
  // it starts, so a run runs what its UI lists (docs/control-config.md).
  Object.assign(merged.providers, controlProviders(env));
  return merged;
}

/** Holds the Control Plane's `providers` setting (JSON) for the `svc start` it runs: in its environment, never argv,
 * as a command may carry a token. */
const CONTROL_PROVIDERS_VAR = 'SVC_CONTROL_PROVIDERS';

/** What tells the `svc start` a Control Plane runs that it is the Control Plane's: its origin, and its `providers`
 * setting, which the run has as the operator's (controlProviders). */
export function controlRunEnv(providers: unknown): Record<string, string> {
  const some = isJsonObject(providers) && Object.keys(providers).length > 0;
  return { SVC_ORIGIN: 'control', ...(some ? { [CONTROL_PROVIDERS_VAR]: JSON.stringify(providers) } : {}) };
}

/** The providers every run a Control Plane with this environment and `providers` setting starts has, by name, besides
 * the built-ins: read as that run reads them (loadOperatorConfig), so what it lists and accepts is what a run can use.
 * A broken operator file throws its BadSettingError, as the run would. */
export function controlRunProviders(env: NodeJS.ProcessEnv, providers: unknown): Record<string, ProviderEntry> {
  return loadOperatorConfig({ ...env, [CONTROL_PROVIDERS_VAR]: undefined, ...controlRunEnv(providers) }).providers;
}

/** The providers a Control Plane handed the run it starts, read as a file's are; none for any other run. */
function controlProviders(env: NodeJS.ProcessEnv): Record<string, ProviderEntry> {
  const text = env.SVC_ORIGIN === 'control' ? env[CONTROL_PROVIDERS_VAR] : undefined;
  if (!text) return {};
  const where = `the Control Plane's "providers" setting (${CONTROL_PROVIDERS_VAR})`;
  const list = tryParseJson(text);
  if (!isJsonObject(list)) throw new BadSettingError(`${where} must hold a JSON object`);
  return operatorsOwn(
    Object.fromEntries(Object.entries(list).map(([name, entry]) => [name, readProvider(name, entry, where)])), where);
}

/** The operator's passed names for a server's launcher; none when its file is unreadable (the run then fails). */
export function operatorPassedEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  return orNull(() => passedValues(loadOperatorConfig(env).env, env)) ?? {};
}

/** The names operatorPassedEnv takes values of, whether or not `env` holds one. */
export function operatorPassedNames(env: NodeJS.ProcessEnv): string[] {
  return (orNull(() => loadOperatorConfig(env).env) ?? []).filter(isPassableName);
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

// Who may set what (docs/engine.md): every setting of .svc/ and the operator's files, classified and decided.

/** A repository's file asks for more than svc gives without the person's trust (`svc trust`). */
export class TrustNeededError extends RefusedError {}

interface SettingRule {
  file: 'policy.json' | 'config.json' | 'operator.json';
  key: string;
  authority: 'repository' | 'operator';
  why: string;
}

/** Every setting of every file, classified. A key a file accepts and this table does not list is a test failure. */
export const SETTING_RULES: readonly SettingRule[] = [
  { file: 'policy.json', key: 'checks', authority: 'repository',
    why: 'run in the agent\'s sandbox; an absolute program shows only its file, like a repository\'s provider' },
  { file: 'policy.json', key: 'pr', authority: 'repository', why: 'when svc opens a pull request' },
  { file: 'policy.json', key: 'max_usd', authority: 'repository', why: 'a budget only narrows' },
  { file: 'policy.json', key: 'sandbox', authority: 'repository',
    why: '"none" counts only for a run a person starts at the CLI, once they trusted the file (run-plan.ts)' },
  { file: 'policy.json', key: 'limits', authority: 'repository',
    why: 'bounds on the run\'s own sandbox, within the operator\'s caps (operator.json limits)' },
  { file: 'policy.json', key: 'network', authority: 'repository',
    why: 'its egress allow list, through the gate, never an address the gate refuses' },
  { file: 'config.json', key: 'provider', authority: 'repository', why: 'which provider a run uses by default' },
  { file: 'config.json', key: 'providers.<name>.command', authority: 'repository',
    why: 'a program that runs in the sandbox with the repository\'s authority, like a check' },
  { file: 'config.json', key: 'providers.<name>.writable', authority: 'operator',
    why: 'a host folder the agent could write (one inside the run\'s working tree is the repository\'s own)' },
  { file: 'config.json', key: 'providers.<name>.command[0] outside PATH and the repository', authority: 'operator',
    why: 'an absolute program path shows its folder read-only; a repository\'s shows only the program file' },
  { file: 'config.json', key: 'providers.<built-in name>', authority: 'operator',
    why: 'would replace a program the operator installed' },
  { file: 'config.json', key: 'env', authority: 'operator', why: 'passes svc\'s environment into the agent' },
  { file: 'operator.json', key: 'env', authority: 'operator', why: 'names passed to the agent and the checks' },
  { file: 'operator.json', key: 'providers', authority: 'operator', why: 'providers, built-in names included' },
  { file: 'operator.json', key: 'limits', authority: 'operator', why: 'caps on every run\'s limits' },
  { file: 'operator.json', key: 'network', authority: 'operator',
    why: 'destinations every run\'s gate allows; the only way to open an address the gate refuses (loopback, ...)' },
];

/** How the run was started, and what the repository's file is worth. */
export interface SettingsUse {
  /** A server started the run (SVC_ORIGIN names a server origin). */
  server: boolean;
  /** A person trusted this exact config file (`svc trust`); counts only for a CLI run. */
  trusted: boolean;
  home: string;
  /** The run's working tree: a folder inside it is the run's own. */
  workdir: string;
  /** svc's PATH folders: their programs run outside the sandbox, so they are never writable. */
  pathDirs: string[];
}

/** An operator-only setting a repository's file asks for and the run does not use. */
interface Widening {
  /** The provider it belongs to; null for a file-wide setting (`env`). */
  provider: string | null;
  setting: string;
  what: string;
}

/** `notes`: what was left out for another reason (never writable, shadowed by the operator's provider), for the log. */
type Collect = { widening: Widening[]; notes: string[] };

/** The entry's folders that may be writable; outside the run's tree only when `widened` (the operator's always are). */
function folders(name: string, entry: ProviderEntry, file: string, widened: boolean, use: SettingsUse, out: Collect) {
  const kept: string[] = [];
  for (const asked of entry.writable ?? []) {
    const path = asked.startsWith('/') ? asked : join(use.home, asked);
    const never = neverWritable(path, use.home, use.pathDirs);
    if (never) {
      out.notes.push(`${file} providers.${name}.writable "${asked}" is never writable (${never}): left out`);
    } else if (widened || within(path, use.workdir)) {
      kept.push(path);
    } else {
      out.widening.push({ provider: name, setting: `providers.${name}.writable`, what: `"${asked}" (${path})` });
    }
  }
  return kept;
}

/** The config one run uses (the operator's providers, then the repository's as the rule allows; `writable` made
 * absolute) and the names of svc's environment its agent and checks receive; `repo` null: the repository has none. */
export function decideSettings(
  repo: EngineConfig | null, operator: Pick<OperatorConfig, 'env' | 'providers'>, use: SettingsUse,
) {
  const out: Collect = { widening: [], notes: [] };
  const widen = !use.server && use.trusted;
  const providers: EngineConfig['providers'] = {};
  for (const [name, entry] of Object.entries(operator.providers)) {
    const writable = folders(name, entry, 'operator.json', true, use, out);
    providers[name] = { command: entry.command, writable };
  }
  for (const [name, entry] of Object.entries(repo?.providers ?? {})) {
    const operators = operator.providers[name];
    if (operators) {
      const same = JSON.stringify(operators.command) === JSON.stringify(entry.command);
      if (!same) out.notes.push(`.svc/config.json providers.${name} is not used: the operator defines "${name}"`);
      continue;
    }
    if (isBuiltin(name) && !widen) {
      out.widening.push({ provider: name, setting: `providers.${name}`, what: `redefines the built-in "${name}"` });
      continue;
    }
    const writable = folders(name, entry, '.svc/config.json', widen, use, out);
    // An absolute program elsewhere on the host would show its whole folder: for a repository, only the file itself.
    providers[name] = { command: entry.command, writable, showFolder: widen };
  }
  const env = [...operator.env];
  const asked = repo?.env ?? [];
  if (asked.length && widen) env.push(...asked.filter((n) => !env.includes(n)));
  else if (asked.length) out.widening.push({ provider: null, setting: 'env', what: asked.join(', ') });
  const config: EngineConfig = { provider: repo?.provider ?? null, providers };
  return { config, env, ...out };
}

export const OPERATOR_FILES = '~/.svc/operator.json or /etc/svc/operator.json';

/** The run-log line for a widening setting a server-started run does not use, and what happens instead. */
export function serverRefusal(w: Widening): string {
  const instead = w.setting === `providers.${w.provider}`
    ? `the built-in "${w.provider}" runs instead`
    : 'the run goes on without it';
  return `Refused .svc/config.json ${w.setting} ${w.what}: a repository cannot widen the sandbox of a run a server ` +
    `started (only the operator can, in ${OPERATOR_FILES}); ${instead}`;
}

/** The CLI's refusal: what the untrusted file asks for, and how to allow exactly that file (or `instead`). */
export function trustNeeded(
  widening: readonly Widening[], file: string, changed: boolean, instead = `move the setting to ${OPERATOR_FILES}`,
): string {
  const asks = widening.map((w) => `${w.setting} ${w.what}`).join('; ');
  const state = changed ? 'changed since you trusted it' : 'not trusted';
  return `Refusing to start: ${file} asks for settings only the operator or you can allow (${asks}), and the file is ` +
    `${state}. Read it, then run \`svc trust\` in the repository to allow exactly this file, or ${instead}`;
}

/** A repository's limits (or the defaults) within the operator's caps; a note for each one lowered. */
export function cappedLimits(limits: RunLimits, caps: Partial<RunLimits>): { limits: RunLimits; notes: string[] } {
  const capped = { ...limits };
  const notes: string[] = [];
  for (const [key, cap] of Object.entries(caps) as [keyof RunLimits, number][]) {
    if (capped[key] <= cap) continue;
    notes.push(`limits.${key} ${capped[key]} is above the operator's cap: ${cap} applies`);
    capped[key] = cap;
  }
  return { limits: capped, notes };
}
