// Runs a program to its end and collects its exit and output, for CLI tests that check code, stdout and stderr exactly.
// Asynchronous on purpose: spawnSync would block this process and any in-process server the child talks to.
import { spawn, type SpawnOptions } from 'node:child_process';

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
