// The command line bwrap runs inside a sandbox (bwrap-argv.ts builds the rest): the limits put on every process there
// but bwrap's own init, and the bridge that brings the egress gate in before the command starts. It must not put a
// limit on bwrap itself (limits.ts: RLIMIT_NPROC would count the uid's processes across the host).
import { existsSync, realpathSync } from 'node:fs';
import type { Server } from 'node:net';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { limitArgv, type SandboxLimits } from './limits.ts';

// The sandbox's only route out (DESIGN §7a, docs/gate.md "Interface"): a listening socket on the sandbox's own
// loopback, handed out over a node IPC channel by svc's small program (src/gate/sandbox-port.ts); svc's gate accepts on
// it directly. No Unix socket comes in: the sandbox may make none (seccomp.ts). Where systemd's activator is installed
// it listens before the command starts (~2 ms) and runs the program only at the first connection, handing it that
// socket: node's start (~35-50 ms) leaves every start's way for the first connection's. Elsewhere the program runs
// first.

/** The egress gate as a sandbox sees it: node and the program that hands its port out, systemd's activator where it
 * is used, and who takes that port. */
export interface SandboxGate {
  node: string;
  program: string;
  activator: string | null;
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

const ACTIVATOR = ['/usr/bin/systemd-socket-activate', '/bin/systemd-socket-activate'];

/** The gate for a sandbox plan: `serve` takes each sandbox's listening socket. `lazy`: behind systemd's activator
 * where it is installed (tests set it false to take the other way on a host that has it). */
export function sandboxGate(serve: SandboxGate['serve'], lazy = true): SandboxGate {
  const built = fileURLToPath(new URL('../gate/sandbox-port.js', import.meta.url));
  // Run from the sources (tests), the program is the .ts file, which this node runs as it is.
  const program = existsSync(built) ? built : built.replace(/\.js$/, '.ts');
  const activator = lazy ? ACTIVATOR.find((path) => existsSync(path)) ?? null : null;
  return { node: realpathSync(process.execPath), program: realpathSync(program), activator, serve };
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

// The channel's descriptor and variables are the program's alone: the shell drops the variables first, names the
// descriptor for the program only, then closes it. The shell already carries every limit but the command's own
// RLIMIT_DATA (sandboxCommand), which it then puts on itself with its `ulimit -d` (KiB, soft and hard, in dash, bash,
// busybox ash, ksh and zsh alike) before it becomes the command: no process more on the agent's way.
function bridge(gate: SandboxGate, dataBytes: number): string {
  return [
    'unset NODE_CHANNEL_FD NODE_CHANNEL_SERIALIZATION_MODE',
    ...gate.activator ? activatorOpens() : nodeOpens(),
    `exec ${GATE_CHANNEL_FD}<&-`,
    // A number only (NaN, which no shell takes, fails the start as a refused limit does).
    `ulimit -d ${Math.floor(dataBytes / 1024)} || exit 125`,
    `shift ${gate.activator ? 3 : 2}; exec "$@"`,
  ].join('\n');
}

// Node first ($1 node, $2 the program): it runs to its end before the command starts, handing its port out and
// printing it, so nothing of the gate's runs beside the agent.
function nodeOpens(): string[] {
  return [
    `ready=$(NODE_CHANNEL_FD=${GATE_CHANNEL_FD} "$1" "$2" ${GATE_PORT} < /dev/null)`,
    `case "$ready" in ${GATE_PORT}) ;;`,
    '  *) echo "svc: the egress gate\'s port did not open: $ready" >&2; exit 125;;',
    'esac',
  ];
}

// Behind systemd's activator ($1 the activator, $2 node, $3 the program). It closes every descriptor but stdio and
// those LISTEN_FDS and LISTEN_PID (its own pid, read from /proc/self/stat before the exec keeps it) name, so the
// channel moves to 3; its own socket comes after, at 4, and the program, run at the first connection, gets both. Its
// log goes into a pipe the shell's own pipeline makes: it says "Listening on <unnamed>" for the channel first, then
// "Listening on 127.0.0.1:3128" once that one listens, which the command waits for (else its first connection could
// race the listen). A drain then reads the pipe until the program has ended (the activator would die of a closed pipe),
// passing on to the command's stderr, which svc logs, all but the activator's routine lines: why the program failed,
// when it does (the agent's connection is then refused, as the socket closes with it). An asynchronous command's stdin
// is /dev/null in a shell without job control, so the drain gets the pipe by another descriptor, which the shell then
// closes: ksh and zsh run a pipeline's last part in the shell itself, which would keep it into the command.
function activatorOpens(): string[] {
  const listening = `Listening on 127.0.0.1:${GATE_PORT} `;
  return [
    `{ exec 3<&${GATE_CHANNEL_FD} ${GATE_CHANNEL_FD}<&-; { read -r me _ < /proc/self/stat; ` +
      `LISTEN_PID=$me LISTEN_FDS=1 exec "$1" -l 127.0.0.1:${GATE_PORT} -E NODE_CHANNEL_FD=3 "$2" "$3" --fd 4 ` +
      '< /dev/null 2>&1; } & } | {',
    `  last=; while read -r line; do case "$line" in "${listening}"*) break;; esac; last=$line; done`,
    `  case "$line" in "${listening}"*) ;;`,
    '    *) echo "svc: the egress gate\'s port did not open: $last" >&2; exit 125;;',
    '  esac',
    '  exec 3<&0',
    '  while read -r line; do case "$line" in "Communication attempt on fd "*|"Execing "*) ;;',
    '    *) printf \'%s\\n\' "$line" >&2;; esac; done <&3 3<&- &',
    '  exec 3<&-',
    '} || exit 125',
  ];
}

/** The command line that opens the gate's port, puts RLIMIT_DATA (`dataBytes`) on itself, then becomes `command`. */
function throughGate(gate: SandboxGate, dataBytes: number, command: string[]): string[] {
  const opens = gate.activator ? [gate.activator, gate.node, gate.program] : [gate.node, gate.program];
  return ['/bin/sh', '-c', bridge(gate, dataBytes), 'svc-bridge', ...opens, ...command];
}
