// The sandbox's only route out (DESIGN §7a, docs/gate.md "Interface"): a forwarder on its own loopback passes each
// connection to the egress gate's Unix socket, bound in; systemd's activator where the host has it (listening within
// a millisecond), else svc's own (src/gate/forwarder.ts, ~30 ms). The command starts only once it listens.
import { existsSync, realpathSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

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

// svc's forwarder prints its port once it listens, systemd's activator "Listening on …" on stderr (and more on each
// connection). The shell reads that first line from a FIFO before it becomes the command, leaving a `cat` draining
// the FIFO so the forwarder never blocks on, or dies of, a full or closed pipe.
function bridge(start: string): string {
  return [
    'fifo=/tmp/.svc-forwarder; mkfifo "$fifo" || exit 125',
    `${start} &`,
    'exec 3< "$fifo"; rm -f "$fifo" &',
    'read -r ready <&3',
    'case "$ready" in [0-9]*|Listening*) ;;',
    '  *) echo "svc: the egress gate forwarder did not start: $ready" >&2; exit 125;;',
    'esac',
    'cat <&3 > /dev/null 3<&- & exec 3<&-',
    'shift 2; exec "$@"',
  ].join('\n');
}

/** The command line that starts the forwarder, waits until it listens, then becomes `command`. */
export function throughGate(gate: SandboxGate, command: string[]): string[] {
  const b = gate.bridge;
  const [start, one, two] = b.kind === 'systemd'
    ? [`"$1" -l 127.0.0.1:${FORWARDER_PORT} "$2" ${GATE_SOCKET_INSIDE} 2> "$fifo" > /dev/null`, b.activate, b.proxyd]
    : [`"$1" "$2" ${GATE_SOCKET_INSIDE} ${FORWARDER_PORT} > "$fifo"`, b.node, b.forwarder];
  return ['/bin/sh', '-c', bridge(start), 'svc-bridge', one, two, ...command];
}
