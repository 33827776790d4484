// A CONNECT tunnel's TLS ClientHello (RFC 8446 §4.1.2), read but never decrypted, for its server_name (RFC 6066 §3):
// the name that picks the site on a shared address, which must be the CONNECT host. Pure functions on bytes.

/** The most ClientHello bytes the gate waits for (a post-quantum key share makes one ~2 KB; 2^14 is a record). */
export const MAX_HELLO_BYTES = 64 * 1024;

type HelloReading =
  | { kind: 'more' }
  | { kind: 'not-tls' }
  | { kind: 'malformed'; reason: string }
  /** `end`: the byte after the hello's last record, where the client's next record starts. */
  | { kind: 'hello'; serverName: string | null; end: number };

/** The most TLS records the hellos of a tunnel may come in: real clients send a hello in one (64 KB takes 4). */
export const MAX_HELLO_RECORDS = 64;

export const HANDSHAKE = 22;
const CLIENT_HELLO = 1;
const SERVER_NAME = 0;
const HOST_NAME = 0;
// Extensions that carry the real server name encrypted (ECH; the ESNI draft): the clear one is only a cover name.
const ENCRYPTED_CLIENT_HELLO = 0xfe0d;
const ENCRYPTED_SERVER_NAME = 0xffce;

interface Handshake {
  data: Buffer;
  /** What a hello longer than `data` reads as: cut short when another kind of record follows, refused when as many
   * records as may be read were read, else wanting more bytes. */
  more: HelloReading;
  /** For each whole record: how many handshake bytes end with it → the byte after it in the buffer. */
  recordEnds: Map<number, number>;
}

/** The leading handshake records' bytes (at most `maxRecords` records), or what stops reading them. */
function handshakeBytes(buf: Buffer, maxRecords: number): Handshake | HelloReading {
  const parts: Buffer[] = [];
  const recordEnds = new Map<number, number>();
  let at = 0;
  let total = 0;
  while (at < buf.length && parts.length < maxRecords) {
    if (buf[at] !== HANDSHAKE) {
      if (at === 0) return { kind: 'not-tls' };
      return { data: Buffer.concat(parts), more: { kind: 'malformed', reason: 'the TLS ClientHello is cut short' },
        recordEnds };
    }
    if (buf.length < at + 5) break;
    if (buf[at + 1] !== 3) return { kind: 'not-tls' };
    const length = buf.readUInt16BE(at + 3);
    if (length === 0 || length > 16384) return { kind: 'malformed', reason: 'a TLS record length is out of range' };
    if (buf.length < at + 5 + length) break;
    parts.push(buf.subarray(at + 5, at + 5 + length));
    at += 5 + length;
    total += length;
    recordEnds.set(total, at);
  }
  const more: HelloReading = parts.length < maxRecords ? { kind: 'more' }
    : { kind: 'malformed', reason: 'the TLS ClientHello came in too many records' };
  return { data: Buffer.concat(parts), more, recordEnds };
}

/**
 * What bytes starting with a ClientHello say; a server name is lower case, without a trailing dot (null: none sent).
 * `maxRecords`: how many records the hello may come in (what is left of its tunnel's MAX_HELLO_RECORDS).
 */
export function readClientHello(buf: Buffer, maxRecords = MAX_HELLO_RECORDS): HelloReading {
  if (buf.length === 0) return { kind: 'more' };
  if (buf.length > MAX_HELLO_BYTES) return { kind: 'malformed', reason: 'the TLS ClientHello is too large' };
  const read = handshakeBytes(buf, maxRecords);
  if ('kind' in read) return read;
  const { data: hs, more } = read;
  if (hs.length < 4) return more;
  if (hs[0] !== CLIENT_HELLO) return { kind: 'malformed', reason: 'the first TLS message is not a ClientHello' };
  const length = hs.readUIntBE(1, 3);
  if (length > MAX_HELLO_BYTES) return { kind: 'malformed', reason: 'the TLS ClientHello is too large' };
  if (hs.length < 4 + length) return more;
  // A message after the hello in its last record would reach the server unread (a second ClientHello, say).
  const end = read.recordEnds.get(4 + length);
  if (end === undefined) {
    return { kind: 'malformed', reason: 'the TLS ClientHello shares a record with another message' };
  }
  try {
    return { kind: 'hello', serverName: serverNameOf(hs.subarray(4, 4 + length)), end };
  } catch (err) {
    if (err instanceof HelloError) return { kind: 'malformed', reason: err.message };
    throw err;
  }
}

/** Where the buffer must reach before reading it again can tell more: the end of the first incomplete record. */
export function bytesWanted(buf: Buffer): number {
  let at = 0;
  for (;;) {
    if (buf.length < at + 5) return at + 5;
    const end = at + 5 + buf.readUInt16BE(at + 3);
    if (buf.length < end) return end;
    at = end;
  }
}

class HelloError extends Error {}

/** A bounds-checked cursor: any read past the end is a malformed hello, never an exception of another kind. */
class Cursor {
  private at = 0;
  private readonly buf: Buffer;
  constructor(buf: Buffer) {
    this.buf = buf;
  }
  get done(): boolean {
    return this.at >= this.buf.length;
  }
  take(n: number): Buffer {
    if (this.at + n > this.buf.length) throw new HelloError('the TLS ClientHello is cut short');
    const out = this.buf.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }
  u8(): number {
    return this.take(1)[0] as number;
  }
  u16(): number {
    return this.take(2).readUInt16BE(0);
  }
  vector8(): Buffer {
    return this.take(this.u8());
  }
  vector16(): Buffer {
    return this.take(this.u16());
  }
}

function serverNameOf(body: Buffer): string | null {
  const hello = new Cursor(body);
  hello.take(2 + 32); // legacy_version, random
  hello.vector8(); // legacy_session_id
  hello.vector16(); // cipher_suites
  hello.vector8(); // legacy_compression_methods
  if (hello.done) return null; // no extensions at all (TLS 1.2 and older may omit them)
  const extensions = new Cursor(hello.vector16());
  let name: string | null = null;
  let seen = false;
  while (!extensions.done) {
    const type = extensions.u16();
    const data = extensions.vector16();
    if (type === ENCRYPTED_CLIENT_HELLO || type === ENCRYPTED_SERVER_NAME) {
      throw new HelloError('the TLS ClientHello hides its server name (encrypted ClientHello): refused');
    }
    if (type !== SERVER_NAME) continue;
    if (seen) throw new HelloError('the TLS ClientHello names a server twice');
    seen = true;
    name = hostNameOf(data);
  }
  return name;
}

function hostNameOf(data: Buffer): string {
  const outer = new Cursor(data);
  const list = new Cursor(outer.vector16());
  if (!outer.done) throw new HelloError('the TLS server_name extension has trailing bytes');
  let host: string | null = null;
  while (!list.done) {
    const type = list.u8();
    const value = list.vector16();
    if (type !== HOST_NAME) continue;
    // RFC 6066: at most one name of a type; a second is a way to show the gate one name and the server another.
    if (host !== null) throw new HelloError('the TLS ClientHello names a server twice');
    if (value.length === 0 || !/^[\x21-\x7e]+$/.test(value.toString('latin1'))) {
      throw new HelloError('the TLS server name is not an ASCII host name');
    }
    host = value.toString('latin1').toLowerCase().replace(/\.$/, '');
  }
  if (host === null) throw new HelloError('the TLS server_name extension holds no host name');
  return host;
}

/** A fatal TLS alert (RFC 8446 §6), so a client whose tunnel is refused after the 200 sees why: unrecognized_name. */
export const UNRECOGNIZED_NAME_ALERT = Buffer.from([21, 3, 3, 0, 2, 2, 112]);
