// Starts children: the only file in src/ that imports node:child_process (test/unit/spawn-imports.test.ts holds it
// to that). Every start names the child's kind, from which env.ts builds its environment; argv is always an array
// run without a shell.
import { execFile, execFileSync, spawn, spawnSync, type ChildProcess, type StdioOptions } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import { childEnv, LAUNCHER_PID_VAR, type ChildKind } from './env.ts';

export type { ChildProcess };

/** Who the child is and what it inherits: `base` filtered by the kind's rule, plus `extra` by name. */
export interface ChildSpec {
  kind: ChildKind;
  base: NodeJS.ProcessEnv;
  extra?: Record<string, string>;
  cwd?: string;
}

function envOf(spec: ChildSpec): NodeJS.ProcessEnv {
  return childEnv(spec.kind, spec.base, spec.extra);
}

function split(argv: readonly string[]): [string, string[]] {
  const [bin, ...args] = argv;
  if (bin === undefined) throw new RangeError('a child needs a program to run');
  return [bin, args];
}

export interface StartOptions extends ChildSpec {
  stdio?: StdioOptions;
  /** Its own process group (and session leader-free): a group signal then reaches it and what it started. */
  detached?: boolean;
}

/** A long-lived or streaming child. */
export function startChild(argv: readonly string[], opts: StartOptions): ChildProcess {
  const [bin, args] = split(argv);
  return spawn(bin, args, {
    cwd: opts.cwd, env: envOf(opts), detached: opts.detached ?? false, stdio: opts.stdio ?? 'pipe',
    shell: false, windowsHide: true,
  });
}

export interface RunSyncOptions extends ChildSpec {
  maxBuffer?: number;
  timeout?: number;
  /** stderr: 'pipe' keeps it for the thrown error (`err.stderr`), 'ignore' drops it. */
  stderr?: 'pipe' | 'ignore';
  /** Descriptors of this process the child gets from its fd 3 on (a sandbox's, bwrap-argv.ts openSandboxFds). */
  fds?: Array<number | 'ignore'>;
}

/** Runs to completion and returns stdout; throws like execFileSync (the error carries `status` and `stderr`). */
export function runSync(argv: readonly string[], opts: RunSyncOptions): string {
  const [bin, args] = split(argv);
  return execFileSync(bin, args, {
    cwd: opts.cwd, env: envOf(opts), encoding: 'utf8', maxBuffer: opts.maxBuffer ?? 1024 * 1024, timeout: opts.timeout,
    stdio: ['ignore', 'pipe', opts.stderr ?? 'pipe', ...opts.fds ?? []], shell: false, windowsHide: true,
  });
}

export interface Finished {
  status: number | null;
  stdout: string;
  stderr: string;
  error: Error | null;
}

/** Runs to completion without throwing (a trial, a probe). */
export function runQuiet(
  argv: readonly string[], opts: ChildSpec & { timeout?: number; fds?: Array<number | 'ignore'> },
): Finished {
  const [bin, args] = split(argv);
  const r = spawnSync(bin, args, {
    cwd: opts.cwd, env: envOf(opts), encoding: 'utf8', timeout: opts.timeout, shell: false, windowsHide: true,
    stdio: ['pipe', 'pipe', 'pipe', ...opts.fds ?? []],
  });
  return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '', error: r.error ?? null };
}

/** The async form of runQuiet, with a cap on what it keeps of the output. */
export function runCollect(
  argv: readonly string[], opts: ChildSpec & { timeout?: number; maxBuffer?: number },
): Promise<Finished> {
  const [bin, args] = split(argv);
  const options = {
    cwd: opts.cwd, env: envOf(opts), timeout: opts.timeout, maxBuffer: opts.maxBuffer ?? 64 * 1024, shell: false,
    windowsHide: true,
  };
  return new Promise((resolve) => {
    execFile(bin, args, options, (err, stdout, stderr) => {
      const code = (err as { code?: unknown } | null)?.code;
      const status = err ? (typeof code === 'number' ? code : null) : 0;
      resolve({ status, stdout: `${stdout}`, stderr: `${stderr}`, error: err });
    });
  });
}

/** The signals a launcher hands on: every one a person or a service manager sends to stop or steer a process. */
const FORWARDED: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'];

/**
 * Runs `argv` as this process's stand-in (the old-Node launcher): the child gets this terminal's stdio, every signal
 * sent to this process exactly once, and this process's pid, by which it notices when the launcher is gone (even by
 * SIGKILL: see lifeline.ts). It runs in its own process group so a terminal's Ctrl-C, which reaches this group,
 * arrives once (forwarded), not twice. Resolves with the child's exit code, or the signal that ended it.
 */
export function runLaunched(argv: readonly string[], opts: ChildSpec): Promise<number | NodeJS.Signals> {
  const [bin, args] = split(argv);
  const child = spawn(bin, args, {
    cwd: opts.cwd, env: childEnv(opts.kind, opts.base, { ...opts.extra, [LAUNCHER_PID_VAR]: String(process.pid) }),
    stdio: 'inherit', detached: true, shell: false, windowsHide: true,
  });
  const handlers = FORWARDED.map((signal) => [signal, () => child.kill(signal)] as const);
  for (const [signal, handler] of handlers) process.on(signal, handler);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      for (const [name, handler] of handlers) process.off(name, handler);
      resolve(signal ?? code ?? 1);
    });
  });
}

/** Ends this process with `result` as its own: the exit code, or the same signal (so a shell sees what happened). */
export function exitLike(result: number | NodeJS.Signals): never {
  if (typeof result === 'number') process.exit(result);
  process.kill(process.pid, result);
  // A signal this process ignores or handles: the shell's convention for "ended by a signal".
  process.exit(128 + (osConstants.signals[result] ?? 0));
}
