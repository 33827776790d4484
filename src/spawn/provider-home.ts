// Lays a provider CLI's HOME for one invocation (DESIGN §7a "Repositories don't meet"; docs/engine.md "Provider
// homes" gives the order and the sources of each mount). Must not: show one repository's home to another's run, keep
// anything an agent wrote where the CLI would later obey or run it, follow a link an agent planted in a kept folder,
// or write anywhere outside `repoHome`.
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { providerLayout, type ProviderLayout } from './provider-layout.ts';
import { within, type HomeMount } from './bwrap-argv.ts';
import { pathKind } from './system-view.ts';
import { isJsonObject, tryParseJson } from '../untrusted.ts';

interface ProviderHomeInput {
  /** The built-in CLI (provider-layout.ts); any other name lays nothing. */
  provider: string;
  /** The HOME the sandbox shows (the user's HOME path); targets are under it. */
  home: string;
  /** Where the CLI's obeyed files come from: the operator's template folder, laid out like a HOME. */
  template: string;
  /** Where the user's own login files are (the real HOME). */
  loginHome: string;
  /** The repository's home for this provider: `state/` holds what is kept, `laid/` the invocations' fresh folders. */
  repoHome: string;
  /** This run's name: its fresh folders are `laid/<run>`, replaced at every invocation. */
  run: string;
}

/** Files among the CLI's folders (the rest are folders): their fresh copy comes from the template, or nothing. */
const FILE_ROOT = /\.(json|ya?ml|toml)$/;

/** The fresh folders of `run`'s invocations; removed when its provider is done. */
export function runLayer(repoHome: string, run: string): string {
  return join(repoHome, 'laid', run);
}

/** What a repository's home keeps between its runs. */
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

/** Removes `base/rel` when every folder on the way is a plain one (else there is nothing of ours to remove). */
function removeBelow(base: string, rel: string): void {
  const parts = rel.split('/').filter(Boolean);
  let dir = base;
  for (const part of parts.slice(0, -1)) {
    dir = join(dir, part);
    if (pathKind(dir) !== 'dir') return;
  }
  rmSync(join(dir, parts.at(-1)!), { force: true, recursive: true });
}

/** claude's ~/.claude.json without its per-project table, which names the user's other repositories and MCP servers. */
function withoutProjects(text: string): string | null {
  const config = tryParseJson(text);
  if (!isJsonObject(config)) return null;
  const { projects: _projects, ...rest } = config;
  return JSON.stringify(rest, null, 2);
}

function copyInto(source: string, dest: string, rel: string): void {
  mkdirSync(dirname(dest), { recursive: true, mode: 0o700 });
  if (rel !== '.claude.json') {
    copyFileSync(source, dest);
    return;
  }
  const text = withoutProjects(readFileSync(source, 'utf8'));
  if (text !== null) writeFileSync(dest, text, { mode: 0o600 });
}

/** What never stays in a kept folder: whatever the template, the login or the scrub list puts at that path. */
function scrubKept(state: string, kept: string, layout: ProviderLayout): void {
  for (const path of [...layout.files, ...layout.dirs, ...layout.login, ...layout.scrub]) {
    if (path !== kept && within(path, kept)) removeBelow(state, path);
  }
}

/** Lays the invocation's fresh folders and returns the mounts, in the order bwrap must make them. */
export function layProviderHome(input: ProviderHomeInput): HomeMount[] {
  const layout = providerLayout(input.provider);
  const layer = runLayer(input.repoHome, input.run);
  rmSync(layer, { recursive: true, force: true });
  mkdirSync(layer, { recursive: true, mode: 0o700 });
  const { kept } = layout;
  const target = (rel: string) => join(input.home, rel);
  const fresh: HomeMount[] = [];
  for (const root of layout.roots) {
    if (kept.some((k) => within(root, k))) continue;
    const dest = join(layer, root);
    if (FILE_ROOT.test(root)) {
      const source = join(input.template, root);
      if (pathKind(source, true) !== 'file') continue;
      copyInto(source, dest, root);
      if (pathKind(dest) === 'file') fresh.push({ source: dest, target: target(root), writable: true });
      continue;
    }
    mkdirSync(dest, { recursive: true, mode: 0o700 });
    fresh.push({ source: dest, target: target(root), writable: true });
  }
  for (const rel of layout.files) {
    const source = join(input.template, rel);
    const root = layout.roots.find((r) => within(rel, r) && !kept.some((k) => within(r, k)));
    if (root && pathKind(source, true) === 'file') copyInto(source, join(layer, rel), rel);
  }
  const state = keptDir(input.repoHome);
  mkdirSync(state, { recursive: true, mode: 0o700 });
  const persisted = kept.map((rel) => {
    const source = plainFolder(state, rel);
    scrubKept(state, rel, layout);
    return { source, target: target(rel), writable: true };
  });
  const dirs = layout.dirs.flatMap((rel) => {
    const source = join(input.template, rel);
    return pathKind(source, true) === 'dir' ? [{ source, target: target(rel), writable: false }] : [];
  });
  const login = layout.login.flatMap((rel) => {
    const source = join(input.loginHome, rel);
    return pathKind(source, true) === 'file' ? [{ source, target: target(rel), writable: false }] : [];
  });
  return [...fresh, ...persisted, ...dirs, ...login];
}

/** Removes `run`'s fresh folders once its provider is done (what the CLI wrote there lasted its invocations). */
export function dropRunLayer(repoHome: string, run: string): void {
  rmSync(runLayer(repoHome, run), { recursive: true, force: true });
}
