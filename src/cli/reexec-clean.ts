// Replaces a long-running svc process once (same pid) with the same command, without svc's secret values in its
// environment. Must never run inside anything but the CLI.
import { secretsIn, withoutSecrets, writeHandoff, dropHandoff, type Secrets } from '../spawn/secrets-handoff.ts';

type Execve = (file: string, args: string[], env: NodeJS.ProcessEnv) => never;

/**
 * Replaces this process (same pid) with the same command when it holds one of svc's secret values in its environment:
 * the new image's environment has no secret (they travel in a 0600 handoff file that the new image reads and deletes
 * first), so /proc/<pid>/environ of a long-lived svc no longer shows them (DESIGN §7a).
 * `handed` are secrets this process already took from its parent's pipe; they go along in the same file.
 * Returns when there is nothing to do, or exec is unavailable or refused: the caller then keeps the secrets in
 * memory and deletes them from process.env, which is all a process can do about its own environ.
 */
export function reexecClean(opts: { handed?: Secrets }): void {
  const execve = (process as unknown as { execve?: Execve }).execve;
  const script = process.argv[1];
  if (typeof execve !== 'function' || !script) return;
  const inEnv = secretsIn(process.env);
  if (Object.keys(inEnv).length === 0) return;
  let handoff: Record<string, string>;
  try {
    handoff = writeHandoff({ ...inEnv, ...opts.handed }, process.env);
  } catch {
    // No writable ~/.svc: keep the secrets where they are rather than lose them (those from a pipe would be lost).
    return;
  }
  const env = { ...withoutSecrets(process.env), ...handoff };
  try {
    const argv = [process.execPath, ...process.execArgv, script, ...process.argv.slice(2)];
    execve.call(process, process.execPath, argv, env);
  } catch {
    // Exec refused (e.g. a sandbox): serving as we are beats not serving.
    dropHandoff(handoff);
  }
}
