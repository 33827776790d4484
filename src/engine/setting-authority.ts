// Who may set what (docs/engine.md): every setting of .svc/ and the operator's files, classified and decided.
import { join } from 'node:path';
import { within } from '../spawn/bwrap-argv.ts';
import { neverWritable } from '../spawn/never-writable.ts';
import type { EngineConfig, OperatorConfig, ProviderEntry } from './config.ts';
import type { RunLimits } from './policy.ts';
import { isBuiltin } from './providers.ts';
import { RefusedError } from '../errors.ts';

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
export interface Widening {
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
