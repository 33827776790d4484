// Builds the bubblewrap command line that confines an agent, a check, or svc's own git over the agent's work (DESIGN
// §7a; docs/engine.md "The agent sandbox" lists what is seen and refused). The view is an allowlist on an empty root
// and a later mount covers an earlier one, so the order of the steps in bwrapArgv is the policy. The seccomp filter
// and the /etc files come on descriptors (SANDBOX_FDS): whoever starts this argv passes openSandboxFds() there.
import { closeSync, existsSync, openSync, readlinkSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { BadSettingError } from '../errors.ts';
import type { SandboxLimits } from './limits.ts';
import { GATE_CHANNEL_FD, gateMounts, sandboxCommand, type SandboxGate } from './sandbox-command.ts';
import { filterArgv, openFilterFd } from './seccomp.ts';
import { pathKind, realOrNull } from './tree.ts';

/** A host path bound at `target`, a path under HOME. */
export interface HomeMount {
  source: string;
  target: string;
  writable: boolean;
}

export interface SandboxPlan {
  /** Read-only beyond the system folders: the program's install, folders on PATH, the git metadata. */
  readable: string[];
  writable: string[];
  /** Inside a writable path, read-only all the same (the worktree's `.git`, the project's `.svc`). */
  protect: string[];
  /** A host file shown read-only in place of a file the view shows (a git config, its credentials left out); only
   * where the target is there. */
  covers?: Array<{ source: string; target: string }>;
  /** Invisible even inside a bound tree: a folder becomes an empty tmpfs. */
  hidden: string[];
  /** Bound last: the run's protocol files, readable (task) and writable (question, answer). */
  protocolReadable: string[];
  protocolWritable: string[];
  /** An empty private tmpfs, into which `homeMounts` are bound in order (provider-home.ts). */
  home: string | null;
  homeMounts?: HomeMount[];
  /** The same path inside as outside. */
  cwd: string;
  limits: SandboxLimits;
  /** 'none': its own network namespace with just its loopback; else the gate bridged into it. */
  network: 'none' | SandboxGate;
}

export function within(path: string, dir: string): boolean {
  return path === dir || dir === '/' || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

/** Whether a host path is there inside the sandbox `plan` describes (what a command provider's argv may name). */
export function shownBy(plan: SandboxPlan, path: string): boolean {
  if (hiddenHolding(plan, path) !== undefined) return false;
  if (shownBySystemViewOf(plan, path)) return true;
  const bound = [...plan.readable, ...plan.writable, ...plan.protocolReadable, ...plan.protocolWritable, plan.cwd];
  return bound.some((dir) => within(path, dir));
}

/** The hidden path of `plan` that holds `path`: nothing in one is bound, even by its own name (bwrapArgv). */
export function hiddenHolding(plan: SandboxPlan, path: string): string | undefined {
  return plan.hidden.find((h) => within(path, h));
}

/** Folders that hold programs and libraries (symbolic links in a merged-/usr system). */
export const SYSTEM_FOLDERS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/** /etc entries a program needs to run, resolve names and trust certificates (docs/engine.md: what is left out). */
const ETC_ENTRIES = [
  'passwd', 'group', 'hosts', 'hostname', 'host.conf', 'nsswitch.conf', 'resolv.conf', 'gai.conf', 'networks',
  'protocols', 'services', 'ssl/certs', 'ca-certificates', 'ca-certificates.conf', 'pki/tls/certs', 'pki/ca-trust',
  'crypto-policies', 'alternatives', 'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'localtime', 'timezone',
  'os-release', 'debian_version', 'lsb-release', 'locale.alias', 'locale.conf', 'mime.types', 'magic', 'magic.mime',
  'inputrc', 'terminfo', 'gitconfig', 'shells', 'bash.bashrc', 'profile', 'xattr.conf', 'java-17-openjdk',
  'python3', 'fonts', 'mtab',
];

// SANDBOX_FDS: a sandbox's descriptors after stdio. 3: the system-call filter (seccomp.ts), which bwrap reads.
// 4: the lifeline (spawn-group.ts) and 5: the gate's IPC channel (sandbox-command.ts), which bwrap hands on to the
// command unread, low ones as a shell can name only 0-9. 6 on: the /etc files copied in, which bwrap reads. After
// them: bwrap's status descriptor (spawn-group.ts).
/** The lifeline's descriptor (SANDBOX_FDS). */
export const LIFELINE_FD = 4;
/** The first of the /etc files' descriptors (SANDBOX_FDS). */
const ETC_FD = GATE_CHANNEL_FD + 1;

let cached: string[] | null = null;
const etcFiles: string[] = [];

/** Fresh descriptors of the /etc files systemView copies in, in its order. */
function openEtcFiles(): number[] {
  systemView();
  return etcFiles.map((path) => openSync(existsSync(path) ? path : '/dev/null', 'r'));
}

/**
 * The system part of every view: the folders programs are installed in, read-only, and of /etc only ETC_ENTRIES.
 * Everything else of the host (/home, /root, /var, /run, /srv, /opt, /etc's credentials) is simply not there.
 */
function systemView(): string[] {
  if (cached) return cached;
  const argv: string[] = [];
  for (const folder of SYSTEM_FOLDERS) {
    const kind = pathKind(folder);
    if (kind === 'link') argv.push('--symlink', readlinkSync(folder), folder);
    else if (kind === 'dir') argv.push('--ro-bind', folder, folder);
  }
  for (const entry of ETC_ENTRIES) {
    const path = `/etc/${entry}`;
    const kind = pathKind(path);
    // A link into the view (/etc/mtab → /proc, /etc/localtime → /usr/share) stays a link; one out of it
    // (resolv.conf → /run/…) is shown as the file it names, since its target folder is not in the view.
    const link = kind === 'link' ? readlinkSync(path) : null;
    const target = link === null ? null : resolve(dirname(path), link);
    if (link && target && (target.startsWith('/proc/') || isSystemPath(target))) argv.push('--symlink', link, path);
    // A file is copied in (read-only once bwrap remounts the root): every bind costs bwrap a pass over its mount
    // table (~0.17 ms each here), a copy does not.
    else if (pathKind(path, true) === 'file') argv.push('--file', String(ETC_FD + etcFiles.push(path) - 1), path);
    else if (kind) argv.push('--ro-bind', path, path);
  }
  cached = argv;
  return argv;
}

/** True for a path the system view shows: one in a system folder or in a /etc entry it copies in. */
function shownBySystem(path: string): boolean {
  return isSystemPath(path) || ETC_ENTRIES.some((e) => within(path, `/etc/${e}`));
}

/** Refuses a HOME that is or holds a folder the view needs (HOME=/usr, HOME=/): it can be neither covered nor shown. */
export function refuseSystemHome(path: string): void {
  const home = resolve(path);
  if (SYSTEM_FOLDERS.some((f) => within(f, home)) || ETC_ENTRIES.some((e) => within(`/etc/${e}`, home))) {
    throw new BadSettingError(`HOME "${home}" is or holds a system folder the sandbox shows to every agent, so ` +
      'its private HOME cannot cover it: set HOME to a folder of its own (e.g. /home/svc) for svc');
  }
}

/** HOME as the sandbox covers it: normalised (HOME=/usr/ is /usr), or null. */
function planHome(plan: SandboxPlan): string | null {
  return plan.home ? resolve(plan.home) : null;
}

/** True for a path the system view shows inside `plan`: not where its private HOME covers it. */
function shownBySystemViewOf(plan: SandboxPlan, path: string): boolean {
  const home = planHome(plan);
  return shownBySystem(path) && !(home !== null && within(path, home));
}

/** True for a path spelt without a symbolic link (bwrap mounts over a link's target, which may be out of the view). */
function linkFree(path: string): boolean {
  return realOrNull(path) === path;
}

/** True for a path the system view already shows (no need to bind it again). */
export function isSystemPath(path: string): boolean {
  return SYSTEM_FOLDERS.some((f) => within(path, f));
}

const ISOLATION = [
  '--unshare-user', // own user namespace: host mounts are locked, capabilities mean nothing outside it
  '--unshare-pid', // own PID namespace: its first process is init, everything in it dies with it (KILL_SANDBOX)
  '--unshare-ipc',
  '--unshare-uts',
  '--unshare-cgroup-try',
  '--cap-drop', 'ALL', // also when svc runs as root (bwrap would otherwise keep root's capabilities)
  '--disable-userns', // no nested user namespace to regain capabilities in
  '--die-with-parent', // svc's process dies → the sandbox dies, once set up (before: spawn-group.ts's lifeline)
  '--new-session', // no TIOCSTI into a terminal svc may hold
];

/**
 * Covers /proc/1 with an empty read-only tmpfs. The namespace's init is bwrap's own, which carries none of the
 * sandbox's rlimits and takes the filter only after it forked the command (bwrap's do_init): its /proc/1/mem, which
 * a process of the same uid may open read-write, would let the agent rewrite it. Nothing svc runs inside reads it.
 */
const INIT_MASK = ['--tmpfs', '/proc/1', '--remount-ro', '/proc/1'];

/** A shell's command run inside the sandbox that SIGKILLs every process there but itself and the init, which then
 * exits, ending the namespace (spawn-group.ts's lifeline): `kill -1` reaches only --unshare-pid's namespace. */
export const KILL_SANDBOX = 'kill -s KILL -- -1';

/** Fresh descriptors for one bwrap start, for its fd 3 on (SANDBOX_FDS; LIFELINE_FD's and GATE_CHANNEL_FD's left to
 * the caller); the caller closes them once the child has started. */
export function openSandboxFds(): Array<number | 'ignore'> {
  return [openFilterFd() ?? 'ignore', 'ignore', 'ignore', ...openEtcFiles()];
}

export function closeSandboxFds(fds: Array<number | 'ignore'>): void {
  for (const fd of fds) if (fd !== 'ignore') closeSync(fd);
}

/** The argv that runs `command` inside bwrap; `bwrap` is the resolved path of the binary. */
export function bwrapArgv(bwrap: string, plan: SandboxPlan, command: string[]): string[] {
  // Every sandbox has its own network namespace: no host port, no LAN, no metadata service, no DNS.
  const argv = [bwrap, ...ISOLATION, ...filterArgv(), '--unshare-net', ...systemView()];
  // Every tmpfs an agent can write has a size, so the memory it can hold there is bounded and measurable (limits.ts).
  const tmp = String(plan.limits.tmpBytes);
  argv.push('--dev', '/dev', '--size', tmp, '--tmpfs', '/dev/shm', '--proc', '/proc', ...INIT_MASK);
  argv.push('--size', tmp, '--tmpfs', '/tmp');
  // HOME is an empty private tmpfs, also inside a system folder (/usr/local/svc), where the system view shows it.
  const home = planHome(plan);
  if (home) refuseSystemHome(home);
  // A HOME the view shows by a link (/usr/local/svc → /home/svc) cannot be covered: bwrap would mount on the link's
  // target, out of the view. Nothing is there to cover, since the link leads nowhere inside.
  if (home && !(shownBySystem(home) && existsSync(home) && !linkFree(home))) {
    argv.push('--size', String(plan.limits.tmpBytes), '--tmpfs', home);
    for (const m of (plan.homeMounts ?? []).filter((h) => existsSync(h.source) && within(h.target, home))) {
      argv.push(m.writable ? '--bind' : '--ro-bind', m.source, m.target);
    }
  }
  // What the system view shows but the private HOME covers is gone from the view.
  const shownBySystemView = (p: string) => shownBySystemViewOf(plan, p);
  // Nothing in a hidden path is bound, even by its own name (a folder on PATH inside ~/.aws), but the working folder.
  const inPlanHidden = (p: string) => hiddenHolding(plan, p) !== undefined;
  const writable = plan.writable.filter((p) => existsSync(p) && (!inPlanHidden(p) || p === plan.cwd));
  // A link-free readable path in a writable tree is covered by that tree's bind, which comes after it (and `protect`
  // after that): its own bind would cost bwrap a mount and a pass over its mount table for nothing.
  const covered = (p: string) => writable.some((w) => within(p, w)) && linkFree(p);
  const readable = plan.readable
    .filter((p) => existsSync(p) && !shownBySystemView(p) && !inPlanHidden(p) && !covered(p));
  const bound = [...readable, ...writable];
  // Protection matters only inside a writable tree; binding it elsewhere would show what was never meant to be seen.
  const protect = [...new Set(plan.protect)].filter((p) => existsSync(p) && writable.some((w) => within(p, w)));
  // A mask is needed only where a bound tree (the system view is one) would show the secret; elsewhere it is simply
  // never mounted.
  // Of what the system view shows only a link-free spelling is masked: bwrap would mount on a link's target, which may
  // be out of the view, and fail (withRealSpellings adds the real spelling to `hidden`).
  const hidden = plan.hidden.filter((p) => existsSync(p)
    && ((shownBySystemView(p) && linkFree(p)) || bound.some((b) => within(p, b) && p !== b)));
  const hiddenDirs = hidden.filter((p) => pathKind(p, true) === 'dir');
  const inHidden = (p: string) => hiddenDirs.some((h) => within(p, h));
  for (const path of readable.filter((p) => !inHidden(p))) argv.push('--ro-bind', path, path);
  for (const path of writable.filter((p) => !inHidden(p) || p === plan.cwd)) argv.push('--bind', path, path);
  for (const path of protect) argv.push('--ro-bind', path, path);
  for (const { source, target } of plan.covers ?? []) {
    // One the system view shows (/etc/gitconfig, a config linked into /usr) too, where the view holds it: /etc's copy,
    // else its real path (bwrap would resolve an absolute link on the way from outside the view).
    const real = realOrNull(target);
    const at = real === null ? null : bound.some((b) => within(target, b)) || etcFiles.includes(target) ? target
      : shownBySystemView(real) ? real : null;
    if (at !== null && existsSync(source)) argv.push('--ro-bind', source, at);
  }
  for (const path of hidden) {
    if (hiddenDirs.includes(path)) argv.push('--tmpfs', path);
    else argv.push('--ro-bind', '/dev/null', path);
  }
  // The working directory that a mask just covered (a worktree under .svc/worktrees) is bound again, protected.
  for (const path of writable.filter((p) => p === plan.cwd && inHidden(p))) {
    argv.push('--bind', path, path);
    for (const inner of protect.filter((p) => within(p, path))) argv.push('--ro-bind', inner, inner);
  }
  for (const path of plan.protocolReadable.filter((p) => existsSync(p))) argv.push('--ro-bind', path, path);
  for (const path of plan.protocolWritable.filter((p) => existsSync(p))) argv.push('--bind', path, path);
  // Last, the masks and the root become read-only (bwrap made the mount points in them first).
  for (const dir of hiddenDirs) argv.push('--remount-ro', dir);
  const gate = plan.network === 'none' ? null : plan.network;
  if (gate) argv.push(...gateMounts(gate));
  argv.push('--remount-ro', '/dev', '--remount-ro', '/');
  argv.push('--chdir', plan.cwd, '--', ...sandboxCommand(plan.limits, gate, command));
  return argv;
}
