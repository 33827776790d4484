// npm run docs:settings: writes the README's settings tables between its marker comments, from the one registry of
// variables (src/settings-registry.ts), the one table of what a repository or the operator sets in files
// (src/engine/config.ts) and the Control Plane's config keys (src/control/config-schema.ts).
// test/unit/settings-registry.test.ts fails when the README differs from this.
import { readFileSync, writeFileSync } from 'node:fs';
import { ALL_SETTINGS, type Setting, type SettingGroup } from '../src/settings-registry.ts';
import { SETTING_RULES } from '../src/engine/config.ts';
import { SETTINGS as CONTROL_CONFIG } from '../src/control/config-schema.ts';

export const START = '<!-- settings:start: written by `npm run docs:settings` from src/settings-registry.ts -->';
export const END = '<!-- settings:end -->';

/** The README's sections, in order: a title and the commands that read the group. */
const SETTING_GROUPS: Readonly<Record<SettingGroup, string>> = {
  control: 'Control Plane and clients (`svc control`, `svc runs`, `svc dashboard`, `svc answer`, `svc ship`, `run.sh`)',
  engine: 'Run engine (`svc start`, `svc pod`; [docs/engine.md](docs/engine.md#environment-the-engine-reads))',
  trigger: 'Trigger server (`svc trigger serve`, `svc repos`; [docs/trigger.md](docs/trigger.md#variables))',
  kubernetes: 'Kubernetes executor (`SVC_TRIGGER_EXECUTOR=kubernetes`; ' +
    '[docs/deploy.md](docs/deploy.md#the-kubernetes-executor-svc_trigger_executorkubernetes))',
  gate: 'Egress gate (`svc gate serve`, and a run\'s own gate; [docs/gate.md](docs/gate.md))',
  svc: 'Set by svc for the processes it starts (never read from you)',
  packaging: 'Packaging and tests only',
};

function cell(s: Setting): string {
  if (s.range) return `${s.shown ?? `\`${s.default}\``} (${s.range[0]}–${s.range[1]})`;
  const others = (s.choices ?? []).slice(1).map((c) => `\`${c}\``);
  return others.length ? `${s.default} (or ${others.join(', ')})` : String(s.default);
}

function table(group: SettingGroup): string[] {
  const rows = Object.entries(ALL_SETTINGS).filter(([, s]) => s.group === group);
  const name = (n: string, s: Setting) => `\`${n}\`${s.flag ? ` (\`${s.flag}\`)` : ''}${s.secret ? ' (secret)' : ''}`;
  if (group === 'svc') {
    return ['| variable | meaning |', '|---|---|', ...rows.map(([n, s]) => `| ${name(n, s)} | ${s.meaning} |`)];
  }
  return ['| variable | default | meaning |', '|---|---|---|',
    ...rows.map(([n, s]) => `| ${name(n, s)} | ${cell(s)} | ${s.meaning}${s.pattern ? ` (${s.pattern[1]})` : ''} |`)];
}

/** The generated part of the README, markers excluded. */
export function settingsMarkdown(): string {
  const groups = Object.entries(SETTING_GROUPS) as [SettingGroup, string][];
  const parts = groups.map(([group, title]) => [`**${title}**:`, '', ...table(group)].join('\n'));
  const files = ['**Files a repository or the operator writes** (who may set each key: ' +
    '[docs/engine.md](docs/engine.md#who-may-set-what)):', '',
    '| file | key | set by | why |', '|---|---|---|---|',
    ...SETTING_RULES.map((r) => {
      const file = r.file === 'operator.json' ? '~/.svc/operator.json' : `.svc/${r.file}`;
      return `| \`${file}\` | \`${r.key}\` | ${r.authority} | ${r.why} |`;
    })];
  const config = '**Control Plane config** (`PUT /v1/config`, kept in its database, set by whoever holds its token; ' +
    `[docs/control-config.md](docs/control-config.md)): ${CONTROL_CONFIG.map((c) => `\`${c.key}\``).join(', ')}.`;
  return [...parts, files.join('\n'), config].join('\n\n');
}

/** `readme` with its settings tables replaced by the registry's. */
export function withSettings(readme: string): string {
  const from = readme.indexOf(START);
  const to = readme.indexOf(END);
  if (from < 0 || to < from) throw new Error(`README.md lacks the markers ${START} … ${END}`);
  return `${readme.slice(0, from + START.length)}\n${settingsMarkdown()}\n${readme.slice(to)}`;
}

if (import.meta.main) {
  const path = new URL('../README.md', import.meta.url);
  writeFileSync(path, withSettings(readFileSync(path, 'utf8')));
}
