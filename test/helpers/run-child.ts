// Runs a program to its end and collects its exit and output, for CLI tests that check code, stdout and stderr exactly.
// Asynchronous on purpose: spawnSync would block this process and any in-process server the child talks to.
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { once } from 'node:events';

export interface ChildResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** `options` go to spawn unchanged (stdout and stderr must stay pipes, the default). */
export function runChild(command: string, args: string[], options: SpawnOptions = {}): Promise<ChildResult> {
  return new Promise((resolve) => {
    const child = spawn(command, args, options);
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/**
 * A node that idles until killed with `args` on its command line, once its script runs: spawn returns when exec
 * closes the parent's pipe, before the kernel has set the new argv and environment, so /proc/<pid>/cmdline and
 * environ read at once may still be empty. `options` go to spawn but for stdio.
 */
export async function idleNode(args: string[] = [], options: SpawnOptions = {}): Promise<ChildProcess> {
  const script = 'process.stdout.write("up"); setInterval(() => {}, 60_000)';
  const child = spawn(process.execPath, ['-e', script, ...args], { ...options, stdio: ['ignore', 'pipe', 'ignore'] });
  const [up] = await Promise.race([once(child.stdout!, 'data'), once(child, 'exit')]);
  child.stdout!.destroy();
  if (String(up) !== 'up') throw new Error(`the idle node ended (${String(up)}) before it ran`);
  return child;
}
