// The `network` line of `svc runs show`: what the run's receipt says about the agent's network, read
// through typed readers (the receipt came from a server; a forged one must not crash the CLI).
import { obj, str } from '../untrusted.ts';

const HOSTS_SHOWN = 4;

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

/** One line, or null when the receipt has no network section (an older receipt, or none yet). */
export function networkLine(receipt: unknown): string | null {
  const network = obj(obj(receipt).network);
  if (typeof network.confined !== 'boolean') return null;
  if (!network.confined) return 'not confined (no sandbox): the agent could reach any host';
  const hosts = Array.isArray(network.hosts) ? network.hosts.map(obj) : [];
  const names = hosts.slice(0, HOSTS_SHOWN).map((h) => `${str(h.host) ?? '?'}:${count(h.port)}`);
  const more = hosts.length > HOSTS_SHOWN ? ` and ${hosts.length - HOSTS_SHOWN} more` : '';
  const reached = hosts.length ? ` to ${names.join(', ')}${more}` : '';
  return `through the gate: ${count(network.connections)} connections${reached}, ${count(network.denied)} denied`;
}
