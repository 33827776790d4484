// What each built-in provider CLI keeps in its HOME, and how it is laid for one invocation (DESIGN §7a "Repositories
// don't meet"; docs/engine.md "Provider homes" gives the order and the sources of each mount). Must not: show one
// repository's home to another's run, keep anything an agent wrote where the CLI would later obey or run it, follow a
// link an agent planted in a kept folder, or write anywhere outside `repoHome`.
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { within, type HomeMount } from './bwrap-argv.ts';
import { orNull, pathKind } from './tree.ts';
import { isJsonObject } from '../json-value.ts';
import { obj, tryParseJson } from '../untrusted.ts';

/**
 * A CLI's paths under HOME: `roots` laid fresh for each invocation, writable; `files` it obeys, copied into them from
 * the template; `dirs` of things it runs, read-only from the template; `login`, read-only from the real HOME; `kept`
 * session state, the repository's own between its runs; `scrub`, downloaded programs removed from a kept folder.
 */
interface ProviderLayout {
  roots: string[];
  files: string[];
  dirs: string[];
  login: string[];
  kept: string[];
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
    // Its auto memory, which it loads into every session: what one run's agent wrote there, the next runs would obey.
    scrub: ['.claude/projects/*/memory'],
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

/** Where a built-in CLI's HOME is laid from, for one run of one repository. */
export interface ProviderHomeSource {
  /** The operator's template folder, laid out like a HOME: the files the CLI obeys. */
  template: string;
  /** The repository's home for this provider: `state/` holds what is kept, `laid/<run>` the run's fresh folders. */
  repoHome: string;
  run: string;
  /** The variables the run's gate gives the agent (its model APIs' base URLs), when there is one. */
  gateEnv?: Readonly<Record<string, string>>;
}

/** Roots that are files: their fresh copy comes from the template, or nothing. */
const FILE_ROOT = /\.(json|ya?ml|toml)$/;

export function runLayer(repoHome: string, run: string): string {
  return join(repoHome, 'laid', run);
}

export function keptDir(repoHome: string): string {
  return join(repoHome, 'state');
}

/**
 * `base/rel` as a real folder, made where missing. A kept folder is the agent's to write, so any part of the way
 * that is not a plain folder (a link it planted to lead svc elsewhere) is removed, never followed.
 */
function plainFolder(base: string, rel: string): string {
  let dir = base;
  for (const part of rel.split('/').filter(Boolean)) {
    dir = join(dir, part);
    const found = pathKind(dir);
    if (found === 'dir') continue;
    if (found !== null) rmSync(dir, { force: true, recursive: true });
    mkdirSync(dir, { mode: 0o700 });
  }
  return dir;
}

/** Removes `base/rel` when every folder on the way is a plain one (else there is nothing of ours to remove); a `*`
 * part stands for each plain folder there. */
function removeBelow(base: string, rel: string): void {
  const parts = rel.split('/').filter(Boolean);
  let dir = base;
  for (const [i, part] of parts.slice(0, -1).entries()) {
    if (part === '*') {
      const rest = parts.slice(i + 1).join('/');
      for (const name of orNull(() => readdirSync(dir)) ?? []) removeBelow(join(dir, name), rest);
      return;
    }
    dir = join(dir, part);
    if (pathKind(dir) !== 'dir') return;
  }
  if (pathKind(dir) === 'dir') rmSync(join(dir, parts.at(-1)!), { force: true, recursive: true });
}

function copyInto(source: string, dest: string, rel: string): void {
  mkdirSync(dirname(dest), { recursive: true, mode: 0o700 });
  if (rel !== '.claude.json') return copyFileSync(source, dest);
  // claude's without its per-project table, which names the user's other repositories and MCP servers.
  const config = tryParseJson(readFileSync(source, 'utf8'));
  if (!isJsonObject(config)) return;
  const { projects: _projects, ...rest } = config;
  writeFileSync(dest, JSON.stringify(rest, null, 2), { mode: 0o600 });
}

/**
 * gemini 0.61 takes its auth type from the saved choice, else from its environment, where a base URL makes it
 * "gateway", which it refuses before any call (exit 41). The gate holds the key: the run's settings choose it
 * unless the user chose otherwise (docs/gate.md "The model CLIs and the gate"). `text`: the settings file's (null when
 * there is none); null back when it stays as it is, as a file that is not plain JSON (gemini allows comments) does.
 */
export function apiKeyChosen(text: string | null): string | null {
  const settings = text === null ? {} : tryParseJson(text);
  if (!isJsonObject(settings)) return null;
  const security = obj(settings.security);
  const auth = obj(security.auth);
  // Also gemini's older flat `selectedAuthType` and an enforced type: either is the user's choice.
  if (auth.selectedType !== undefined || auth.enforcedType !== undefined) return null;
  if (settings.selectedAuthType !== undefined) return null;
  const chosen = { ...settings, security: { ...security, auth: { ...auth, selectedType: 'gemini-api-key' } } };
  return JSON.stringify(chosen, null, 2);
}

/** What never stays in a kept folder: whatever the template, the login or the scrub list puts at that path. */
function scrubKept(state: string, kept: string, layout: ProviderLayout): void {
  for (const path of [...layout.files, ...layout.dirs, ...layout.login, ...layout.scrub]) {
    if (path !== kept && within(path, kept)) removeBelow(state, path);
  }
}

/**
 * Lays the invocation's fresh folders for `provider` (a built-in CLI; any other name lays nothing) under `home`, the
 * HOME the sandbox shows, which also holds the user's login; returns the mounts in the order bwrap must make them.
 */
export function layProviderHome(input: ProviderHomeSource & { provider: string; home: string }): HomeMount[] {
  const layout = LAYOUTS[input.provider] ?? NONE;
  const layer = runLayer(input.repoHome, input.run);
  rmSync(layer, { recursive: true, force: true });
  mkdirSync(layer, { recursive: true, mode: 0o700 });
  const { kept } = layout;
  const target = (rel: string) => join(input.home, rel);
  const laid = layout.roots.filter((r) => !kept.some((k) => within(r, k)));
  const fresh: HomeMount[] = [];
  for (const root of laid) {
    const dest = join(layer, root);
    const source = join(input.template, root);
    if (!FILE_ROOT.test(root)) mkdirSync(dest, { recursive: true, mode: 0o700 });
    else if (pathKind(source, true) === 'file') copyInto(source, dest, root);
    if (pathKind(dest) !== null) fresh.push({ source: dest, target: target(root), writable: true });
  }
  for (const rel of layout.files) {
    const source = join(input.template, rel);
    if (laid.some((r) => within(rel, r)) && pathKind(source, true) === 'file') copyInto(source, join(layer, rel), rel);
  }
  const settings = join(layer, '.gemini', 'settings.json');
  const chosen = input.provider === 'gemini' && input.gateEnv?.GOOGLE_GEMINI_BASE_URL
    ? apiKeyChosen(pathKind(settings) === 'file' ? readFileSync(settings, 'utf8') : null) : null;
  if (chosen !== null) {
    mkdirSync(dirname(settings), { recursive: true, mode: 0o700 });
    writeFileSync(settings, chosen, { mode: 0o600 });
  }
  const state = keptDir(input.repoHome);
  mkdirSync(state, { recursive: true, mode: 0o700 });
  const persisted = kept.map((rel) => {
    const source = plainFolder(state, rel);
    scrubKept(state, rel, layout);
    return { source, target: target(rel), writable: true };
  });
  // Read-only: what the CLI runs, from the template; the login, from the real HOME.
  const shown = (rels: string[], from: string, kind: 'dir' | 'file') => rels.flatMap((rel) => {
    const source = join(from, rel);
    return pathKind(source, true) === kind ? [{ source, target: target(rel), writable: false }] : [];
  });
  const dirs = shown(layout.dirs, input.template, 'dir');
  return [...fresh, ...persisted, ...dirs, ...shown(layout.login, input.home, 'file')];
}

/** Removes `run`'s fresh folders once its provider is done (what the CLI wrote there lasted its invocations). */
export function dropRunLayer(repoHome: string, run: string): void {
  rmSync(runLayer(repoHome, run), { recursive: true, force: true });
}
