// `svc trust`: allow the exact bytes of a repository's .svc/config.json to widen the sandbox of runs you start at the
// CLI; runs a server starts never take these settings from a repository (src/engine/setting-authority.ts).
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute } from 'node:path';
import { parseFlags, type CliIo } from './io.ts';
import { NotFoundError } from '../errors.ts';
import { resolveRepo } from '../engine/launch.ts';
import { addTrust, readEngineConfigFile, readTrust, revokeTrust, trustFile } from '../engine/config.ts';
import { decideSettings } from '../engine/setting-authority.ts';
import { createHash } from 'node:crypto';

export const HELP = `Usage: svc trust [--repo DIR]
       svc trust --list
       svc trust --revoke [--repo DIR | PATH]

A repository's .svc/config.json may ask for settings that widen the agent's
sandbox: "writable" folders outside the run's working tree, "env" names passed
to the agent, a provider under a built-in's name. A run you start at the CLI
uses them only once you trusted that exact file: \`svc trust\` shows what it
asks for and records the file's sha256 in ~/.svc/trust.json. Any change to the
file needs trusting again. Runs a server starts never use them (only the
operator's ~/.svc/operator.json or /etc/svc/operator.json can grant them).

Options:
  --repo DIR   the repository (default: the current directory)
  --list       the trusted files, and whether each still matches
  --revoke     forget the repository's file (or the trusted PATH)
`;

function configOf(repoDir: string) {
  const repo = resolveRepo(repoDir);
  const file = readEngineConfigFile(repo);
  if (!file) throw new NotFoundError(`${repo} has no .svc/config.json: there is nothing to trust`);
  return { repo, file };
}

export default async function trust(io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(io.argv, {
    repo: { type: 'string' }, list: { type: 'boolean' }, revoke: { type: 'boolean' },
  });
  if (values.list) {
    const records = readTrust(io.env);
    if (!records.length) io.stdout(`No trusted files (${trustFile(io.env)})\n`);
    for (const r of records) {
      const now = existsSync(r.path) ? createHash('sha256').update(readFileSync(r.path)).digest('hex') : null;
      const state = now === null ? 'missing' : now === r.sha256 ? 'trusted' : 'changed since trusted: not used';
      io.stdout(`${r.path}  ${r.sha256.slice(0, 12)}  ${r.trusted_at}  ${state}\n`);
    }
    return 0;
  }
  if (values.revoke) {
    const path = positionals[0] && isAbsolute(positionals[0]) ? positionals[0] : configOf(values.repo ?? '.').file.path;
    if (!revokeTrust(io.env, path)) throw new NotFoundError(`${path} was not trusted`);
    io.stdout(`No longer trusted: ${path}\n`);
    return 0;
  }
  const { repo, file } = configOf(values.repo ?? process.cwd());
  const asks = decideSettings(file.config, { env: [], providers: {} }, {
    server: false, trusted: false, home: io.env.HOME || homedir(), workdir: repo,
    pathDirs: (io.env.PATH ?? '').split(':').filter(isAbsolute),
  });
  const record = addTrust(io.env, file.path, file.sha256);
  io.stdout(`Trusted ${record.path} (sha256 ${record.sha256.slice(0, 12)}…) for runs you start at the CLI.\n`);
  if (!asks.widening.length) io.stdout('It asks for nothing beyond what any repository may set.\n');
  for (const w of asks.widening) io.stdout(`  allowed: ${w.setting} ${w.what}\n`);
  for (const note of asks.notes) io.stdout(`  still refused: ${note}\n`);
  return 0;
}
