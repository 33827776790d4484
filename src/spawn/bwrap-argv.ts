// Builds the bubblewrap command line that confines an agent (a provider or a check), DESIGN §7a.
//
// Shape learned from Codex's Linux sandbox and Claude Code's sandbox runtime: read-only root, writable
// binds layered on top, a fresh /proc in a new PID namespace so no ancestor's environ/cmdline is visible,
// and tmpfs masks over what must not be seen. Network is left shared: providers need their APIs.
import { existsSync } from 'node:fs';

export interface SandboxPlan {
  /** Folders and files the agent may write (the worktree, provider login folders, the question file). */
  writable: string[];
  /** Files or folders the agent may read that are otherwise masked (the task and answer files). */
  readable: string[];
  /** Folders that must be invisible: each becomes an empty tmpfs (e.g. ~/.svc, the repo's .svc/runs). */
  hidden: string[];
  /** Files that must be invisible: each is replaced by an empty file. */
  hiddenFiles: string[];
  /** The working directory inside the sandbox (same path as outside). */
  cwd: string;
}

/** The argv prefix that runs `command` inside bwrap; `bwrap` is the resolved path of the binary. */
export function bwrapArgv(bwrap: string, plan: SandboxPlan, command: string[]): string[] {
  const argv = [
    bwrap,
    '--unshare-pid', // own PID namespace: the first process is init, everything dies with it
    '--die-with-parent', // svc dies → the sandbox dies
    '--new-session', // no TIOCSTI into svc's terminal
    '--ro-bind', '/', '/',
    '--dev', '/dev',
    '--proc', '/proc', // only the sandbox's own processes
    '--tmpfs', '/tmp',
  ];
  // Masks first, then the binds that re-open parts of a masked tree (a run folder under a hidden .svc).
  for (const dir of plan.hidden) if (existsSync(dir)) argv.push('--tmpfs', dir);
  for (const file of plan.hiddenFiles) if (existsSync(file)) argv.push('--ro-bind', '/dev/null', file);
  for (const path of plan.readable) if (existsSync(path)) argv.push('--ro-bind', path, path);
  for (const path of plan.writable) if (existsSync(path)) argv.push('--bind', path, path);
  argv.push('--chdir', plan.cwd, '--', ...command);
  return argv;
}
