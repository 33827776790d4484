// Folders no sandbox ever gets writable, whoever asks (the operator included; DESIGN §7a), nor any folder holding one
// or a link into one: what a program outside the sandbox reads or runs (docs/engine.md "Never-writable folders").
import { existsSync } from 'node:fs';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { SYSTEM_FOLDERS, within } from './bwrap-argv.ts';
import { realOrNull } from './tree.ts';

/** Whole trees of the system: nothing in them, and nothing holding them, is ever writable. */
const SYSTEM_TREES = [...SYSTEM_FOLDERS, '/etc', '/boot', '/var', '/run', '/proc', '/sys', '/dev', '/opt', '/srv',
  '/snap', '/nix', '/mnt', '/media'];

/** Credentials a user's HOME commonly holds (also masked wherever a bound folder would show them: agent-plan.ts). */
export const HOME_CREDENTIALS = ['.ssh', '.git-credentials', '.netrc', '.npmrc', '.pypirc', '.config/gh',
  '.config/hub', '.aws', '.azure', '.config/gcloud', '.kube', '.docker', '.gnupg', '.password-store', '.vault-token'];

/**
 * Under HOME: read or run by the user's shell, git, ssh, systemd, the desktop, editors and credential helpers, and the
 * built-in agent CLIs' own folders, the template and the login every repository's runs are laid from.
 */
const HOME_TREES = [
  '.bashrc', '.bash_profile', '.bash_login', '.bash_logout', '.bash_aliases', '.profile', '.zshrc', '.zshenv',
  '.zprofile', '.zlogin', '.zlogout', '.zsh', '.oh-my-zsh', '.cshrc', '.tcshrc', '.login', '.logout', '.kshrc',
  '.mkshrc', '.inputrc', '.pam_environment', '.xprofile', '.xinitrc', '.xsession', '.xsessionrc', '.Xresources',
  '.config/git', '.gitconfig', '.config/systemd', '.local/share/systemd', '.config/autostart', '.config/environment.d',
  '.config/fish', '.config/nvim', '.local/share/applications', '.local/bin', 'bin', ...HOME_CREDENTIALS, '.vimrc',
  '.vim', '.emacs', '.emacs.d', '.svc',
  '.claude', '.claude.json', '.config/claude', '.codex', '.gemini', '.config/opencode', '.local/share/opencode',
];

/** The path with every link in its existing part resolved (a missing tail is kept as written). */
function resolved(path: string): string {
  let head = path;
  const tail: string[] = [];
  while (!existsSync(head) && dirname(head) !== head) {
    tail.unshift(basename(head));
    head = dirname(head);
  }
  const real = realOrNull(head);
  return real === null ? path : join(real, ...tail);
}

/**
 * Why `path` (absolute) can never be writable inside a sandbox, or null when it may be. `pathDirs` are the folders
 * on svc's PATH (their programs run outside). A relative path is refused: only absolute ones are ever bound.
 */
export function neverWritable(path: string, home: string, pathDirs: readonly string[] = []): string | null {
  if (!isAbsolute(path)) return 'it is not an absolute path';
  for (const p of new Set([path, resolved(path)])) {
    const why = reason(p, resolved(home), pathDirs);
    if (why) return p === path ? why : `it is a link to ${p}, and ${why}`;
  }
  return null;
}

function reason(path: string, home: string, pathDirs: readonly string[]): string | null {
  if (within(home, path)) return path === home ? 'it is HOME itself' : 'it holds HOME';
  const clash = (tree: string) => within(path, tree) || within(tree, path);
  const system = SYSTEM_TREES.find(clash);
  if (system) return `it is a system folder (${system})`;
  const homeTree = HOME_TREES.map((t) => join(home, t)).find(clash);
  if (homeTree) return `programs outside the sandbox read or run ${homeTree}`;
  const onPath = pathDirs.filter(isAbsolute).find((d) => d !== '/' && clash(d));
  if (onPath) return `${onPath} is on PATH: its programs run outside the sandbox`;
  return null;
}
