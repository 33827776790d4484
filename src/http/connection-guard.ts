// Counts open connections per server and per peer, and turns away one past either cap with a 503 envelope before
// any request on it is read. Knows nothing of routes; http-server.ts installs it on both servers.
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { rawReply } from './client-errors.ts';
import type { ConnectionLimits } from './connection-limits.ts';

export interface ConnectionCounts {
  /** Open connections admitted (refused ones are never counted). */
  total(): number;
  /** Open admitted connections from this address. */
  of(peer: string): number;
  /** Connections refused at a cap since start. */
  refused(): number;
}

/** `::ffff:127.0.0.1` and `127.0.0.1` are one peer. */
function peerOf(socket: Socket): string {
  const address = socket.remoteAddress ?? '';
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

export function guardConnections(server: Server, limits: ConnectionLimits): ConnectionCounts {
  const perPeer = new Map<string, number>();
  let total = 0;
  let refused = 0;
  // First in line: a refused socket is answered and closed before the HTTP parser is told about it.
  server.prependListener('connection', (socket: Socket) => {
    const peer = peerOf(socket);
    const mine = perPeer.get(peer) ?? 0;
    if (total >= limits.total || mine >= limits.perPeer) {
      refused++;
      const which = total >= limits.total
        ? `${limits.total} connections in total`
        : `${limits.perPeer} connections from ${peer}`;
      rawReply(socket, 'unavailable', `Too many open connections: the server allows ${which}`, { 'retry-after': '5' });
      return;
    }
    total++;
    perPeer.set(peer, mine + 1);
    socket.once('close', () => {
      total--;
      const left = (perPeer.get(peer) ?? 1) - 1;
      if (left === 0) perPeer.delete(peer);
      else perPeer.set(peer, left);
    });
  });
  return {
    total: () => total,
    of: (peer) => perPeer.get(peer) ?? 0,
    refused: () => refused,
  };
}
