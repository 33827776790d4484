// How cli.ts sets up its own Node process before a command, and only it runs this. First what its parent handed over:
// svc's secrets, on a pipe at fd 3 (spawn/start.ts startChild writes it) or in the 0600 file this process's own
// re-execution wrote, never in the environment, which /proc/<pid>/environ shows to the same user (DESIGN §7a;
// docs/engine.md "Secrets of the worker"); it must not write a value anywhere but that file, or accept a name that is
// not one of svc's secrets. Then the re-execution (same pid) that gives `svc control serve` its V8 flags, which V8
// reads as it creates the isolate (docs/bench.md "RSS"), and takes secret values out of a launcher's or server's
// environment. Then Node's compile cache for svc's own modules (docs/engine.md "Node's compile cache"): V8's code for
// them, kept under ~/.svc, which no sandbox shows. What it holds is code svc runs, so it is used only in folders svc's
// user alone can write; anything doubtful leaves it off, silently: it must never stop a command (a value of
// SVC_COMPILE_CACHE other than 1 or 0 is refused as every setting's is).
import {
  chmodSync, closeSync, existsSync, fstatSync, lstatSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync,
  statSync, writeFileSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
// The module object, not its named export: a Node too old to have it must still reach cli.ts's version check.
import nodeModule from 'node:module';
import { dirname, join } from 'node:path';
import { HANDOFF_FD, HANDOFF_FD_VAR, HANDOFF_VAR, secretsIn, withoutSecrets } from '../spawn/start.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { orNull, readOrNull } from '../spawn/tree.ts';
import { settingChoice } from '../settings-registry.ts';
import { obj, objOrNull, tryParseJson } from '../untrusted.ts';
import { RefusedError } from '../errors.ts';

export type Secrets = Record<string, string>;

/** A receiver takes its file within a second of starting; one still there after this never will (it crashed). */
const STALE_MS = 10 * 60_000;

/** ~/.svc/handoff (0700), which no sandbox shows; stale files are removed on the way. */
function handoffDir(env: NodeJS.ProcessEnv): string {
  const dir = join(svcHomeOf(env), 'handoff');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const now = Date.now();
  for (const name of readdirSync(dir)) {
    try {
      if (now - statSync(join(dir, name)).mtimeMs > STALE_MS) rmSync(join(dir, name), { force: true });
    } catch {
      // Taken by its receiver meanwhile.
    }
  }
  return dir;
}

/**
 * For a re-exec only: writes `secrets` to a fresh 0600 file and returns the extra environment that names it, or `{}`
 * when there is nothing to hand over. The caller removes the file (`dropHandoff`) if the new image never started.
 */
export function writeHandoff(secrets: Secrets, env: NodeJS.ProcessEnv): Record<string, string> {
  const handed = secretsIn(secrets);
  if (Object.keys(handed).length === 0) return {};
  const path = join(handoffDir(env), `${process.pid}-${randomBytes(12).toString('hex')}.json`);
  writeFileSync(path, JSON.stringify({ secrets: handed }), { flag: 'wx', mode: 0o600 });
  return { [HANDOFF_VAR]: path };
}

/** Removes a handoff file nobody took (the child failed to start). */
function dropHandoff(extra: Record<string, string>): void {
  const path = extra[HANDOFF_VAR];
  if (path) rmSync(path, { force: true });
}

/** Reads the inherited handoff pipe to its end and closes it; null unless fd 3 is the socket svc gave this process. */
function readPipe(): string | null {
  // Otherwise fd 3 may be one of Node's own, which must stay open.
  if (!orNull(() => fstatSync(HANDOFF_FD))?.isSocket()) return null;
  try {
    return orNull(() => readFileSync(HANDOFF_FD, 'utf8'));
  } finally {
    closeSync(HANDOFF_FD);
  }
}

/** The secrets in one handoff message; nothing from bad JSON. */
function parseHandoff(text: string | null): Secrets {
  return secretsIn(obj(obj(tryParseJson(text ?? '')).secrets));
}

/**
 * Takes what this process was handed (once, at start): the pipe `SVC_HANDOFF_FD` names and the file
 * `SVC_SECRETS_HANDOFF` names (deleted once read), and removes both names from `env`.
 */
export function takeHandoff(env: NodeJS.ProcessEnv): Secrets {
  const fd = env[HANDOFF_FD_VAR];
  const path = env[HANDOFF_VAR];
  delete env[HANDOFF_FD_VAR];
  delete env[HANDOFF_VAR];
  const file = path ? readOrNull(path) : null;
  if (path) rmSync(path, { force: true });
  const piped = fd === String(HANDOFF_FD) ? readPipe() : null;
  // A launch may be started before its job is confirmed (trigger/managed-checkout.ts): a pipe that was named but
  // held no message (its parent withdrew the launch or died first, or it could not be read) is no go-ahead.
  if (fd !== undefined && objOrNull(obj(tryParseJson(piped ?? '')).secrets) === null) {
    throw new RefusedError('the process that started this one sent it no go-ahead: not starting');
  }
  return { ...parseHandoff(file), ...parseHandoff(piped) };
}

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
