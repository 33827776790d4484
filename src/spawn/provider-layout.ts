// What each built-in provider CLI keeps in its HOME (paths relative to it), sorted by who may change it (DESIGN §7a
// "Repositories don't meet"; docs/engine.md "Provider homes" says what each kind gets).
import { join } from 'node:path';
import { neverWritable } from './never-writable.ts';

export interface ProviderLayout {
  /** The CLI's config and login folders: writable inside the sandbox, laid fresh for each invocation. */
  roots: string[];
  /** Files the CLI obeys: copied from the template into the invocation's fresh folders (writable copies, dropped). */
  files: string[];
  /** Folders of things the CLI runs or obeys: bound read-only from the template. */
  dirs: string[];
  /** The user's own login: bound read-only from the real HOME. */
  login: string[];
  /** Session state and transcripts: the repository's own, writable, kept between its runs. */
  kept: string[];
  /** Inside a kept folder, what is removed before every invocation (downloaded programs the CLI would run). */
  scrub: string[];
}

const NONE: ProviderLayout = { roots: [], files: [], dirs: [], login: [], kept: [], scrub: [] };

const under = (root: string, names: string[]): string[] => names.map((n) => `${root}/${n}`);

const LAYOUTS: Record<string, ProviderLayout> = {
  claude: {
    // ~/.claude.json is a root of its own: laid from the template, minus its per-project table.
    roots: ['.claude', '.claude.json', '.config/claude'],
    files: under('.claude', ['settings.json', 'CLAUDE.md']),
    dirs: under('.claude', ['commands', 'agents', 'skills', 'plugins', 'hooks', 'output-styles', 'rules']),
    login: ['.claude/.credentials.json'],
    kept: under('.claude', ['projects', 'todos', 'file-history']),
    scrub: [],
  },
  codex: {
    roots: ['.codex'],
    files: under('.codex', ['config.toml', 'AGENTS.md', 'AGENTS.override.md', 'hooks.json']),
    dirs: under('.codex', ['prompts', 'skills', 'rules']),
    login: ['.codex/auth.json'],
    kept: under('.codex', ['sessions', 'archived_sessions']),
    scrub: [],
  },
  gemini: {
    roots: ['.gemini'],
    files: under('.gemini', ['settings.json', 'GEMINI.md', '.env', 'system.md', 'trustedFolders.json',
      'keybindings.json']),
    dirs: under('.gemini', ['commands', 'extensions', 'agents', 'skills', 'policies']),
    login: under('.gemini', ['oauth_creds.json', 'google_accounts.json', 'mcp-oauth-tokens.json']),
    // Its chats and checkpoints live in tmp/, beside the ripgrep it downloads to tmp/bin.
    kept: under('.gemini', ['tmp', 'history']),
    scrub: ['.gemini/tmp/bin'],
  },
  opencode: {
    roots: ['.config/opencode', '.local/share/opencode', '.cache/opencode', '.local/state/opencode'],
    files: under('.config/opencode', ['opencode.json', 'opencode.jsonc', 'config.json', 'AGENTS.md']),
    dirs: under('.config/opencode', ['agent', 'agents', 'command', 'commands', 'plugin', 'plugins', 'mode', 'modes',
      'tool', 'tools', 'skill', 'skills', 'themes']),
    login: under('.local/share/opencode', ['auth.json', 'mcp-auth.json']),
    // Its session database and storage live in the data folder, beside its login and the tools it downloads.
    kept: ['.local/share/opencode'],
    scrub: ['.local/share/opencode/bin'],
  },
  aider: { ...NONE, roots: ['.aider', '.aider.conf.yml', '.cache/aider'] },
};

/** The layout of `provider` (a built-in name); a `command` provider's or a check's is empty. */
export function providerLayout(provider: string): ProviderLayout {
  return LAYOUTS[provider] ?? NONE;
}

/** Absolute paths of the folders `provider` may write under `home`; `declared` comes from a command provider. */
export function providerFolders(provider: string, home: string, declared: string[] = []): string[] {
  const asked = declared.map((p) => (p.startsWith('/') ? p : join(home, p))).filter((p) => !neverWritable(p, home));
  return [...providerLayout(provider).roots.map((p) => join(home, p)), ...asked];
}
