// The launched side of the old-Node launcher (start.ts runLaunched): this process must never outlive the launcher,
// however the launcher ended (SIGKILL included, which it cannot forward). A pipe would say so at once, but svc servers
// re-execute themselves (server-flags.ts) and an exec closes every descriptor Node opened; the launcher's pid, kept in
// the environment across the exec, still works: once this process's parent is no longer the launcher, it stops as if
// sent SIGTERM.
import { LAUNCHER_PID_VAR } from './env.ts';

const CHECK_EVERY_MS = 500;

/** Watches the launcher when this process was launched by one. */
export function watchLifeline(env: NodeJS.ProcessEnv): void {
  const launcher = Number(env[LAUNCHER_PID_VAR]);
  if (!Number.isInteger(launcher) || launcher <= 1) return;
  const check = (): void => {
    if (process.ppid !== launcher) {
      clearInterval(timer);
      process.kill(process.pid, 'SIGTERM');
    }
  };
  const timer = setInterval(check, CHECK_EVERY_MS);
  // The watch alone must not keep this process alive once its work is done.
  timer.unref();
  check();
}
