// Builds the bubblewrap command line that confines an agent (a provider or a check), DESIGN §7a.
//
// Shape learned from Codex's Linux sandbox (codex-rs/linux-sandbox) and Anthropic's sandbox-runtime: a read-only root,
// writable binds layered on top, read-only binds that re-protect what must not change inside a writable tree (`.git`),
// a fresh /proc in a new PID namespace so no ancestor's environ or cmdline is visible, and tmpfs or /dev/null masks
// over what must not be seen. Network is shared: providers need their APIs. bwrap applies the mounts in argv order
// and a later mount covers an earlier one, so the order of the steps below is the policy.
import { existsSync, statSync } from 'node:fs';

export interface SandboxPlan {
  /** Read-only exposures of paths the private /tmp would cover (folders on PATH, the git dir of a repo in /tmp). */
  visible: string[];
  /** Folders and files the agent may write (the worktree, the provider's config and login folders). */
  writable: string[];
  /** Paths inside a writable one that stay read-only (the worktree's `.git`, the project's `.svc`). */
  protect: string[];
  /** Folders and files that must be invisible: a folder becomes an empty tmpfs, a file reads as empty. */
  hidden: string[];
  /** Re-opened after the masks: the run's protocol files, readable (task, answer) and writable (question). */
  protocolReadable: string[];
  protocolWritable: string[];
  /** The working directory inside the sandbox (same path as outside). */
  cwd: string;
}

function isDir(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function within(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

/** The argv that runs `command` inside bwrap; `bwrap` is the resolved path of the binary. */
export function bwrapArgv(bwrap: string, plan: SandboxPlan, command: string[]): string[] {
  const argv = [
    bwrap,
    '--unshare-pid', // own PID namespace: its first process is init, everything in it dies with it
    '--die-with-parent', // svc's process dies → the sandbox dies
    '--new-session', // no TIOCSTI into a terminal svc may hold
    '--ro-bind', '/', '/',
    '--dev', '/dev',
    '--proc', '/proc', // only the sandbox's own processes
    '--tmpfs', '/tmp',
  ];
  const hiddenDirs = plan.hidden.filter(isDir);
  const inHidden = (p: string) => hiddenDirs.some((h) => within(p, h));
  // Nothing re-exposed or made writable may sit inside a hidden folder, except the working directory (a run's worktree
  // lives under the project's .svc/worktrees, which hides the other runs' worktrees) and the protocol files.
  for (const path of plan.visible.filter((p) => existsSync(p) && !inHidden(p))) argv.push('--ro-bind', path, path);
  const writable = plan.writable.filter((p) => existsSync(p) && (!inHidden(p) || p === plan.cwd));
  const protect = plan.protect.filter((p) => existsSync(p));
  for (const path of writable) argv.push('--bind', path, path);
  for (const path of protect) argv.push('--ro-bind', path, path);
  for (const path of plan.hidden.filter((p) => existsSync(p))) {
    if (isDir(path)) argv.push('--tmpfs', path);
    else argv.push('--ro-bind', '/dev/null', path);
  }
  // The working directory that a mask just covered is bound again, with its protections.
  for (const path of writable.filter(inHidden)) {
    argv.push('--bind', path, path);
    for (const inner of protect.filter((p) => within(p, path))) argv.push('--ro-bind', inner, inner);
  }
  for (const path of plan.protocolReadable.filter((p) => existsSync(p))) argv.push('--ro-bind', path, path);
  for (const path of plan.protocolWritable.filter((p) => existsSync(p))) argv.push('--bind', path, path);
  // Last, the masks become read-only (bwrap makes mount points inside them first): an agent cannot plant files where
  // svc's home or another run's folder would be, even in its own view.
  for (const dir of hiddenDirs.filter((d) => existsSync(d))) argv.push('--remount-ro', dir);
  argv.push('--chdir', plan.cwd, '--', ...command);
  return argv;
}
