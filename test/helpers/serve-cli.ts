// Runs a server as a user does (`node dist/cli.js <args>`) and stops it: for black-box tests of the real binary.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

export interface Served {
  child: ChildProcess;
  url: string;
}

/**
 * Starts `svc <args>` and resolves with the URL it prints once listening; rejects if it exits first. With `asUid`
 * (the test runs as root) the server runs as that user through `setpriv`, which execs it: the child's pid is the
 * server's. `cwd`: where it starts (a container's working directory), else the test's.
 */
export function serve(args: string[], env: NodeJS.ProcessEnv, asUid?: number, cwd?: string): Promise<Served> {
  const argv = [process.execPath, CLI, ...args];
  const command = asUid === undefined
    ? argv
    : ['setpriv', `--reuid=${asUid}`, `--regid=${asUid}`, '--clear-groups', '--', ...argv];
  const child = spawn(command[0]!, command.slice(1), { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let errText = '';
  child.stderr!.on('data', (c: Buffer) => (errText += c.toString()));
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const url = /http:\/\/[^\s]+/.exec(out)?.[0];
      if (url) resolve({ child, url });
    });
    child.on('exit', (code) => reject(new Error(`svc ${args.join(' ')} exited ${code}: ${errText}`)));
  });
}

/** SIGTERM, then waits for the exit; nothing to do for a server that never started or already ended. */
export function stop(s: Served | undefined): Promise<void> {
  if (!s || s.child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    s.child.once('exit', () => resolve());
    s.child.kill('SIGTERM');
  });
}
