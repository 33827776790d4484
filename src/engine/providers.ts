// Provider adapters: each tool's documented non-interactive invocation, plus `command` providers from .svc/config.json.
import { UnavailableError } from '../errors.ts';
import { which } from '../spawn/which.ts';
import type { EngineConfig } from './config.ts';

export const BUILTIN_PROVIDERS = ['claude', 'codex', 'gemini', 'aider', 'opencode'] as const;

export interface ResolvedProvider {
  name: string;
  /** Parser family: a builtin name, or "command". */
  kind: string;
  /** argv[0] is an absolute path; `{task_file}` is replaced when the run starts. */
  argv: string[];
  /** Whether the prompt is written to stdin (it is always in SVC_TASK_FILE too). */
  stdinPrompt: boolean;
  /** A command provider's folders writable in its sandbox (absolute), as setting-authority.ts allowed them. */
  writable?: string[];
  /** False: its sandbox shows the program file alone, not the folder it lives in (a repository's own provider). */
  showFolder?: boolean;
}

const BUILTIN_ARGS: Record<(typeof BUILTIN_PROVIDERS)[number], { args: string[]; stdin: boolean }> = {
  // stream-json (which -p wants with --verbose) shows each message as it happens; its last line carries the cost.
  // acceptEdits alone denies every headless Bash call (no tests, no question), so Bash is allowed too;
  // bypassPermissions would do it, but claude refuses it as root.
  claude: {
    args: ['-p', '--output-format', 'stream-json', '--verbose', '--permission-mode', 'acceptEdits',
      '--allowedTools', 'Bash'],
    stdin: true,
  },
  // exec never asks for approval. Its own sandbox is off, as every other CLI's is: svc's is the boundary, and under
  // workspace-write its nested bwrap fails ("execvp codex-linux-sandbox") and $SVC_QUESTION_FILE is out of its reach.
  codex: { args: ['exec', '--json', '--sandbox', 'danger-full-access', '-'], stdin: true },
  // Headless when stdin is not a TTY. It refuses to run headless in a folder it does not trust (a fresh worktree):
  // --skip-trust trusts it for this session only, writing nothing to the user's trustedFolders.json.
  gemini: { args: ['--output-format', 'json', '--yolo', '--skip-trust'], stdin: true },
  // aider takes the task from a file; svc commits, so aider's own auto-commits are off.
  aider: {
    args: ['--yes-always', '--no-auto-commits', '--no-pretty', '--no-stream', '--message-file', '{task_file}'],
    stdin: false,
  },
  // --file takes an array and would swallow a message after it, so the message comes first.
  opencode: {
    args: ['run', '--format', 'json', 'Do the task described in the attached file.', '--file', '{task_file}'],
    stdin: false,
  },
};

export class ProviderMissingError extends UnavailableError {}

export function isBuiltin(name: string): name is (typeof BUILTIN_PROVIDERS)[number] {
  return (BUILTIN_PROVIDERS as readonly string[]).includes(name);
}

function resolveNamed(name: string, config: EngineConfig, pathVar: string | undefined): ResolvedProvider | null {
  const configured = config.providers[name];
  if (configured) {
    const [bin, ...rest] = configured.command;
    const path = which(bin!, pathVar);
    if (!path) {
      const where = pathVar ?? '';
      throw new ProviderMissingError(`Provider "${name}" runs "${bin}", which was not found on PATH (${where})`);
    }
    return {
      name, kind: 'command', argv: [path, ...rest], stdinPrompt: true, writable: configured.writable ?? [],
      showFolder: configured.showFolder ?? true,
    };
  }
  if (!isBuiltin(name)) return null;
  const path = which(name, pathVar);
  if (!path) return null;
  const spec = BUILTIN_ARGS[name];
  return { name, kind: name, argv: [path, ...spec.args], stdinPrompt: spec.stdin };
}

/** Picks --provider, else config "provider", else the first builtin on PATH; says what it looked for when none is. */
export function resolveProvider(
  requested: string | null, config: EngineConfig, env: NodeJS.ProcessEnv,
): ResolvedProvider {
  const name = requested ?? config.provider;
  if (name) {
    const found = resolveNamed(name, config, env.PATH);
    if (found) return found;
    if (isBuiltin(name)) {
      throw new ProviderMissingError(`Provider "${name}" not found: looked for the "${name}" executable on PATH`);
    }
    const configured = Object.keys(config.providers);
    throw new ProviderMissingError(
      `Unknown provider "${name}": builtins are ${BUILTIN_PROVIDERS.join(', ')}; .svc/config.json providers are ` +
        (configured.length ? configured.join(', ') : '(none)'),
    );
  }
  for (const builtin of BUILTIN_PROVIDERS) {
    const found = resolveNamed(builtin, config, env.PATH);
    if (found) return found;
  }
  throw new ProviderMissingError(
    `No provider found: looked for ${BUILTIN_PROVIDERS.join(', ')} on PATH and a "provider" in .svc/config.json. ` +
      'Install one and pass --provider NAME, or try svc with no API key: `svc init` writes a command provider ' +
      '(a small script svc runs as the agent) into .svc/ (README "Quick start")',
  );
}
