// Runs an agent (a provider or a check) in its own process group, confined, its output streamed and capped.
import { Server } from 'node:net';
import { startChild, type ChildProcess } from '../spawn/start.ts';
import { GATE_CHANNEL_FD, type SandboxGate } from '../spawn/sandbox-command.ts';
import {
  bwrapArgv, closeSandboxFds, KILL_SANDBOX, LIFELINE_FD, openSandboxFds, type SandboxPlan,
} from '../spawn/bwrap-argv.ts';
import { createTreeGuard, orNull, sandboxMembers, TREE_MARKER } from '../spawn/tree.ts';
import { identityOf, statFields } from '../proc-stat.ts';
import { killNamespace, namespaceInit, signalGroup, type NamespaceInit } from './proc-group.ts';
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
}

const SAMPLE_MS = 100;
/** How long output may still arrive after the first process exited (its own last writes, bwrap's status). */
const LEFTOVER_GRACE_MS = 2_000;
const PAUSE_ROUNDS = 200;
/** How many scans for marked processes a lifeline makes at most (one takes milliseconds). */
const MARKER_SCANS = 50;
/** Stopped, traced, in the kernel (it stops on its way out), zombie, dead or gone. */
const STOPPED_STATES: ReadonlySet<string> = new Set(['T', 't', 'D', 'Z', 'X', '']);

/** `sig` to each of `pids` still there (one gone meanwhile has nothing left to signal). */
function signalEach(pids: readonly number[], sig: NodeJS.Signals): void {
  for (const pid of pids) orNull(() => process.kill(pid, sig));
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

// The sandbox's own lifeline watcher starts only once its init has been let go on. bwrap makes that init in the
// agent's group, ties itself to this process (--die-with-parent) and reports the init, and only then lets it go on (an
// eventfd only bwrap can write; bubblewrap issue #633): this process killed in between (SIGKILL, out of memory) takes
// bwrap with it and left the init waiting for ever, reparented to pid 1, in the agent's group (it leaves that only at
// its --new-session, after the go-ahead) and reported to nobody, so no later stop knew it. So a second watcher, outside
// the sandbox in the agent's group, waits on the same lifeline and at its end SIGKILLs that group: by then bwrap has
// exited (this process saw it) or this process died. Forked twice, so it is no child of bwrap, whose children are its
// init alone. It ignores SIGTERM and SIGHUP as the inner one does (a stop's SIGTERM to the group, a `pkill -f`); a
// SIGKILL to the group (this process's) ends it with the rest.
function withGroupWatch(argv: string[], fd: number, cgroup: ReturnType<typeof openMemoryCgroup>): string[] {
  // Ignored in the subshell alone: the shell that becomes bwrap dies of a SIGTERM at any time, as bwrap does.
  // A shell of its own (one exec, off the agent's way): a fork alone would show the agent's whole command line, which
  // `ps`, `pkill -f` and the budget's freeze check would take for the agent's. Ignored signals stay ignored across it.
  const end = `/bin/sh -c 'read -r _; kill -s KILL -- 0' svc-group-watch`;
  // The gate's channel is the sandbox's port program's alone (sandbox-command.ts).
  const watch = `(trap '' TERM HUP; ${end} <&${fd} >/dev/null 2>&1 ${GATE_CHANNEL_FD}<&- &); `;
  // The memory cgroup's shell forks it before it joins the cgroup: one exec less at each start, none of its memory.
  return cgroup ? cgroup.wrap(argv, watch) : ['/bin/sh', '-c', `${watch}exec "$@"`, argv[0] ?? '', ...argv];
}

export function spawnGroup(argv: string[], opts: SpawnGroupOptions) {
  const sandbox = opts.sandbox;
  const lifeFd = sandbox ? LIFELINE_FD : 3;
  const guard = sandbox ? null : createTreeGuard();
  const watched = withLifeline(argv, lifeFd, sandbox !== null);
  // First, as it may refuse the plan (bwrap-argv.ts: a HOME that holds a system folder) before anything is opened.
  const bwrap = sandbox ? bwrapArgv(sandbox.bwrap, sandbox.plan, watched) : watched;
  const cgroup = sandbox ? openMemoryCgroup(opts.watch?.memoryBytes ?? sandbox.plan.limits.memoryBytes) : null;
  const watch = opts.watch ? { ...opts.watch, cgroup } : undefined;
  // bwrap reads the system-call filter and the /etc files from fd 3 on; the child has its own copies once started.
  const fds = sandbox ? openSandboxFds() : [];
  // After them, bwrap's status descriptor: it reports the agent's exit there only if the agent really ran.
  const statusFd = 3 + fds.length;
  // bwrap's options go before the command's `--`.
  const confined = sandbox ? [bwrap[0]!, '--json-status-fd', String(statusFd), ...bwrap.slice(1)] : watched;
  const gate = sandbox && sandbox.plan.network !== 'none' ? sandbox.plan.network : null;
  const passed = (fd: number | 'ignore', at: number) =>
    at === lifeFd ? 'pipe' as const : at === GATE_CHANNEL_FD && gate ? 'ipc' as const : fd;
  const extraFds = sandbox ? [...fds.map((fd, i) => passed(fd, 3 + i)), 'pipe' as const] : ['pipe' as const];
  let child: ChildProcess;
  try {
    child = startChild(sandbox ? withGroupWatch(confined, lifeFd, cgroup) : confined, {
      kind: 'agent',
      base: opts.env,
      // PWD names the working folder: some CLIs (opencode) take their project folder from it, and the shell that starts
      // the agent (withLifeline) would set one anyway.
      extra: { PWD: opts.cwd, ...opts.extra, ...guard ? Object.fromEntries([guard.marker.split('=')]) : {} },
      cwd: opts.cwd,
      detached: true,
      stdio: [opts.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe', ...extraFds],
    });
  } finally {
    closeSandboxFds(fds);
  }
  if (gate) takeGatePort(child, gate);
  const identity = child.pid ? identityOf(child.pid) : { pid: 0, pgid: 0, proc_start: null };
  let sampler: NodeJS.Timeout | undefined;
  if (guard && child.pid) {
    guard.watch(child.pid);
    sampler = setInterval(() => guard.sample(), SAMPLE_MS).unref();
  }
  // The first process has exited: without a sandbox, nothing it started may outlive it (a setsid'd daemon would also
  // hold the output pipes open, so 'close' would never come). What still holds them after a grace got away (a process
  // that cleared svc's marker): its output is nobody's, and waiting for it held the run `running` for ever, so the
  // pipes are closed from this end.
  let closeLeftovers: NodeJS.Timeout | undefined;
  let rescan: NodeJS.Timeout | undefined;
  // With a sandbox, nothing in it outlives svc's bwrap either: bwrap ties its namespace's init to itself
  // (--die-with-parent) only once it has set it up, and until then that init ignores the SIGTERM of a stop (an init
  // gets only the signals it handles), so a stop landing meanwhile left it to go on in a session of its own and start
  // the agent. bwrap reports it on its status descriptor; whichever of that line and bwrap's exit comes second kills
  // it, and with it everything in its namespace.
  // bwrap reports its init only after making it, and lets it go on only after that: bwrap killed in between (`kill`,
  // its cgroup's OOM killer, under load a window of milliseconds) left it unreported, waiting for ever for the go-ahead
  // (an eventfd read only bwrap could end; bubblewrap issue #633) in svc's group, which it leaves only at its
  // --new-session, after that go-ahead. Nothing else of a sandbox is ever in that group (but withGroupWatch's watcher,
  // which this ends too), so at bwrap's exit the group is SIGKILLed too: a zombie or reaped leader keeps its id from
  // being handed out while a member is left.
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
    if (sandbox) signalGroup(identity, 'SIGKILL');
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

/**
 * The gate's listening socket, made in the sandbox's network namespace and handed out once on the IPC channel
 * (sandbox-command.ts), to the gate. Only the first such message counts, anything else is ignored; the program ends
 * the channel itself (a disconnect from this end would cost the child's 'close'), which never keeps this process alive.
 */
function takeGatePort(child: ChildProcess, gate: SandboxGate): void {
  let taken = false;
  child.on('message', (message, handle) => {
    if (taken || message !== 'listening' || !(handle instanceof Server)) return;
    taken = true;
    gate.serve(handle);
  });
  child.channel?.unref();
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
