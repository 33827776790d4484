// The command line bwrap runs inside a sandbox (bwrap-argv.ts builds the rest): the limits put on every process there
// but bwrap's own init, and the bridge that brings the egress gate in before the command starts. It must not put a
// limit on bwrap itself (limits.ts: RLIMIT_NPROC would count the uid's processes across the host).
import { existsSync, realpathSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { limitArgv, type SandboxLimits } from './limits.ts';

// The sandbox's only route out (DESIGN §7a, docs/gate.md "Interface"): a forwarder on its own loopback passes each
// connection to the egress gate's Unix socket, bound in; systemd's activator where the host has it (listening within
// a millisecond), else svc's own (src/gate/forwarder.ts, ~30 ms). The command starts only once it listens.

/** The egress gate as a sandbox sees it: the host path of its socket, and the forwarder that bridges it in. */
export interface SandboxGate {
  socket: string;
  bridge: { kind: 'systemd'; activate: string; proxyd: string } | { kind: 'node'; node: string; forwarder: string };
}

const GATE_SOCKET_INSIDE = '/run/svc/gate.sock';
/** The forwarder's port on the sandbox's own loopback (nothing else listens there). */
const FORWARDER_PORT = 3128;
export const PROXY_URL = `http://127.0.0.1:${FORWARDER_PORT}`;
/** Model APIs are reached by name, so NO_PROXY can exempt them without exempting the host's loopback addresses. */
export const MODEL_BASE = `http://localhost:${FORWARDER_PORT}/_model`;

const ACTIVATE = ['/usr/bin/systemd-socket-activate', '/bin/systemd-socket-activate'];
const PROXYD = ['/usr/lib/systemd/systemd-socket-proxyd', '/lib/systemd/systemd-socket-proxyd'];

/** The gate for a sandbox plan: systemd's activator where it is installed and `useSystemd`, else svc's forwarder. */
export function sandboxGate(socket: string, useSystemd: boolean): SandboxGate {
  const activate = ACTIVATE.find((p) => existsSync(p));
  const proxyd = PROXYD.find((p) => existsSync(p));
  if (useSystemd && activate && proxyd) return { socket, bridge: { kind: 'systemd', activate, proxyd } };
  const built = fileURLToPath(new URL('../gate/forwarder.js', import.meta.url));
  // Run from the sources (tests), the forwarder is the .ts file, which this node runs as it is.
  const forwarder = existsSync(built) ? built : built.replace(/\.js$/, '.ts');
  return { socket, bridge: { kind: 'node', node: realpathSync(process.execPath), forwarder: realpathSync(forwarder) } };
}

/** bwrap arguments: the socket, and svc's forwarder's program (the system view shows systemd's). */
export function gateMounts(gate: SandboxGate): string[] {
  const bind = ['--bind', gate.socket, GATE_SOCKET_INSIDE];
  if (gate.bridge.kind === 'systemd') return bind;
  const node = dirname(gate.bridge.node);
  const forwarder = dirname(gate.bridge.forwarder);
  return ['--ro-bind', node, node, '--ro-bind', forwarder, forwarder, ...bind];
}

/**
 * What bwrap runs: `command`, behind the gate's bridge when there is a gate, through prlimit. Every limit is set
 * from inside the sandbox, on bwrap's command, so the forwarder and its drain carry them too; RLIMIT_DATA, which a
 * node forwarder would not start under, is left to the command itself. Without prlimit there is no command: limitArgv
 * refuses, as no sandbox runs without its limits.
 */
export function sandboxCommand(limits: SandboxLimits, gate: SandboxGate | null, command: string[]): string[] {
  const argv = limitArgv(limits);
  if (gate) return [argv.prlimit, ...argv.every, '--', ...throughGate(gate, argv.dataBytes, command)];
  return [argv.prlimit, ...argv.every, `--data=${argv.dataBytes}`, '--', ...command];
}

// svc's forwarder prints its port once it listens, systemd's activator "Listening on …" on stderr (and more on each
// connection). Its output goes into a pipe the shell's own pipeline makes (no FIFO, so no mkfifo and rm processes on
// the agent's way): the pipeline's left side leaves the forwarder running and ends, its right side reads that first
// line and ends, leaving a `cat` draining the pipe so the forwarder never blocks on, or dies of, a full or closed
// pipe. The shell waits for both sides (not for what they left running), then becomes the command, holding no end of
// the pipe. An asynchronous command's stdin is /dev/null in a shell without job control, so `cat` gets the pipe by
// another descriptor, which the shell then closes: dash, bash and busybox ash run a pipeline's last part in a
// subshell, but ksh and zsh run it in the shell itself, which would keep the pipe on that descriptor into the command.
// The shell already carries every limit but the command's own RLIMIT_DATA (sandboxCommand), which it then puts on
// itself with its `ulimit -d` (KiB, soft and hard, in dash, bash, busybox ash, ksh and zsh alike) before it becomes
// the command: no process more on the agent's way (a `prlimit --pid` beside the forwarder cost ~1.5 ms of CPU a start).
function bridge(start: string, dataBytes: number): string {
  return [
    `{ ${start} & } | {`,
    '  read -r ready',
    '  case "$ready" in [0-9]*|Listening*) ;;',
    '    *) echo "svc: the egress gate forwarder did not start: $ready" >&2; exit 125;;',
    '  esac',
    '  exec 3<&0; cat <&3 > /dev/null 3<&- &',
    '  exec 3<&-',
    '} || exit 125',
    // A number only (NaN, which no shell takes, fails the start as a refused limit does).
    `ulimit -d ${Math.floor(dataBytes / 1024)} || exit 125`,
    'shift 2; exec "$@"',
  ].join('\n');
}

/** The command line that starts the forwarder, waits until it listens, puts RLIMIT_DATA (`dataBytes`) on itself,
 * then becomes `command`. */
function throughGate(gate: SandboxGate, dataBytes: number, command: string[]): string[] {
  const b = gate.bridge;
  const [start, one, two] = b.kind === 'systemd'
    ? [`"$1" -l 127.0.0.1:${FORWARDER_PORT} "$2" ${GATE_SOCKET_INSIDE} 2>&1 > /dev/null`, b.activate, b.proxyd]
    : [`"$1" "$2" ${GATE_SOCKET_INSIDE} ${FORWARDER_PORT}`, b.node, b.forwarder];
  return ['/bin/sh', '-c', bridge(start, dataBytes), 'svc-bridge', one, two, ...command];
}
