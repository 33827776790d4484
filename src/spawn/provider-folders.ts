// The config and login folders each built-in provider CLI writes; they stay writable inside the sandbox.
import { join } from 'node:path';
import { neverWritable } from './never-writable.ts';

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
  const asked = declared.map((p) => (p.startsWith('/') ? p : join(home, p))).filter((p) => !neverWritable(p, home));
  return [...own.map((p) => join(home, p)), ...asked];
}
