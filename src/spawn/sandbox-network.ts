// The sandbox's only route out (DESIGN §7a, docs/gate.md): its network namespace holds nothing but its own loopback;
// the egress gate's Unix socket is bound in at a fixed path, and svc's forwarder (src/gate/forwarder.ts) listens on
// the sandbox's loopback and passes each connection to it. The agent's environment names the forwarder as its proxy
// and as its model APIs' base URL; unsetting those leaves it no route at all, since nothing else is there.
import { existsSync, realpathSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SandboxGate } from './bwrap-argv.ts';

/** Where the gate's socket appears inside the sandbox. */
export const GATE_SOCKET_INSIDE = '/run/svc/gate.sock';
/** The forwarder's port on the sandbox's own loopback (nothing else listens there). */
export const FORWARDER_PORT = 3128;
export const PROXY_URL = `http://127.0.0.1:${FORWARDER_PORT}`;
/** Model APIs are reached by name, so NO_PROXY can exempt them without exempting the host's loopback addresses. */
export const MODEL_BASE = `http://localhost:${FORWARDER_PORT}/_model`;

/** The gate as a sandbox plan names it: its socket on the host, this very node, and the forwarder next to svc. */
export function sandboxGate(socket: string): SandboxGate {
  const built = fileURLToPath(new URL('../gate/forwarder.js', import.meta.url));
  // Run from the sources (tests), the forwarder is the .ts file, which this node runs as it is.
  const forwarder = existsSync(built) ? built : built.replace(/\.js$/, '.ts');
  return { socket, node: realpathSync(process.execPath), forwarder: realpathSync(forwarder) };
}

/** bwrap arguments: the socket, and the node and forwarder that must be visible to run the bridge. */
export function gateMounts(gate: SandboxGate): string[] {
  const forwarderDir = dirname(gate.forwarder);
  return ['--ro-bind', dirname(gate.node), dirname(gate.node), '--ro-bind', forwarderDir, forwarderDir,
    '--bind', gate.socket, GATE_SOCKET_INSIDE];
}

// The forwarder prints its port once it listens; the FIFO makes the command wait for exactly that (no polling), and
// a forwarder that could not start ends the sandbox with a message instead of leaving the agent without a route.
const BRIDGE = [
  'fifo=/tmp/.svc-forwarder; mkfifo "$fifo" || exit 125',
  `"$1" "$2" ${GATE_SOCKET_INSIDE} ${FORWARDER_PORT} > "$fifo" &`,
  'read -r port < "$fifo"; rm -f "$fifo"',
  '[ -n "$port" ] || { echo "svc: the egress gate forwarder did not start" >&2; exit 125; }',
  'shift 2; exec "$@"',
].join('\n');

/** The command line that starts the forwarder, waits until it listens, then becomes `command`. */
export function throughGate(gate: SandboxGate, command: string[]): string[] {
  return ['/bin/sh', '-c', BRIDGE, 'svc-bridge', gate.node, gate.forwarder, ...command];
}
