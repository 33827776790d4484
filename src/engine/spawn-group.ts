// Runs an agent (a provider or a check) in its own process group, confined, its output streamed and capped.
import type { Writable } from 'node:stream';
import { childEnv, startChild, type ChildProcess } from '../spawn/start.ts';
import {
  bwrapParts, closeSandboxFds, KILL_SANDBOX, LIFELINE_FD, openSandboxFds, type SandboxPlan,
} from '../spawn/bwrap-argv.ts';
import { createTreeGuard, sandboxMembers, TREE_MARKER } from '../spawn/tree.ts';
import { statFields } from '../proc-stat.ts';
import { identityOf, killNamespace, namespaceInit, signalGroup, type NamespaceInit } from './proc-group.ts';
import { memoryBreach, watchLimits, type WatchedLimits } from '../spawn/limits.ts';
import { openMemoryCgroup } from '../spawn/memory-cgroup.ts';
import { num, obj, tryParseJson } from '../untrusted.ts';
import { pieceEnd } from './text.ts';

export interface GroupResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  output: Buffer;
  truncated: boolean;
  /** Why svc ended the agent before it exited by itself: a limit it broke, or its wall-clock time. */
  endedBy: { limit: 'processes' | 'memory' | 'disk' | 'time'; message: string } | null;
  /** bwrap never reported the agent's exit on its status descriptor: the sandbox could not be set up, no agent ran. */
  sandboxFailed: boolean;
}

export type GroupRun = ReturnType<typeof spawnGroup>;

interface SpawnGroupOptions {
  cwd: string;
  /** svc's own environment, from which the spawn policy drops svc's secrets and SVC_*; `extra` is added after. */
  env: NodeJS.ProcessEnv;
  extra: Record<string, string>;
  stdin?: string;
  onLine?: (stream: 'stdout' | 'stderr', line: string) => void;
  maxBytes: number;
  timeoutMs: number;
  /** bwrap's path and what the agent may see; null runs it unconfined (policy or SVC_SANDBOX said "none"). */
  sandbox: { bwrap: string; plan: SandboxPlan } | null;
  /** Limits svc watches while the agent runs; breaking one ends it. */
  watch?: WatchedLimits;
  /** The sandbox's namespace init as soon as bwrap reports it, for a stop from outside this process to record. */
  onInit?: (init: NamespaceInit) => void;
  /** A sandbox started before its plan was known, used where it fits (else ended); ignored without `sandbox`. */
  early?: EarlySandbox | null;
}

const SAMPLE_MS = 100;
/** How long output may still arrive after the first process exited (its own last writes, bwrap's status). */
const LEFTOVER_GRACE_MS = 2_000;
const PAUSE_ROUNDS = 200;
/** How many scans for marked processes a lifeline makes at most (one takes milliseconds). */
const MARKER_SCANS = 50;
/** Stopped, traced, in the kernel (it stops on its way out), zombie, dead or gone. */
const STOPPED_STATES: ReadonlySet<string> = new Set(['T', 't', 'D', 'Z', 'X', '']);

function signalEach(pids: readonly number[], sig: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, sig);
    } catch {
      // gone meanwhile
    }
  }
}

/** Stops every member; one may fork between the scan and its SIGSTOP, so scan again (bounded) until all are stopped. */
function stopAll(members: () => number[]): void {
  signalEach(members(), 'SIGSTOP');
  for (let round = 0; round < PAUSE_ROUNDS; round++) {
    const running = members().filter((pid) => !STOPPED_STATES.has(statFields(pid)?.[0] ?? ''));
    if (running.length === 0) return;
    signalEach(running, 'SIGSTOP');
  }
}

/** The first `maxBytes` of the child's stdout and stderr together (less what could be a secret's start), each line to
 * `onLine` (past 64 KiB, in pieces). */
function captureOutput(child: ChildProcess, maxBytes: number, onLine: SpawnGroupOptions['onLine']) {
  const chunks: Buffer[] = [];
  let size = 0;
  let truncated = false;
  for (const name of ['stdout', 'stderr'] as const) {
    let partial = '';
    child[name]?.on('data', (chunk: Buffer) => {
      const take = chunk.subarray(0, maxBytes - size);
      if (take.length) chunks.push(take);
      size += take.length;
      if (take.length < chunk.length) truncated = true;
      if (!onLine) return;
      partial += chunk.toString('utf8');
      const lines = partial.split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) onLine(name, line);
      // Each piece is scrubbed on its own (text.ts): it ends where no secret is cut in two, the rest waits for more.
      if (partial.length > 64 * 1024) {
        const end = pieceEnd(partial);
        onLine(name, partial.slice(0, end));
        partial = partial.slice(end);
      }
    }).on('close', () => {
      // 'close', not 'end': a stream closed from this end (a leftover's pipe, spawnGroup) never ends, and its last
      // line without a newline (a provider's final JSON) still counts.
      if (partial && onLine) onLine(name, partial);
      partial = '';
    });
  }
  // Cut at the cap, the output ends where no secret is cut in two: a secret's first half would pass the scrub (latin1:
  // pieceEnd's characters are ASCII, so it counts bytes).
  const output = (): Buffer => {
    const all = Buffer.concat(chunks);
    return truncated ? all.subarray(0, pieceEnd(all.toString('latin1'))) : all;
  };
  return { output, truncated: () => truncated };
}

// The agent's lifeline: a socket whose other end only this process holds, which it ends once the first process has
// exited, with a line where that was an unconfined agent. A watcher beside the agent waits on it and then SIGKILLs
// everything in the sandbox (bwrap-argv.ts), or, unconfined, the agent's group, and first, if the socket ended
// without that line (this process died), every process still marked as the agent's (tree.ts; what this process would
// have killed). --die-with-parent alone has gaps: bwrap ties itself to this process only some way into its start and
// its namespace's init only once set up, a tie made once the parent is dead never fires, and an init in its setup
// ignores a SIGTERM; this process killed meanwhile (or bwrap killed while this one dies too, as `pkill -f <folder>`
// does) left the sandbox to start the agent for nobody. The watcher ignores SIGTERM and SIGHUP: a stop's SIGTERM to
// the group, or that pkill (its argv repeats the agent's), would end it before what it watches for.
function withLifeline(argv: string[], fd: number, sandboxed: boolean): string[] {
  // Unconfined: each marked process but this watcher (`me`) at once as one scan finds it, scanning again until one
  // finds none (a child forked meanwhile carries the marker too; bounded), then the group, this watcher with it. The
  // marker is read from the inherited environment (only its owner may read it; this text is world-readable), and the
  // scan's own grep runs without it. A pid listed may have changed hands since: each is killed only if it still holds
  // the marker and kept one start time (`st`, field 22 of its stat) from before that check to after it.
  const marked = `read -r me _ </proc/self/stat; m=$${TREE_MARKER}; unset ${TREE_MARKER}; i=0; ` +
    `st() { s=; read -r l </proc/$1/stat && set -- \${l##*") "} && [ $# -ge 20 ] && shift 19 && s=$1; }; ` +
    `while [ $i -lt ${MARKER_SCANS} ]; do i=$((i+1)); f=; ` +
    `for e in $(grep -lszxF "${TREE_MARKER}=$m" /proc/[0-9]*/environ); do p=\${e%/environ}; p=\${p#/proc/}; ` +
    `[ "$p" = "$me" ] || { st "$p"; a=$s; grep -qszxF "${TREE_MARKER}=$m" "$e" && st "$p" && [ "$a" = "$s" ] && ` +
    `{ f=1; kill -s KILL "$p"; }; }; done; [ "$f" ] || break; done`;
  const end = sandboxed ? `read -r _; ${KILL_SANDBOX}` : `read -r _ || { ${marked}; }; kill -s KILL -- 0`;
  // Ignored before the watcher is forked (so from its first instruction), then back to the default for the agent.
  const watch = `trap '' TERM HUP; { ${end}; } <&${fd} >/dev/null 2>&1 & trap - TERM HUP;`;
  // $0 is the program's name: a shell names itself in the line saying it found no such program.
  return ['/bin/sh', '-c', `${watch} exec ${fd}<&-; exec "$@"`, argv[0] ?? '', ...argv];
}

export function spawnGroup(argv: string[], opts: SpawnGroupOptions) {
  const sandbox = opts.sandbox;
  const lifeFd = sandbox ? LIFELINE_FD : 3;
  const guard = sandbox ? null : createTreeGuard();
  const watched = withLifeline(argv, lifeFd, sandbox !== null);
  // First, as it may refuse the plan (bwrap-argv.ts: a HOME that holds a system folder) before anything is opened.
  const parts = sandbox ? bwrapParts(sandbox.plan, watched) : null;
  const memoryBytes = opts.watch?.memoryBytes ?? sandbox?.plan.limits.memoryBytes ?? 0;
  // PWD names the working folder: some CLIs (opencode) take their project folder from it, and the shell that starts
  // the agent (withLifeline) would set one anyway.
  const extra = { PWD: opts.cwd, ...opts.extra, ...guard ? Object.fromEntries([guard.marker.split('=')]) : {} };
  const started = parts && opts.early?.take(memoryBytes, opts.stdin !== undefined, parts.command);
  if (!started) opts.early?.discard();
  let child: ChildProcess;
  let cgroup: ReturnType<typeof openMemoryCgroup>;
  // bwrap's status descriptor, after the filter's and the /etc files': it reports the agent's exit only if it ran.
  let statusFd: number;
  if (started) {
    ({ child, cgroup, statusFd } = started);
    started.start(['--json-status-fd', String(statusFd), ...parts.options], childEnv('agent', opts.env, extra));
  } else {
    cgroup = sandbox ? openMemoryCgroup(memoryBytes) : null;
    // bwrap reads the system-call filter and the /etc files from fd 3 on; the child has its own copies once started.
    const fds = sandbox ? openSandboxFds() : [];
    statusFd = 3 + fds.length;
    const confined = parts ? [sandbox!.bwrap, '--json-status-fd', String(statusFd), ...parts.options, '--',
      ...parts.command] : watched;
    const extraFds = sandbox ? [...fds.map((fd, i) => (3 + i === lifeFd ? 'pipe' as const : fd)), 'pipe' as const]
      : ['pipe' as const];
    try {
      child = startChild(cgroup ? cgroup.wrap(confined) : confined, {
        kind: 'agent', base: opts.env, extra, cwd: opts.cwd, detached: true,
        stdio: [opts.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe', ...extraFds],
      });
    } finally {
      closeSandboxFds(fds);
    }
  }
  const watch = opts.watch ? { ...opts.watch, cgroup } : undefined;
  const identity = child.pid ? identityOf(child.pid) : { pid: 0, pgid: 0, proc_start: null };
  let sampler: NodeJS.Timeout | undefined;
  if (guard && child.pid) {
    guard.watch(child.pid);
    sampler = setInterval(() => guard.sample(), SAMPLE_MS).unref();
  }
  // The first process has exited: without a sandbox, nothing it started may outlive it (a setsid'd daemon would also
  // hold the output pipes open, so 'close' would never come). What still holds them after a grace got away (a bwrap
  // init stopped before bwrap reported it, which waits for ever without starting the agent; a process that cleared
  // svc's marker): its output is nobody's, and waiting for it held the run `running` for ever, so the pipes are closed
  // from this end.
  let closeLeftovers: NodeJS.Timeout | undefined;
  let rescan: NodeJS.Timeout | undefined;
  // With a sandbox, nothing in it outlives svc's bwrap either: bwrap ties its namespace's init to itself
  // (--die-with-parent) only once it has set it up, and until then that init ignores the SIGTERM of a stop (an init
  // gets only the signals it handles), so a stop landing meanwhile left it to go on in a session of its own and start
  // the agent. bwrap reports it on its status descriptor; whichever of that line and bwrap's exit comes second kills
  // it, and with it everything in its namespace.
  let exited = false;
  let init: NamespaceInit | null = null;
  const endSandbox = () => {
    if (exited && init) killNamespace(init);
  };
  child.on('exit', () => {
    exited = true;
    // The line says the agent's own end: what the guard recorded is killed below, no scan needed.
    (child.stdio[lifeFd] as NodeJS.WritableStream | null | undefined)?.on('error', () => undefined)
      .end(guard ? '\n' : '');
    endSandbox();
    clearInterval(sampler);
    // One scan can miss a process: one in the middle of an exec shows an empty environment, and without a parent left
    // among the agent's it is found by its marker alone. One that still holds the output pipes (a setsid'd child that
    // kept the agent's stdout) is found by scanning again until they close, once its exec is through.
    if (guard) {
      guard.killAll();
      rescan = setInterval(() => guard.killAll(), SAMPLE_MS).unref();
    }
    closeLeftovers = setTimeout(() => {
      for (const stream of child.stdio) stream?.destroy();
    }, LEFTOVER_GRACE_MS);
  });
  const members = (): number[] => {
    if (!child.pid) return [];
    return guard ? guard.members() : [child.pid, ...sandboxMembers(child.pid)];
  };
  const signalAll = (sig: NodeJS.Signals) => signalEach(members(), sig);
  const agentExited = sandbox ? readStatus(child, statusFd, (found) => {
    init = found;
    opts.onInit?.(found);
    endSandbox();
  }) : null;
  const capture = captureOutput(child, opts.maxBytes, opts.onLine);
  // The child may exit without reading its prompt; EPIPE is not our failure.
  if (opts.stdin !== undefined) child.stdin?.on('error', () => undefined).end(opts.stdin);
  const kill = () => {
    signalAll('SIGKILL');
    signalGroup(identity, 'SIGKILL');
  };
  let endedBy: GroupResult['endedBy'] = null;
  const timer = setTimeout(() => {
    endedBy ??= { limit: 'time', message: `still running after ${Math.round(opts.timeoutMs / 1000)} s` };
    signalGroup(identity, 'SIGTERM');
    setTimeout(kill, 5_000).unref();
  }, opts.timeoutMs);
  const unwatch = watch && child.pid
    ? watchLimits(watch, members, (breach) => {
      endedBy ??= breach;
      kill();
    })
    : () => undefined;
  const done = new Promise<GroupResult>((resolve) => {
    child.on('error', (err) => {
      clearTimeout(timer);
      clearInterval(rescan);
      unwatch();
      cgroup?.remove();
      const msg = Buffer.from(`failed to start: ${err.message}\n`);
      resolve({ code: 127, signal: null, output: msg, truncated: false, endedBy, sandboxFailed: sandbox !== null });
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      clearTimeout(closeLeftovers);
      clearInterval(rescan);
      guard?.killAll();
      unwatch();
      // The kernel may have killed for memory after the last sample (the agent then exited on its own).
      const overMemory = watch ? memoryBreach(watch) : null;
      if (overMemory) endedBy ??= { limit: 'memory', message: overMemory };
      cgroup?.remove();
      const sandboxFailed = agentExited !== null && signal === null && endedBy === null && !agentExited();
      resolve({ code, signal, output: capture.output(), truncated: capture.truncated(), endedBy, sandboxFailed });
    });
  });
  // pause and resume: SIGSTOP / SIGCONT to every process of the agent (a budget question waits); SIGKILL reaches a
  // frozen one too.
  return { identity, done, pause: () => stopAll(members), resume: () => signalAll('SIGCONT'), kill };
}

export type EarlySandbox = ReturnType<typeof startEarlySandbox>;

/** Where an early sandbox's loader finds its command: set last in bwrap's options, unset before anything runs. */
const START_VAR = 'SVC_START';
// bwrap takes its options from a descriptor (--args) but not its command, so an early sandbox's command is fixed at
// its spawn: a shell that runs what the worker set last among the options. An argv cut short (its worker died while
// writing it) leaves it nothing to run, a `set` with no `exec` or a quote never closed, never a part of the agent.
const LOADER = ['/bin/sh', '-c', `c=$${START_VAR}; unset ${START_VAR}; eval "$c"`, 'svc-start'];
/** Below the kernel's 128 KiB for one environment string: a longer command goes the ordinary way. */
const START_MAX = 120 * 1024;

const shellWord = (text: string): string => `'${text.replaceAll("'", "'\\''")}'`;

/**
 * A sandbox's first process, started once the worker knows its run is sandboxed, before the gate, the plan and the
 * argv are ready (docs/bench.md "the cgroup join off the way"): it joins the memory cgroup, waiting out the kernel's
 * grace period there, and execs bwrap, which waits on a pipe for its options while the worker works. spawnGroup
 * hands them over with the agent's environment and command; `discard` ends it unused. bwrap that reads no options
 * (the pipe closed empty: this process died) has no command and exits; nothing runs before the cgroup join.
 */
export function startEarlySandbox(bwrap: string, memoryBytes: number, env: NodeJS.ProcessEnv, stdin: boolean) {
  const cgroup = openMemoryCgroup(memoryBytes);
  const fds = openSandboxFds();
  const statusFd = 3 + fds.length;
  const argsFd = statusFd + 1;
  const argv = [bwrap, '--args', String(argsFd), '--', ...LOADER];
  let child: ChildProcess;
  try {
    child = startChild(cgroup ? cgroup.wrap(argv) : argv, {
      kind: 'agent', base: env, cwd: '/', detached: true,
      stdio: [stdin ? 'pipe' : 'ignore', 'pipe', 'pipe',
        ...fds.map((fd, i) => (3 + i === LIFELINE_FD ? 'pipe' as const : fd)), 'pipe', 'pipe'],
    });
  } catch (err) {
    cgroup?.remove();
    throw err;
  } finally {
    closeSandboxFds(fds);
  }
  let failed = false;
  child.on('error', () => (failed = true));
  let state: 'waiting' | 'taken' | 'ended' = 'waiting';
  const discard = (): void => {
    if (state !== 'waiting') return;
    state = 'ended';
    for (const stream of child.stdio) stream?.destroy();
    if (child.pid) signalGroup(identityOf(child.pid), 'SIGKILL');
    cgroup?.remove();
  };
  return {
    pid: child.pid ?? 0,
    /** Its process, to run `command` in a sandbox of `bytes` with a piped stdin or not, once `start` gives it its
     * options and environment; null (and ended) where it cannot. */
    take(bytes: number, piped: boolean, command: string[]) {
      if (state !== 'waiting') return null;
      const script = `set -- ${command.map(shellWord).join(' ')}; exec "$@"`;
      const fits = bytes === memoryBytes && piped === stdin && !failed && child.exitCode === null
        && child.signalCode === null && Buffer.byteLength(script) < START_MAX;
      if (!fits) return discard(), null;
      state = 'taken';
      const start = (options: string[], agentEnv: NodeJS.ProcessEnv): void => {
        const setenv = Object.entries(agentEnv).flatMap(([name, value]) => ['--setenv', name, value ?? '']);
        const args = [...options, '--clearenv', ...setenv, '--setenv', START_VAR, script];
        const pipe = (child.stdio[argsFd] as Writable).on('error', () => undefined);
        pipe.write(`${args.join('\0')}\0`);
        // bwrap waits for the end: closed now where the write went through at once, not when this thread next
        // reaches its event loop (where `end` queues it) after the work that follows the spawn.
        if (pipe.writableLength === 0) pipe.destroy();
        else pipe.end();
      };
      return { child, cgroup, statusFd, start };
    },
    discard,
  };
}

const STATUS_CAP = 64 * 1024;

/** bwrap's status lines: first its namespace's init (`{"child-pid": …, "pid-namespace": …}`), to `onInit` while it
 * lives; `{"exit-code": …}` only once the agent it executed has exited (not after a failed mount or exec). */
function readStatus(child: ChildProcess, fd: number, onInit: (init: NamespaceInit) => void): () => boolean {
  let text = '';
  let initSeen = false;
  (child.stdio[fd] as NodeJS.ReadableStream | null | undefined)?.on('data', (chunk: Buffer) => {
    if (text.length < STATUS_CAP) text += chunk.toString('utf8');
    if (initSeen || !text.includes('\n')) return;
    initSeen = true;
    const first = obj(tryParseJson(text.slice(0, text.indexOf('\n'))));
    const init = namespaceInit(num(first['child-pid']), num(first['pid-namespace']));
    if (init) onInit(init);
  });
  return () => text.split('\n').some((line) => typeof obj(tryParseJson(line))['exit-code'] === 'number');
}
