// Starts the servers under test as child processes of the pinned Node, waits for the URL they print,
// reads their memory from /proc, and stops them (SIGTERM, then SIGKILL after a grace period).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { NODE_FLAGS } from './worker-client.ts';

export const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const CEILING = fileURLToPath(new URL('./ceiling-server.ts', import.meta.url));

export interface ServerProcess {
  url: string;
  pid: number;
  child: ChildProcess;
  /** Everything the process wrote to stderr so far (logs), for explaining a failure. */
  stderr(): string;
  stop(): Promise<void>;
}

/**
 * Spawns `node <args>` (the pinned Node, or `command`; no shell) and resolves with the first line of stdout that
 * looks like a URL.
 */
export function startServer(
  args: string[], env: NodeJS.ProcessEnv, timeoutMs = 30_000, command = process.execPath, cwd?: string,
): Promise<ServerProcess> {
  const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'], ...(cwd ? { cwd } : {}) });
  let err = '';
  let out = '';
  child.stderr?.on('data', (d: Buffer) => {
    if (err.length < 200_000) err += d.toString();
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server did not print its URL within ${timeoutMs} ms: ${err.slice(-500)}`));
    }, timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code}) before printing its URL: ${err.slice(-800)}`));
    });
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const match = /(http:\/\/\S+)/.exec(out);
      if (!match?.[1]) return;
      clearTimeout(timer);
      child.stdout?.removeAllListeners('data');
      child.stdout?.resume();
      child.removeAllListeners('exit');
      resolve({ url: match[1], pid: child.pid ?? 0, child, stderr: () => err, stop: () => stopChild(child) });
    });
  });
}

export function stopChild(child: ChildProcess, graceMs = 3_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

export function startCeiling(): Promise<ServerProcess> {
  return startServer([...NODE_FLAGS, CEILING], process.env);
}

/** Set by `--profile=DIR`: servers then write V8 CPU profiles there on exit (open them in Chrome DevTools). */
let profileDir: string | undefined;
export function setProfileDir(dir: string | undefined): void {
  profileDir = dir;
}

function profileFlags(): string[] {
  return profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
}

export function startControl(dbPath: string, env: NodeJS.ProcessEnv): Promise<ServerProcess> {
  return startServer([...profileFlags(), CLI, 'control', 'serve', '--port', '0', '--db', dbPath], env);
}

/** Set by peer-cpu.ts `CALLGRIND=DIR`: trigger servers run under callgrind, counting nothing until told to. */
let callgrindDir: string | undefined;
export const VGDB_ENV = { USER: 'bench', LOGNAME: 'bench', HOST: 'bench' };
export function setCallgrindDir(dir: string | undefined): void {
  callgrindDir = dir;
}

/** `cli`: another build's dist/cli.js (peer-cpu.ts compares builds side by side). */
export function startTrigger(args: string[], env: NodeJS.ProcessEnv, cli = CLI): Promise<ServerProcess> {
  const node = [...profileFlags(), cli, 'trigger', 'serve', ...args];
  if (!callgrindDir) return startServer(node, env);
  const callgrind = ['--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${callgrindDir}/callgrind.%p`,
    `--vgdb-prefix=${callgrindDir}/vgdb`, '--trace-children=yes', '--trace-children-skip=*/git,*/sh',
    '--trace-children-skip-by-arg=*standin-svc*'];
  // vgdb names its pipes by user and host: callgrind_control (peer-cpu.ts) finds them by the same two.
  return startServer([...callgrind, process.execPath, ...node], { ...env, ...VGDB_ENV }, 300_000, 'valgrind');
}

/** Resident set size in MB from /proc/<pid>/status (Linux); NaN elsewhere. */
export function rssMb(pid: number): number {
  try {
    const match = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) / 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}
