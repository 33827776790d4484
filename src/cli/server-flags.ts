// Gives `svc control serve` its V8 flags on every launch path by re-executing this process once (same pid): V8 sizes
// its heap when the isolate is created (docs/bench.md "RSS"). Only the CLI runs this.
import { secretsIn, withoutSecrets, writeHandoff, dropHandoff, type Secrets } from '../spawn/secrets-handoff.ts';

/**
 * Memory saver only from Node 24: an older V8 refuses the flag, and after the re-exec there is no fallback. Memory
 * saver keeps the young generation at its 1 MB start, so under ingest V8 scavenged ~25 times a second and promoted
 * what requests still held into old space, which it then mark-compacted every ~0.5 s: the minimum makes it 4 MB
 * (docs/bench.md, "The fan-in: the young generation under memory saver"). No allocation-site pretenuring: a bulk
 * ingest (500 runs a request) made V8 allocate the objects of the same code sites straight into old space for the
 * rest of the process's life, where under memory saver's small old-space limit the fan-in's and the list's
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
