// The config and login folders each built-in provider CLI writes; they stay writable inside the sandbox.
import { join } from 'node:path';

const FOLDERS: Record<string, string[]> = {
  claude: ['.claude', '.claude.json', '.config/claude'],
  codex: ['.codex'],
  gemini: ['.gemini'],
  opencode: ['.config/opencode', '.local/share/opencode', '.cache/opencode', '.local/state/opencode'],
  aider: ['.aider', '.aider.conf.yml', '.cache/aider'],
};

/** Absolute paths of the folders `provider` may write under `home`; `declared` comes from a command provider. */
export function providerFolders(provider: string, home: string, declared: string[] = []): string[] {
  const own = FOLDERS[provider] ?? [];
  return [...own, ...declared].map((p) => (p.startsWith('/') ? p : join(home, p)));
}
