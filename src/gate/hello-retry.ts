// A CONNECT tunnel between its first, checked ClientHello and the server's ServerHello (tunnel.ts): every further
// ClientHello the client sends in that time must name the host the first one did. Reads records, never decrypts.
//
// Why: a server's HelloRetryRequest (RFC 8446 §4.1.4) makes a TLS 1.3 client send a second ClientHello, in the clear,
// on the same connection, and the client can force one (a key share for no group the server takes). The connection
// already goes to the allowed host's address, so no other address is in reach; but that address may be a shared front
// end serving many names, and a server that picks its site or certificate from the second hello would answer as a
// name the allow list never admitted while the evidence shows the first (RFC 8446 says the hellos must match; Go's
// crypto/tls checks, and the gate does not count on every server doing so). A hello sent unasked right behind the first
// is read too: the server would take it as the retried one.
// Once the server has sent a ServerHello that is no retry request, a server takes no ClientHello in the clear (TLS 1.3
// has no renegotiation; TLS 1.2 renegotiates encrypted, out of the gate's sight, as is an HTTP Host header inside the
// session), so the rest of the tunnel is copied unread.
import { HANDSHAKE, MAX_HELLO_BYTES, MAX_HELLO_PIECES, bytesWanted, readClientHello } from './client-hello.ts';

const CHANGE_CIPHER_SPEC = 20;
const SERVER_HELLO = 2;
/** Message type, length, legacy_version, random: enough of a ServerHello to tell a retry request. */
const HELLO_HEAD = 4 + 2 + 32;
/** RFC 8446 §4.1.3: the random of a ServerHello that is a HelloRetryRequest. */
const RETRY_RANDOM = Buffer.from('cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c', 'hex');

export type ClientReading = { forward: Buffer } | { refused: string };

export class HelloRetryWatch {
  private open = true;
  /** Client bytes not yet passed on: the start of a record not yet whole, or of a hello not yet read. */
  private held: Buffer = Buffer.alloc(0);
  private wanted = 0;
  private pieces = 0;
  /** Server bytes of a record not yet whole, the head of its current handshake message, what is left of a retry. */
  private server: Buffer = Buffer.alloc(0);
  private head: Buffer = Buffer.alloc(0);
  private skip = 0;
  private readonly check: (serverName: string | null) => string | null;

  /** `check`: why a hello's server name does not admit the tunnel, or null when it does. */
  constructor(check: (serverName: string | null) => string | null) {
    this.check = check;
  }

  /** The client's bytes: those that may go to the server now (the rest is held), or why the tunnel is refused. */
  fromClient(piece: Buffer): ClientReading {
    if (!this.open) return { forward: piece };
    this.held = this.held.length === 0 ? piece : Buffer.concat([this.held, piece]);
    this.pieces += 1;
    if (this.pieces > MAX_HELLO_PIECES) return { refused: 'the TLS ClientHello came in too many pieces' };
    if (this.held.length < this.wanted) return { forward: Buffer.alloc(0) };
    let at = 0;
    let need = 0;
    while (at < this.held.length) {
      const rest = this.held.subarray(at);
      const end = rest.length < 5 ? 5 : 5 + rest.readUInt16BE(3);
      if (rest[0] !== HANDSHAKE || rest.length < 5) {
        need = end;
        if (rest.length < end) break;
        at += end;
        continue;
      }
      const reading = readClientHello(rest);
      if (reading.kind === 'more') {
        need = bytesWanted(rest);
        break;
      }
      if (reading.kind !== 'hello') {
        return { refused: reading.kind === 'malformed' ? reading.reason : 'a TLS record on the tunnel is not TLS' };
      }
      const mismatch = this.check(reading.serverName);
      if (mismatch) return { refused: `a second TLS ClientHello on the tunnel: ${mismatch}` };
      at += reading.end;
    }
    const forward = this.held.subarray(0, at);
    this.held = this.held.subarray(at);
    this.wanted = this.held.length === 0 ? 0 : need;
    if (this.held.length > MAX_HELLO_BYTES) return { refused: 'the TLS ClientHello is too large' };
    return { forward };
  }

  /** The server's bytes, read but never held: when its ServerHello ends the watch, the client bytes still held. */
  fromServer(piece: Buffer): Buffer | null {
    if (!this.open) return null;
    this.server = this.server.length === 0 ? piece : Buffer.concat([this.server, piece]);
    while (this.open && this.server.length >= 5) {
      const type = this.server[0];
      const end = 5 + this.server.readUInt16BE(3);
      // An alert or anything else: no retried handshake follows.
      if (type !== HANDSHAKE && type !== CHANGE_CIPHER_SPEC) this.open = false;
      if (!this.open || this.server.length < end) break;
      if (type === HANDSHAKE) this.readServerHandshake(this.server.subarray(5, end));
      this.server = this.server.subarray(end);
    }
    if (this.open) return null;
    const held = this.held;
    this.held = Buffer.alloc(0);
    this.server = Buffer.alloc(0);
    return held;
  }

  /** Passes over retry requests; the first other message (the ServerHello, or anything) ends the watch. */
  private readServerHandshake(data: Buffer): void {
    let rest = data;
    while (this.open && rest.length > 0) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, rest.length);
        this.skip -= n;
        rest = rest.subarray(n);
        continue;
      }
      const n = Math.min(HELLO_HEAD - this.head.length, rest.length);
      this.head = Buffer.concat([this.head, rest.subarray(0, n)]);
      rest = rest.subarray(n);
      if (this.head.length < HELLO_HEAD) return;
      const length = 4 + this.head.readUIntBE(1, 3);
      const retry = this.head[0] === SERVER_HELLO && this.head.subarray(6).equals(RETRY_RANDOM);
      if (!retry || length < HELLO_HEAD) this.open = false;
      this.skip = length - HELLO_HEAD;
      this.head = Buffer.alloc(0);
    }
  }
}
