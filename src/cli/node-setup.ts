// How cli.ts sets up its own Node process before a command, and only it runs this. The re-execution (same pid) that
// gives `svc control serve` its V8 flags, which V8 reads as it creates the isolate (docs/bench.md "RSS"), and takes
// secret values out of a launcher's or server's environment. Then Node's compile cache for svc's own modules
// (docs/engine.md "Node's compile cache"): V8's code for them, kept under ~/.svc, which no sandbox shows. What it
// holds is code svc runs, so it is used only in folders svc's user alone can write; anything doubtful leaves it off,
// silently: it must never stop a command (a value of SVC_COMPILE_CACHE other than 1 or 0 is refused as every
// setting's is).
import { existsSync, lstatSync, mkdirSync, realpathSync } from 'node:fs';
// The module object, not its named export: a Node too old to have it must still reach cli.ts's version check.
import nodeModule from 'node:module';
import { dirname, join } from 'node:path';
import { writeHandoff, dropHandoff, type Secrets } from '../spawn/secrets-handoff.ts';
import { secretsIn, withoutSecrets } from '../spawn/start.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { settingChoice } from '../settings-registry.ts';

/**
 * Memory saver only from Node 24: an older V8 refuses the flag, and after the re-exec there is no fallback. Memory
 * saver keeps the young generation at its 1 MB start, so under ingest V8 scavenged ~25 times a second and promoted
 * what requests still held into old space, which it then mark-compacted every ~0.5 s: the minimum makes it 4 MB
 * (docs/bench-history.md, "The fan-in: the young generation under memory saver"). No allocation-site pretenuring:
 * a bulk ingest (500 runs a request) made V8 allocate the objects of the same code sites straight into old space for
 * the rest of the process's life, where under memory saver's small old-space limit the fan-in's and the list's
 * short-lived objects then forced a mark-compact every ~0.5 s (docs/bench.md, "A worked-in server: pretenuring").
 */
export function serverNodeFlags(nodeMajor = Number(process.versions.node.split('.')[0])): readonly string[] {
  const semiSpace = '--max-semi-space-size=8';
  return nodeMajor >= 24
    ? [semiSpace, '--min-semi-space-size=4', '--memory-saver-mode', '--no-allocation-site-pretenuring']
    : [semiSpace];
}

export const SERVER_NODE_FLAGS = serverNodeFlags();

type Execve = (file: string, args: string[], env: NodeJS.ProcessEnv) => never;

/** `--max_semi_space_size=8` and `--max-semi-space-size`, `--no-memory-saver-mode` and `--nomemory-saver-mode`. */
function flagName(arg: string): string {
  return arg.split('=', 1)[0]!.replace(/_/g, '-').replace(/^--no-?/, '--');
}

/** The flags not already given on the command line or in NODE_OPTIONS (an operator's own value wins). */
export function missingServerFlags(execArgv: readonly string[], nodeOptions: string | undefined): string[] {
  const given = new Set([...execArgv, ...(nodeOptions ?? '').split(/\s+/)].filter(Boolean).map(flagName));
  return SERVER_NODE_FLAGS.filter((flag) => !given.has(flagName(flag)));
}

/**
 * Re-executes this process when it needs the server flags or holds a secret in its environment, which then crosses
 * in a 0600 handoff file with the `handed` ones, so /proc/<pid>/environ never shows them (DESIGN §7a). Returns when
 * there is nothing to do or exec is unavailable or refused: the caller keeps the secrets in memory only.
 */
export function reexecClean(opts: { serverFlags: boolean; handed?: Secrets }): void {
  const execve = (process as unknown as { execve?: Execve }).execve;
  const script = process.argv[1];
  if (typeof execve !== 'function' || !script) return;
  const missing = opts.serverFlags ? missingServerFlags(process.execArgv, process.env.NODE_OPTIONS) : [];
  const inEnv = secretsIn(process.env);
  const secrets = { ...inEnv, ...opts.handed };
  if (missing.length === 0 && Object.keys(inEnv).length === 0) return;
  let handoff: Record<string, string> = {};
  try {
    handoff = writeHandoff(secrets, process.env);
  } catch {
    // No writable ~/.svc: keep the secrets where they are rather than lose them (those from a pipe would be lost).
    if (missing.length === 0 || Object.keys(opts.handed ?? {}).length > 0) return;
  }
  const env = Object.keys(handoff).length ? { ...withoutSecrets(process.env), ...handoff } : process.env;
  try {
    const argv = [process.execPath, ...process.execArgv, ...missing, script, ...process.argv.slice(2)];
    execve.call(process, process.execPath, argv, env);
  } catch {
    // Exec refused (e.g. a sandbox): serving as we are beats not serving.
    dropHandoff(handoff);
  }
}

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
