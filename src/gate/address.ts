// Destinations as text (docs/gate.md "Address rules"): one normal spelling of a host before any policy sees it, and
// the IP ranges refused by default, in every IPv6 form that carries an IPv4 address too. No I/O.
import { isIP } from 'node:net';
import { BadInputError } from '../errors.ts';

interface Range {
  prefix: readonly number[];
  bits: number;
  label: string;
}

// RFC 6890 special-purpose registries, the parts a destination must never be.
const V4_REFUSED: readonly Range[] = [
  { prefix: [0, 0, 0, 0], bits: 8, label: '"this network" 0.0.0.0/8' },
  { prefix: [10, 0, 0, 0], bits: 8, label: 'private 10.0.0.0/8' },
  { prefix: [100, 64, 0, 0], bits: 10, label: 'CGNAT 100.64.0.0/10' },
  { prefix: [127, 0, 0, 0], bits: 8, label: 'loopback 127.0.0.0/8' },
  { prefix: [169, 254, 0, 0], bits: 16, label: 'link-local (metadata) 169.254.0.0/16' },
  { prefix: [172, 16, 0, 0], bits: 12, label: 'private 172.16.0.0/12' },
  { prefix: [192, 0, 0, 0], bits: 24, label: 'IETF protocol assignments 192.0.0.0/24' },
  { prefix: [192, 0, 2, 0], bits: 24, label: 'documentation 192.0.2.0/24' },
  { prefix: [192, 168, 0, 0], bits: 16, label: 'private 192.168.0.0/16' },
  { prefix: [198, 18, 0, 0], bits: 15, label: 'benchmarking 198.18.0.0/15' },
  { prefix: [198, 51, 100, 0], bits: 24, label: 'documentation 198.51.100.0/24' },
  { prefix: [203, 0, 113, 0], bits: 24, label: 'documentation 203.0.113.0/24' },
  { prefix: [224, 0, 0, 0], bits: 4, label: 'multicast 224.0.0.0/4' },
  { prefix: [255, 255, 255, 255], bits: 32, label: 'broadcast 255.255.255.255' },
  { prefix: [240, 0, 0, 0], bits: 4, label: 'reserved 240.0.0.0/4' },
];

const V6_REFUSED: readonly Range[] = [
  { prefix: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], bits: 128, label: 'unspecified ::' },
  { prefix: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], bits: 128, label: 'loopback ::1' },
  // Deprecated forms that carry an IPv4 address: ::/96 plainly, Teredo XOR-ed.
  { prefix: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], bits: 96, label: 'IPv4-compatible ::/96' },
  { prefix: [0x00, 0x64, 0xff, 0x9b, 0, 1], bits: 48, label: 'local-use NAT64 64:ff9b:1::/48' },
  { prefix: [0x01, 0x00, 0, 0, 0, 0, 0, 0], bits: 64, label: 'discard 100::/64' },
  { prefix: [0x20, 0x01, 0, 0], bits: 32, label: 'Teredo 2001::/32' },
  { prefix: [0x20, 0x01, 0x0d, 0xb8], bits: 32, label: 'documentation 2001:db8::/32' },
  { prefix: [0xfc], bits: 7, label: 'unique local fc00::/7' },
  { prefix: [0xfe, 0x80], bits: 10, label: 'link-local fe80::/10' },
  { prefix: [0xfe, 0xc0], bits: 10, label: 'site-local fec0::/10' },
  { prefix: [0xff], bits: 8, label: 'multicast ff00::/8' },
];

function inRange(bytes: Uint8Array, range: Range): boolean {
  let bits = range.bits;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if (((bytes[i] ?? 0) & mask) !== ((range.prefix[i] ?? 0) & mask)) return false;
  }
  return true;
}

function parseV4(text: string): Uint8Array {
  return Uint8Array.from(text.split('.').map(Number));
}

/** 16 bytes of a valid IPv6 literal (with `::` and an optional dotted-quad tail); the zone id is ignored. */
function parseV6(text: string): Uint8Array {
  const bare = text.split('%')[0] ?? '';
  const out = new Uint8Array(16);
  const words = (part: string): number[] => {
    if (part === '') return [];
    const result: number[] = [];
    for (const piece of part.split(':')) {
      if (piece.includes('.')) {
        const [a = 0, b = 0, c = 0, d = 0] = parseV4(piece);
        result.push((a << 8) | b, (c << 8) | d);
      } else result.push(parseInt(piece, 16));
    }
    return result;
  };
  const gap = bare.indexOf('::');
  const head = words(gap >= 0 ? bare.slice(0, gap) : bare);
  const tail = gap >= 0 ? words(bare.slice(gap + 2)) : [];
  const all = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  all.forEach((word, i) => {
    out[i * 2] = word >> 8;
    out[i * 2 + 1] = word & 0xff;
  });
  return out;
}

/** The IPv4 address an IPv6 address carries and how (mapped, NAT64, 6to4), or null. */
function embeddedV4(b: Uint8Array): { v4: Uint8Array; form: string } | null {
  const zeros = (from: number, to: number) => b.subarray(from, to).every((x) => x === 0);
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return { v4: b.subarray(12), form: 'IPv4-mapped' };
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12)) {
    return { v4: b.subarray(12), form: 'NAT64' };
  }
  if (b[0] === 0x20 && b[1] === 0x02) return { v4: b.subarray(2, 6), form: '6to4' };
  return null;
}

function refusedV4(bytes: Uint8Array): string | null {
  return V4_REFUSED.find((r) => inRange(bytes, r))?.label ?? null;
}

/** Why `address` is not a public destination (its range's label), or null; anything not an IP literal is refused. */
export function refusedRange(address: string): string | null {
  const family = isIP(address);
  if (family === 4) return refusedV4(parseV4(address));
  if (family !== 6) return 'not an IP address';
  const bytes = parseV6(address);
  const inner = embeddedV4(bytes);
  if (inner) {
    const label = refusedV4(inner.v4);
    if (label) return `${inner.form} ${label}`;
  }
  return V6_REFUSED.find((r) => inRange(bytes, r))?.label ?? null;
}

/**
 * One spelling per address (a policy's `127.0.0.2` must match a resolver's `::ffff:127.0.0.2`): IPv4 dotted quad,
 * IPv4-mapped IPv6 as its IPv4, other IPv6 in RFC 5952 form.
 */
export function canonicalAddress(address: string): string | null {
  const family = isIP(address);
  if (family === 4) return parseV4(address).join('.');
  if (family !== 6 || address.includes('%')) return null;
  const bytes = parseV6(address);
  const inner = embeddedV4(bytes);
  if (inner?.form === 'IPv4-mapped') return inner.v4.join('.');
  return new URL(`http://[${address}]/`).hostname.slice(1, -1);
}

export class BadHostError extends BadInputError {}

export interface Destination {
  /** Lower-case ASCII host name, or an IP literal in canonical form (IPv6 without brackets). */
  host: string;
  port: number;
  literal: boolean;
}

const MAX_AUTHORITY = 300;
// Never in a host[:port]: path, query, fragment, userinfo, whitespace, backslash, percent (zone ids), the wildcard.
const FORBIDDEN = /[\s/?#@\\%*]/;

export function parsePort(text: string): number {
  if (!/^\d{1,5}$/.test(text)) throw new BadHostError(`port "${text}" is not a number from 1 to 65535`);
  const port = Number(text);
  if (port < 1 || port > 65535) throw new BadHostError(`port "${text}" is not a number from 1 to 65535`);
  return port;
}

/** A host name or IP literal in its one normal spelling; IPv6 given without brackets. */
export function normaliseHost(raw: string): { host: string; literal: boolean } {
  if (raw === '' || FORBIDDEN.test(raw)) throw new BadHostError(`host "${raw}" is not a host name`);
  // FORBIDDEN refused a zone id (`%`): every IPv6 literal left has its canonical spelling.
  if (isIP(raw) === 6) return { host: canonicalAddress(raw) as string, literal: true };
  let hostname: string;
  try {
    // The WHATWG URL parser lower-cases, applies IDNA (punycode) and writes every IPv4 spelling (0x7f.1, 2130706433)
    // as its dotted quad.
    hostname = new URL(`http://${raw}/`).hostname;
  } catch {
    throw new BadHostError(`host "${raw}" is not a host name`);
  }
  if (hostname.startsWith('[')) throw new BadHostError(`host "${raw}" is not a host name`);
  const host = hostname.endsWith('.') ? hostname.slice(0, -1) : hostname;
  if (host === '' || host.endsWith('.') || host.startsWith('.') || host.includes('..')) {
    throw new BadHostError(`host "${raw}" is not a host name`);
  }
  return { host, literal: isIP(host) === 4 };
}

/** `[v6]:port`, `[v6]`, `host:port` or `host`; a bare IPv6 literal (more than one colon) comes back whole. */
export function splitHostPort(raw: string): { host: string; port: string | null } {
  if (raw.startsWith('[')) {
    const close = raw.indexOf(']');
    const rest = raw.slice(close + 1);
    if (close < 0 || (rest !== '' && !rest.startsWith(':')) || isIP(raw.slice(1, close)) !== 6) {
      throw new BadHostError(`host "${raw}" is not a host name`);
    }
    return { host: raw.slice(1, close), port: rest === '' ? null : rest.slice(1) };
  }
  const colon = raw.indexOf(':');
  if (colon < 0 || colon !== raw.lastIndexOf(':')) return { host: raw, port: null };
  return { host: raw.slice(0, colon), port: raw.slice(colon + 1) };
}

/** `host:port`, `[v6]:port`, or without the port when `defaultPort` is given; a bare IPv6 literal is refused (its
 * last group could be read as a port). */
export function parseAuthority(raw: string, defaultPort: number | null): Destination {
  if (raw.length > MAX_AUTHORITY) throw new BadHostError('host is too long');
  const { host, port } = splitHostPort(raw);
  if (!raw.startsWith('[') && host.includes(':')) throw new BadHostError(`IPv6 host "${raw}" needs [brackets]`);
  if (port === null && defaultPort === null) throw new BadHostError(`"${raw}" has no port`);
  return { ...normaliseHost(host), port: port === null ? (defaultPort as number) : parsePort(port) };
}

/** `host:port` for messages and records, with brackets around IPv6. */
export function formatDestination(host: string, port: number): string {
  return `${isIP(host) === 6 ? `[${host}]` : host}:${port}`;
}
