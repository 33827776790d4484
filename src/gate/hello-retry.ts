// The one reader of a CONNECT tunnel's client bytes (tunnel.ts), from its first byte to the server's ServerHello:
// every ClientHello the client sends in that time, the first and any later one, must name the CONNECT host. Reads
// records, never decrypts.
//
// Why later ones: a server's HelloRetryRequest (RFC 8446 §4.1.4) makes a TLS 1.3 client send a second ClientHello, in
// the clear, on the same connection, and the client can force one (a key share for no group the server takes). The
// connection already goes to the allowed host's address, so no other address is in reach; but that address may be a
// shared front end serving many names, and a server that picks its site or certificate from the second hello would
// answer as a name the allow list never admitted while the evidence shows the first (RFC 8446 says the hellos must
// match; Go's crypto/tls checks, and the gate does not count on every server doing so). A hello sent unasked right
// behind the first is read too: the server would take it as the retried one.
// Once the server has sent a ServerHello that is no retry request, a server takes no ClientHello in the clear (TLS 1.3
// has no renegotiation; TLS 1.2 renegotiates encrypted, out of the gate's sight, as is an HTTP Host header inside the
// session), so the rest of the tunnel is copied unread.
import { HANDSHAKE, MAX_HELLO_BYTES, MAX_HELLO_RECORDS, bytesWanted, readClientHello } from './client-hello.ts';

/** Data events carrying hello bytes the gate takes in a tunnel: a client sending hellos in crumbs only costs it. */
export const MAX_HELLO_PIECES = 4096;
const CHANGE_CIPHER_SPEC = 20;
const SERVER_HELLO = 2;
/** Message type, length, legacy_version, random: enough of a ServerHello to tell a retry request. */
const HELLO_HEAD = 4 + 2 + 32;
/** RFC 8446 §4.1.3: the random of a ServerHello that is a HelloRetryRequest. */
const RETRY_RANDOM = Buffer.from('cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c', 'hex');

/** `forward`: the client bytes that may go to the server now; `checked`: its first hello was read and admitted. */
type ClientReading = { forward: Buffer; checked: boolean } | { refused: string; alert: boolean };

export class HelloWatch {
  private open = true;
  private checked = false;
  /** Client bytes not yet passed on (the start of a hello or of a record not yet whole), kept as they came. */
  private held: Buffer[] = [];
  private heldLength = 0;
  /** How long the held bytes must grow before reading them again can tell more. */
  private wanted = 0;
  private pieces = 0;
  private recordsLeft = MAX_HELLO_RECORDS;
  /** How many times held bytes were read (what a crumbling client can make the gate do). */
  readings = 0;
  /** Server bytes of a record not yet whole, the head of its current handshake message, what is left of a retry. */
  private server: Buffer = Buffer.alloc(0);
  private head: Buffer = Buffer.alloc(0);
  private skip = 0;
  private readonly check: (serverName: string | null, first: boolean) => string | null;

  /** `check`: why a hello's server name does not admit the tunnel, or null when it does. */
  constructor(check: (serverName: string | null, first: boolean) => string | null) {
    this.check = check;
  }

  /** The client's bytes: those that may go to the server now (the rest is held), or why the tunnel is refused. */
  fromClient(piece: Buffer): ClientReading {
    if (!this.open || piece.length === 0) return { forward: piece, checked: this.checked };
    this.held.push(piece);
    this.heldLength += piece.length;
    const reading = this.heldLength < this.wanted ? { forward: Buffer.alloc(0) } : this.readHeld();
    if ('refused' in reading) return reading;
    // Only pieces of hellos count: a client's early data or change_cipher_spec records cost the gate nothing.
    if (this.held[0]?.[0] === HANDSHAKE && (this.pieces += 1) > MAX_HELLO_PIECES) {
      return { refused: 'the TLS ClientHello came in too many pieces', alert: true };
    }
    if (this.heldLength > MAX_HELLO_BYTES) return { refused: 'the TLS ClientHello is too large', alert: true };
    return { forward: reading.forward, checked: this.checked };
  }

  /** Reads the held bytes: the whole hellos and other records in them go on, the rest stays held. */
  private readHeld(): { forward: Buffer } | { refused: string; alert: boolean } {
    const bytes = this.held.length === 1 ? (this.held[0] as Buffer) : Buffer.concat(this.held, this.heldLength);
    this.readings += 1;
    let at = 0;
    let need = 0;
    while (at < bytes.length) {
      const rest = bytes.subarray(at);
      // The first hello must open the tunnel; later, the records around a hello go on unread.
      if (this.checked && rest[0] !== HANDSHAKE) {
        need = rest.length < 5 ? 5 : 5 + rest.readUInt16BE(3);
        if (rest.length < need) break;
        at += need;
        continue;
      }
      const reading = readClientHello(rest, this.recordsLeft);
      if (reading.kind === 'more') {
        need = bytesWanted(rest);
        break;
      }
      if (reading.kind === 'not-tls') {
        if (!this.checked) return { refused: 'the tunnel does not start with TLS', alert: false };
        return { refused: 'a TLS record on the tunnel is not TLS', alert: true };
      }
      if (reading.kind === 'malformed') return { refused: reading.reason, alert: true };
      const mismatch = this.check(reading.serverName, !this.checked);
      if (mismatch) {
        const refused = this.checked ? `a second TLS ClientHello on the tunnel: ${mismatch}` : mismatch;
        return { refused, alert: true };
      }
      this.checked = true;
      for (let record = 0; record < reading.end; record += 5 + rest.readUInt16BE(record + 3)) this.recordsLeft -= 1;
      at += reading.end;
    }
    const rest = bytes.subarray(at);
    this.held = rest.length === 0 ? [] : [rest];
    this.heldLength = rest.length;
    // Nothing held, nothing wanted: a whole record skipped last must not make the next short one wait.
    this.wanted = rest.length === 0 ? 0 : need;
    return { forward: bytes.subarray(0, at) };
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
    return this.open ? null : this.end();
  }

  /**
   * Ends the watch, when the server's ServerHello did or the client ended its sending (no hello can follow): the client
   * bytes still held, which can be no whole hello.
   */
  end(): Buffer {
    this.open = false;
    const held = Buffer.concat(this.held, this.heldLength);
    this.held = [];
    this.heldLength = 0;
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
