// Process groups we own: signalled only while they are still the identity recorded at spawn (pid + /proc start time,
// proc-stat.ts); one read back from a run folder is untrusted, so such callers also pass an owner check (isWorkerOf
// here, run-context.ts isChildOf).
import { statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { hasDied, identityOf, isPidAlive, procStart, statFields, type ProcIdentity } from '../proc-stat.ts';
import { readAgentFile } from './plain-tree.ts';
import { allPids, blockFor, orNull, pathKind, procList, readlinkOrNull, realOrNull } from '../spawn/tree.ts';

/** Whether the live process `pid` is the one the caller means (e.g. our worker for a given run). */
export type OwnerCheck = (pid: number) => boolean;

function procGroup(pid: number): number | null {
  const value = Number(statFields(pid)?.[2]);
  return Number.isSafeInteger(value) ? value : null;
}

/**
 * Signals the group only if it is still ours: led by the recorded pid (every group svc makes is) with the recorded
 * start time (without one nothing can be proven), and passing `owner`. With the leader gone, Linux hands out no pid
 * that is still a group's id, so what is left may be signalled; for an identity read from disk (`owner` given) only
 * when every remaining member passes `owner`.
 */
export function signalGroup(id: ProcIdentity, signal: NodeJS.Signals, owner?: OwnerCheck): boolean {
  if (!Number.isSafeInteger(id.pid) || id.pid <= 1 || id.pgid !== id.pid || id.proc_start === null) return false;
  const leader = statFields(id.pid);
  // A zombie leader is still checked by its start time; only a live one can pass `owner` (a zombie has no argv).
  if (leader && (leader[19] !== id.proc_start || Number(leader[2]) !== id.pgid)) return false;
  if (leader && !hasDied(id.pid, leader)) {
    if (owner && !owner(id.pid)) return false;
  } else if (owner) {
    // A zombie leader (checked above) has no argv or environment left to pass `owner` with: the live members must.
    const members = liveMembers(id.pgid);
    if (members.length === 0 || !members.every(owner)) return false;
  }
  return orNull(() => process.kill(-id.pgid, signal)) === true;
}

/** A sandbox's init by its pid and start time: it is not in svc's group once bwrap set it up (its own session). */
export interface NamespaceInit {
  pid: number;
  proc_start: string;
}

/**
 * The first process of a sandbox's PID namespace, as bwrap reported it (its "child-pid" and "pid-namespace"): while
 * that pid is still a process in that namespace, its start time; null once it is gone (or the pid names another).
 */
export function namespaceInit(pid: number, pidNamespace: number): NamespaceInit | null {
  if (!Number.isSafeInteger(pid) || pid <= 1) return null;
  const start = procStart(pid);
  const inside = readlinkOrNull(`/proc/${pid}/ns/pid`) === `pid:[${pidNamespace}]`;
  // Read again: the namespace seen belongs to the process whose start time was read only if it is unchanged.
  return start !== null && inside && procStart(pid) === start ? { pid, proc_start: start } : null;
}

/** SIGKILL to a namespace's init, only while it is the process recorded (and, read from disk, passes `owner`): the
 * kernel then kills all in it. */
export function killNamespace(init: NamespaceInit, owner?: OwnerCheck): void {
  if (!Number.isSafeInteger(init.pid) || init.pid <= 1 || procStart(init.pid) !== init.proc_start) return;
  if (owner && !owner(init.pid)) return;
  // Gone meanwhile: nothing is left to kill.
  orNull(() => process.kill(init.pid, 'SIGKILL'));
}

/** Whether the group (a negative pid names it) is gone within `timeoutMs`. */
export async function waitGroupGone(pgid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isPidAlive(-pgid)) return true;
    await sleep(50);
  }
  return !isPidAlive(-pgid);
}

/** Groups led by descendants of `id`'s leader (gemini starts each shell command in its own group); read before
 * signalling, as once the leader is gone its orphans are reparented and no longer traceable to it. */
function descendantGroups(id: ProcIdentity): ProcIdentity[] {
  const children = Map.groupBy(allPids(), (pid) => Number(statFields(pid)?.[1]));
  const found: ProcIdentity[] = [];
  const queue = [...(children.get(id.pid) ?? [])];
  for (let pid = queue.shift(); pid !== undefined; pid = queue.shift()) {
    queue.push(...(children.get(pid) ?? []));
    if (procGroup(pid) === pid && pid !== id.pgid) found.push(identityOf(pid));
  }
  return found;
}

/** SIGTERM, then SIGKILL after the grace, to the group and the groups its members started; resolves once empty. */
export async function terminateGroup(id: ProcIdentity, graceMs: number, owner?: OwnerCheck): Promise<void> {
  const groups = isPidAlive(id.pid) && (!owner || owner(id.pid)) ? [id, ...descendantGroups(id)] : [id];
  const signalled = groups.filter((g) => signalGroup(g, 'SIGTERM', g === id ? owner : undefined));
  if (signalled.length === 0) return;
  // One deadline for all the groups: an agent that starts many groups must not get a grace for each.
  const left = async (ms: number) => {
    const deadline = Date.now() + ms;
    for (const g of signalled) if (!(await waitGroupGone(g.pgid, Math.max(0, deadline - Date.now())))) return true;
    return false;
  };
  if (!(await left(graceMs))) return;
  signalled.forEach((g) => signalGroup(g, 'SIGKILL', g === id ? owner : undefined));
  await left(5_000);
}

/** The processes of group `pgid` that live (a zombie does not: its leader, not yet reaped, no longer runs). */
function liveMembers(pgid: number): number[] {
  return allPids().filter((pid) => procGroup(pid) === pgid && !hasDied(pid, statFields(pid)));
}

/**
 * SIGTERM to our group, SIGKILL after `graceMs` to what is left, without returning to the event loop: for a process
 * about to exit at a signal (run-context.ts exitNow), whose other code must not run meanwhile (it would record the
 * child's end as a failure of the run). This process does not reap the child meanwhile: a zombie leader counts gone.
 */
export function endGroupNow(id: ProcIdentity, graceMs: number): void {
  if (!signalGroup(id, 'SIGTERM')) return;
  const until = performance.now() + graceMs;
  while (liveMembers(id.pgid).length > 0 && performance.now() < until) blockFor(10);
  if (liveMembers(id.pgid).length > 0) signalGroup(id, 'SIGKILL');
}

// The CLI of this install, whether it runs from the sources (src/cli.ts) or the build (dist/cli.js).
const CLI_PATHS = new Set(
  ['../cli.ts', '../cli.js', '../../src/cli.ts', '../../dist/cli.js']
    .map((rel) => fileURLToPath(new URL(rel, import.meta.url))).map((path) => realOrNull(path) ?? path),
);

/** The real path of the folder the process `pid` names by `--repo` (last one wins, as in parseArgs), relative to its
 * working directory; without one, that working directory. Null when either is gone. */
function projectNamedBy(pid: number, argv: readonly string[]): string | null {
  const cwd = readlinkOrNull(`/proc/${pid}/cwd`);
  if (cwd === null) return null;
  let named: string | undefined;
  argv.forEach((arg, i) => {
    if (arg === '--repo') named = argv[i + 1];
    else if (arg.startsWith('--repo=')) named = arg.slice('--repo='.length);
  });
  return realOrNull(resolve(cwd, named ?? '.'));
}

/**
 * Whether `dir` (a real path) is the project `repo` or, with `within`, a folder inside it that is in no repository
 * nested in it: from there `svc start` takes the nearest one up (git's top level, launch.ts resolveRepo) for its
 * project, so an --open-pr there is that project's, not `repo`'s. A `.git` on the way up that git takes marks one.
 */
function isProject(dir: string | null, repo: string, within: boolean): boolean {
  const real = realOrNull(repo) ?? repo;
  if (dir === null || dir === real) return dir !== null;
  if (!within || !dir.startsWith(`${real}/`)) return false;
  for (let at = dir; at !== real; at = dirname(at)) if (gitTakes(join(at, '.git'))) return false;
  return true;
}

/**
 * Whether git's discovery stops at the `.git` at `path` (setup.c is_git_directory): a file (a worktree's, a
 * submodule's; git fails at one it cannot read, so no `svc start` runs below it), or a folder with a HEAD naming a ref
 * or an object and its objects and refs (or a commondir saying where they are). Any other `.git` (an empty folder an
 * agent or a tool left) git passes over, and so must this: else an --open-pr there would hold no run at all.
 */
function gitTakes(path: string): boolean {
  const kind = pathKind(path, true);
  if (kind !== 'dir') return kind === 'file';
  const is = (name: string, want: 'dir' | 'file') => pathKind(join(path, name), true) === want;
  if (!(is('commondir', 'file') || (is('objects', 'dir') && is('refs', 'dir')))) return false;
  if (pathKind(join(path, 'HEAD')) === 'link') return readlinkOrNull(join(path, 'HEAD'))?.startsWith('refs/') ?? false;
  // A bounded read: the folder may be anyone's, its HEAD any size (or a FIFO).
  const head = readAgentFile(join(path, 'HEAD'), 128);
  return head !== null && /^(?:ref:\s*refs\/|[0-9a-f]{40})/i.test(head);
}

/**
 * The worker argv is `node <cli> worker <mode> --run-id <run> --repo <repo>` (engine/launch.ts spawnWorker): a worker
 * of this run of this project, as run ids are unique only within a project (another's run may have the same).
 */
export function isWorkerOf(run: string, repo: string): OwnerCheck {
  return (pid) => {
    const argv = procList(pid, 'cmdline');
    if (!argv) return false;
    const cli = argv.findIndex((a) => /cli\.[jt]s$/.test(a) && CLI_PATHS.has(realOrNull(a) ?? a));
    const at = argv.indexOf('--run-id');
    const ours = cli !== -1 && argv[cli + 1] === 'worker' && at !== -1 && argv[at + 1] === run;
    return ours && isProject(projectNamedBy(pid, argv), repo, false);
  };
}

/**
 * An --open-pr writes its run as a worker does, in the command's own process (finish-phase.ts openPrLater): argv
 * `node <cli> start … --open-pr <run>` (or `--open-pr=<run>`), in the project (`--repo`, else its working directory:
 * the project or a folder in it, as `svc start` finds the project from either). The CLI is found by its real path,
 * as a person's `svc` is a link to it. Not an owner to signal: only to wait for (liveWorkerOf).
 */
function isPrOpenerOf(run: string, repo: string): OwnerCheck {
  return (pid) => {
    const argv = procList(pid, 'cmdline') ?? [];
    const cli = argv[argv.indexOf('start') - 1] ?? '';
    if (!CLI_PATHS.has(realOrNull(cli) ?? cli)) return false;
    const at = argv.indexOf('--open-pr');
    const ours = (at !== -1 && argv[at + 1] === run) || argv.includes(`--open-pr=${run}`);
    return ours && isProject(projectNamedBy(pid, argv), repo, true);
  };
}

/**
 * A trigger's launcher is a process of this user whose argv is `node <cli> start … --run-id <run>`, the run id last
 * (trigger/executor.ts launch). Any <cli>: a server restarted after an upgrade moved its CLI still ends the
 * launches its former self made. The run id is the one the server chose for that job alone, and the caller's pid and
 * start time are those it recorded when it started the launcher.
 */
export function isLauncherOf(run: string): OwnerCheck {
  return (pid) => {
    const argv = procList(pid, 'cmdline');
    if (!argv || orNull(() => statSync(`/proc/${pid}`).uid) !== process.getuid?.()) return false;
    return argv.indexOf('start') >= 2 && argv.at(-2) === '--run-id' && argv.at(-1) === run;
  };
}

/**
 * Blocks (its caller holds a lock, run-take.ts) until the process just started as `pid` passes `owner`, or is gone, for
 * at most `ms`: spawn returns before the kernel sets the new program's argv, and till then no reader of /proc takes it
 * for the worker it is (liveWorkerOf), so a command that read the run then would take the run beside it.
 */
export function untilOwned(pid: number, owner: OwnerCheck, ms = 2_000): void {
  const until = performance.now() + ms;
  while (!owner(pid) && procStart(pid) !== null && performance.now() < until) blockFor(1);
}

/** Whether the worker a run's state names is still that process (pid and start time): then it owns the state. */
export function workerAlive(state: { pid: number | null; proc_start: string | null }): boolean {
  if (typeof state.pid !== 'number') return false;
  const started = procStart(state.pid);
  return started !== null && (state.proc_start === null || state.proc_start === started);
}

/** What a run's state says of its workers (run-state.ts RunState), read from disk: untrusted. */
export interface RunWorkers {
  run: string;
  pid: unknown;
  proc_start: unknown;
  verifier?: unknown;
}

/**
 * The pid of a worker that may still write the run's folder, else null: its last attempt's (`pid`, cleared as that
 * worker's last write: run-context.ts leave; an --open-pr's too) or its last verify's (`verifier`, never cleared: it
 * counts until it exits). Each counts only while that very process (pid and start time) lives and is a worker (or an
 * --open-pr) of this run in `repo`, the project whose run folder the state was read from, for state.json is only a
 * claim. Every "is a worker still there" asks this: a resume, a
 * verify, an --open-pr (launch.ts afterLastWorker), a checkout's rename of its runs (checkout-claim.ts), `svc ship`
 * and the pending runs' pass before a command (shipper.ts shipRuns).
 */
export function liveWorkerOf(state: RunWorkers, repo: string): number | null {
  const worker = isWorkerOf(state.run, repo);
  const opener = isPrOpenerOf(state.run, repo);
  const owner: OwnerCheck = (pid) => worker(pid) || opener(pid);
  const verifier = state.verifier !== null && typeof state.verifier === 'object' ? state.verifier : {};
  for (const named of [state, verifier as { pid?: unknown; proc_start?: unknown }]) {
    const { pid, proc_start: start } = named;
    if (typeof pid !== 'number' || (typeof start !== 'string' && start !== null)) continue;
    if (workerAlive({ pid, proc_start: start }) && owner(pid)) return pid;
  }
  return null;
}

/** A run just made has no worker yet; one still without a worker this long after its last write never gets one. */
const UNSTARTED_GRACE_MS = 60_000;

/** How long ago a state with no worker recorded was last written; NaN with a worker, or with no valid time. */
function ageWithoutWorker(state: { pid?: unknown; updated_at?: unknown }, now: number): number {
  if (state.pid !== null && state.pid !== undefined) return NaN;
  return now - (typeof state.updated_at === 'string' ? Date.parse(state.updated_at) : NaN);
}

/** No worker recorded and none coming: its state was last written (made, resumed, stopped) over the grace ago. */
export function noWorkerComing(state: { pid?: unknown; updated_at?: unknown }, now: number): boolean {
  // A state with no time of its own svc did not write: nothing says how old it is.
  return ageWithoutWorker(state, now) >= UNSTARTED_GRACE_MS;
}

/** No worker recorded yet, and one may still come: its state was last written (made, resumed) under the grace ago. */
export function workerComing(state: { pid?: unknown; updated_at?: unknown }, now: number): boolean {
  return ageWithoutWorker(state, now) < UNSTARTED_GRACE_MS;
}
