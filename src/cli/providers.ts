// `svc providers`: the report of GET /v1/providers (agent CLIs, versions, tested ranges) for this PATH and project.
import { parseFlags, type CliIo } from './io.ts';
import { loadOperatorConfig, readEngineConfigFile } from '../engine/config.ts';
import { createVersionProbe } from '../engine/cli-version.ts';
import { describeProviders, type ProviderReport } from '../control/provider-detect.ts';
import { safeJson } from '../safe-json.ts';
import { resolve } from 'node:path';
import { repoRoot } from '../engine/git.ts';
import { resolveRepo } from '../engine/launch.ts';

export const HELP = `Usage: svc providers [--json] [--repo DIR]

Lists the built-in agent CLIs (claude, codex, gemini, aider, opencode) and the
command providers in DIR/.svc/config.json (default: the git repository the
current directory is in, else that directory) and in the operator's
~/.svc/operator.json or /etc/svc/operator.json (theirs win): whether each is
on PATH, its version, and whether that version lies in the range the provider
conformance suite tested. --json prints the same array as
GET /v1/providers (without "default"). Exit 0; 2 when one of those files
cannot be read (a run refuses it too) or DIR is not a git repository.
`;

function standing(p: ProviderReport): string {
  if (!p.available) return 'not installed';
  if (p.kind === 'command') return 'command provider (not tested by svc)';
  if (p.tested_range === null) return 'no version tested';
  if (p.within_tested_range === null) return `version unknown (tested ${p.tested_range})`;
  return p.within_tested_range ? `tested (${p.tested_range})` : `UNTESTED: outside ${p.tested_range}`;
}

function table(rows: ProviderReport[]): string {
  const lines = [['NAME', 'VERSION', 'STATUS', 'PATH']];
  for (const p of rows) lines.push([p.name, p.version ?? '-', standing(p), p.path ?? '-']);
  const widths = lines[0]!.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)));
  const pad = (l: string[]) => l.map((cell, i) => (i < l.length - 1 ? cell.padEnd(widths[i]!) : cell)).join('  ');
  return lines.map(pad).join('\n');
}

export default async function providers(io: CliIo): Promise<number> {
  const { values } = parseFlags(io.argv, { json: { type: 'boolean' }, repo: { type: 'string' } }, 0);
  // The project as `svc start` finds it: from a subfolder its root, and a --repo that is none is refused, not
  // listed as a project without providers.
  const dir = values.repo !== undefined ? resolveRepo(resolve(values.repo)) : repoRoot(process.cwd()) ?? process.cwd();
  const file = readEngineConfigFile(dir);
  // The operator's entries are those a run uses, over the project's of the same name (docs/engine.md, "The
  // operator's file"): left out, a provider set up there as the docs say looked missing.
  const commands = { ...file?.config.providers, ...loadOperatorConfig(io.env).providers };
  const rows = await describeProviders(commands, io.env.PATH, createVersionProbe(io.env));
  io.stdout(values.json ? `${safeJson(rows)}\n` : `${table(rows)}\n`);
  return 0;
}
