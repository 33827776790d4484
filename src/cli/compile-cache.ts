// Node's compile cache for svc's own modules (docs/engine.md "Node's compile cache"), turned on by cli.ts alone:
// V8's code for them, kept under ~/.svc, which no sandbox shows. What it holds is code svc runs, so it is used only
// in folders svc's user alone can write; anything doubtful leaves it off, silently: it must never stop a command
// (a value of SVC_COMPILE_CACHE other than 1 or 0 is refused as every setting's is).
import { existsSync, lstatSync, mkdirSync, realpathSync } from 'node:fs';
// The module object, not its named export: a Node too old to have it must still reach cli.ts's version check.
import nodeModule from 'node:module';
import { dirname, join } from 'node:path';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { settingChoice } from '../settings-registry.ts';

/** A real folder (not a link) of this user that no one else may write into. */
function privateFolder(path: string, uid: number): boolean {
  try {
    const st = lstatSync(path);
    return st.isDirectory() && st.uid === uid && (st.mode & 0o022) === 0;
  } catch {
    return false;
  }
}

/** True when `folder` or a folder above it holds a `.git`: a cache there would be a repository's files. */
function underGit(folder: string): boolean {
  for (let at = folder; ; at = dirname(at)) {
    if (existsSync(join(at, '.git'))) return true;
    if (dirname(at) === at) return false;
  }
}

/** `underGit` for HOME as written and for where the links on its way lead (a link above HOME may point into one);
 * a HOME that cannot be resolved counts as one: the cache off. */
function inRepository(home: string): boolean {
  try {
    return underGit(home) || underGit(realpathSync(home));
  } catch {
    return true;
  }
}

/**
 * `~/.svc/compile-cache/svc-<version>`, made 0700 one level at a time (never through a link), or null: the cache off.
 * Off when SVC_COMPILE_CACHE is `0` (a value not `1` or `0` is a BadSettingError), when Node's cache is on already
 * (NODE_COMPILE_CACHE), when HOME, `~/.svc` or a folder below is a link, not a folder, not this user's, or writable
 * by its group or others, when HOME lies in a git repository or working tree, and when the folders cannot be made.
 */
export function compileCacheDir(env: NodeJS.ProcessEnv, version: string): string | null {
  const uid = process.getuid?.();
  if (settingChoice(env, 'SVC_COMPILE_CACHE') === '0' || uid === undefined || !/^[0-9A-Za-z.+-]{1,64}$/.test(version)) {
    return null;
  }
  // Started with NODE_COMPILE_CACHE: Node's own cache is on before svc's first line, and nothing turns it off.
  if (typeof nodeModule.getCompileCacheDir === 'function' && nodeModule.getCompileCacheDir() !== undefined) return null;
  const svcHome = svcHomeOf(env);
  const home = dirname(svcHome);
  if (!home.startsWith('/') || !privateFolder(home, uid) || inRepository(home)) return null;
  const root = join(svcHome, 'compile-cache');
  const dir = join(root, `svc-${version}`);
  for (const folder of [svcHome, root, dir]) {
    try {
      mkdirSync(folder, { mode: 0o700 });
    } catch {
      // there already, or not makeable (a read-only HOME): the check below tells which
    }
    if (!privateFolder(folder, uid)) return null;
  }
  return dir;
}

/** Turns the cache on for this process's modules loaded from now on (the caller's own imports are compiled already). */
export function useCompileCache(env: NodeJS.ProcessEnv, version: string): void {
  const dir = compileCacheDir(env, version);
  if (dir === null || typeof nodeModule.enableCompileCache !== 'function') return;
  try {
    nodeModule.enableCompileCache(dir);
  } catch {
    // a cache Node cannot use is no cache
  }
}
