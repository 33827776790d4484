// `svc init`: a first run with no API key, by a stand-in `command` provider in the repository's .svc/.
import { join } from 'node:path';
import { parseFlags, type CliIo } from './io.ts';
import { ConflictError } from '../errors.ts';
import { resolveRepo } from '../engine/launch.ts';
import { makePlainPath, withDir, writeNoFollowIn } from '../engine/safe-fs.ts';
import { pathKind } from '../spawn/tree.ts';

export const HELP = `Usage: svc init [--repo DIR] [--force]

Writes a stand-in agent that needs no API key into the repository's .svc/:
  .svc/agent.sh      adds the task it was given (stdin) to svc-hello.md: each run changes it
  .svc/config.json   {"provider": "hello", "providers": {"hello": {"command": ["sh", ".svc/agent.sh"]}}}
Then \`svc start "say hello"\` runs it in the sandbox and records the diff, checks and receipt.
Commit .svc/ before a --worktree or --pr run: a worktree holds only what is committed.

Options:
  --repo DIR   the repository (default: the current directory)
  --force      overwrite an existing .svc/config.json or .svc/agent.sh
`;

/** The stand-in agent; the same text is in README.md and docs/engine.md. */
const STAND_IN_AGENT = `#!/bin/sh
# A stand-in agent: no model, no API key. svc runs it in the sandbox, in the run's working tree, with the task on
# stdin (and in $SVC_TASK_FILE); what it changes there becomes the run's diff. A JSON line on stdout reports cost.
# It appends: a run that changed nothing would fail, so the same brief given twice must still change the file.
cat >> svc-hello.md
echo '{"type":"svc.cost","usd":0,"tokens_in":0,"tokens_out":0}'
`;

const STAND_IN_CONFIG = { provider: 'hello', providers: { hello: { command: ['sh', '.svc/agent.sh'] } } };

export default async function init(io: CliIo): Promise<number> {
  const { values } = parseFlags(io.argv, { repo: { type: 'string' }, force: { type: 'boolean' } }, 0);
  const repo = resolveRepo(values.repo ?? process.cwd());
  const config = join(repo, '.svc', 'config.json');
  const agent = join(repo, '.svc', 'agent.sh');
  for (const path of [config, agent]) {
    if (pathKind(path) !== null && !values.force) {
      throw new ConflictError(`${path} already exists; pass --force to overwrite it`);
    }
  }
  // The repository may have committed .svc or either name as a link: svc writes into the repository, never through one.
  withDir(makePlainPath(repo, ['.svc'], 0o777), (dir) => {
    writeNoFollowIn(dir, 'agent.sh', STAND_IN_AGENT, 0o755);
    writeNoFollowIn(dir, 'config.json', JSON.stringify(STAND_IN_CONFIG, null, 2) + '\n', 0o666);
  });
  io.stdout(`Wrote ${agent} and ${config}: a stand-in agent named "hello" that needs no API key.\n` +
    'Try: svc start "say hello"   (then look at svc-hello.md and .svc/runs/<run>/artifacts/)\n' +
    'Commit .svc/ before a --worktree or --pr run. To use a real agent, install one (claude, codex, gemini, aider, ' +
    'opencode) and remove "provider" from .svc/config.json, or pass --provider NAME.\n');
  return 0;
}
