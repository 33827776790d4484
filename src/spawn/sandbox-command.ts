// The command line bwrap runs inside a sandbox (bwrap-argv.ts builds the rest): the limits put on every process there
// but bwrap's own init, and the bridge that brings the egress gate in before the command starts. It must not put a
// limit on bwrap itself (limits.ts: RLIMIT_NPROC would count the uid's processes across the host).
import { existsSync, realpathSync } from 'node:fs';
import type { Server } from 'node:net';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { limitArgv, type SandboxLimits } from './limits.ts';

// The sandbox's only route out (DESIGN §7a, docs/gate.md "Interface"): before the command starts, svc's small
// program (src/gate/sandbox-port.ts, ~30 ms) listens on the sandbox's own loopback and hands that listening socket
// out over a node IPC channel; svc's gate accepts on it directly. No Unix socket comes in: the sandbox may make none
// (seccomp.ts).

/** The egress gate as a sandbox sees it: node and the program that opens its port, and who takes that port. */
export interface SandboxGate {
  node: string;
  program: string;
  /** Given the listening socket the program hands out (spawn-group.ts); the gate serves its connections. */
  serve: (listener: Server) => void;
}

/** The descriptor of the IPC channel to the program, in the sandbox's fd layout (bwrap-argv.ts); a shell can name
 * only 0-9. */
export const GATE_CHANNEL_FD = 5;
/** The gate's port on the sandbox's own loopback (nothing else listens there). */
const GATE_PORT = 3128;
export const PROXY_URL = `http://127.0.0.1:${GATE_PORT}`;
/** Model APIs are reached by name, so NO_PROXY can exempt them without exempting the host's loopback addresses. */
export const MODEL_BASE = `http://localhost:${GATE_PORT}/_model`;

/** The gate for a sandbox plan: `serve` takes each sandbox's listening socket. */
export function sandboxGate(serve: SandboxGate['serve']): SandboxGate {
  const built = fileURLToPath(new URL('../gate/sandbox-port.js', import.meta.url));
  // Run from the sources (tests), the program is the .ts file, which this node runs as it is.
  const program = existsSync(built) ? built : built.replace(/\.js$/, '.ts');
  return { node: realpathSync(process.execPath), program: realpathSync(program), serve };
}

/** bwrap arguments: node's and the program's folders, read-only. */
export function gateMounts(gate: SandboxGate): string[] {
  const node = dirname(gate.node);
  const program = dirname(gate.program);
  return ['--ro-bind', node, node, '--ro-bind', program, program];
}

/**
 * What bwrap runs: `command`, behind the gate's bridge when there is a gate, through prlimit. Every limit is set
 * from inside the sandbox, on bwrap's command, so the gate's port program carries them too; RLIMIT_DATA, which
 * node would not start under, is left to the command itself. Without prlimit there is no command: limitArgv
 * refuses, as no sandbox runs without its limits.
 */
export function sandboxCommand(limits: SandboxLimits, gate: SandboxGate | null, command: string[]): string[] {
  const argv = limitArgv(limits);
  if (gate) return [argv.prlimit, ...argv.every, '--', ...throughGate(gate, argv.dataBytes, command)];
  return [argv.prlimit, ...argv.every, `--data=${argv.dataBytes}`, '--', ...command];
}

// The program runs to its end before the command starts: it hands its port out, prints it and exits, so nothing of
// the gate's runs beside the agent. The channel's descriptor and variables are the program's alone: the shell drops
// the variables first, names the descriptor for the program only, then closes it. The shell already carries every
// limit but the command's own RLIMIT_DATA (sandboxCommand), which it then puts on itself with its `ulimit -d` (KiB,
// soft and hard, in dash, bash, busybox ash, ksh and zsh alike) before it becomes the command: no process more on the
// agent's way.
function bridge(dataBytes: number): string {
  return [
    'unset NODE_CHANNEL_FD NODE_CHANNEL_SERIALIZATION_MODE',
    `ready=$(NODE_CHANNEL_FD=${GATE_CHANNEL_FD} "$1" "$2" ${GATE_PORT} < /dev/null)`,
    `exec ${GATE_CHANNEL_FD}<&-`,
    `case "$ready" in ${GATE_PORT}) ;;`,
    '  *) echo "svc: the egress gate\'s port did not open: $ready" >&2; exit 125;;',
    'esac',
    // A number only (NaN, which no shell takes, fails the start as a refused limit does).
    `ulimit -d ${Math.floor(dataBytes / 1024)} || exit 125`,
    'shift 2; exec "$@"',
  ].join('\n');
}

/** The command line that opens the gate's port, puts RLIMIT_DATA (`dataBytes`) on itself, then becomes `command`. */
function throughGate(gate: SandboxGate, dataBytes: number, command: string[]): string[] {
  return ['/bin/sh', '-c', bridge(dataBytes), 'svc-bridge', gate.node, gate.program, ...command];
}
