// Destinations as text (docs/gate.md "Address rules"): one normal spelling of a host before any policy sees it, and
// the IP ranges refused by default, in every IPv6 form that carries an IPv4 address too. No I/O.
import { BlockList, isIP } from 'node:net';
import { BadInputError } from '../errors.ts';

/** The label of the range an address is in, or null; a public address costs one check, against all the ranges. */
function ranges(family: 'ipv4' | 'ipv6', rows: Array<[string, number, string]>): (address: string) => string | null {
  const all = new BlockList();
  const each = rows.map(([net, bits, label]) => {
    const list = new BlockList();
    list.addSubnet(net, bits, family);
    all.addSubnet(net, bits, family);
    return { label, list };
  });
  return (address) => {
    if (!all.check(address, family)) return null;
    return each.find((r) => r.list.check(address, family))?.label ?? null;
  };
}

// RFC 6890 special-purpose registries, the parts a destination must never be.
const refusedV4 = ranges('ipv4', [
  ['0.0.0.0', 8, '"this network" 0.0.0.0/8'],
  ['10.0.0.0', 8, 'private 10.0.0.0/8'],
  ['100.64.0.0', 10, 'CGNAT 100.64.0.0/10'],
  ['127.0.0.0', 8, 'loopback 127.0.0.0/8'],
  ['169.254.0.0', 16, 'link-local (metadata) 169.254.0.0/16'],
  ['172.16.0.0', 12, 'private 172.16.0.0/12'],
  ['192.0.0.0', 24, 'IETF protocol assignments 192.0.0.0/24'],
  ['192.0.2.0', 24, 'documentation 192.0.2.0/24'],
  ['192.168.0.0', 16, 'private 192.168.0.0/16'],
  ['198.18.0.0', 15, 'benchmarking 198.18.0.0/15'],
  ['198.51.100.0', 24, 'documentation 198.51.100.0/24'],
  ['203.0.113.0', 24, 'documentation 203.0.113.0/24'],
  ['224.0.0.0', 4, 'multicast 224.0.0.0/4'],
  ['255.255.255.255', 32, 'broadcast 255.255.255.255'],
  ['240.0.0.0', 4, 'reserved 240.0.0.0/4'],
]);

const refusedV6 = ranges('ipv6', [
  ['::', 128, 'unspecified ::'],
  ['::1', 128, 'loopback ::1'],
  // Deprecated forms that carry an IPv4 address: ::/96 plainly, Teredo XOR-ed.
  ['::', 96, 'IPv4-compatible ::/96'],
  ['64:ff9b:1::', 48, 'local-use NAT64 64:ff9b:1::/48'],
  ['100::', 64, 'discard 100::/64'],
  ['2001::', 32, 'Teredo 2001::/32'],
  ['2001:db8::', 32, 'documentation 2001:db8::/32'],
  ['fc00::', 7, 'unique local fc00::/7'],
  ['fe80::', 10, 'link-local fe80::/10'],
  ['fec0::', 10, 'site-local fec0::/10'],
  ['ff00::', 8, 'multicast ff00::/8'],
]);

/** 16 bytes of a valid IPv6 literal; the zone id is ignored. */
function parseV6(text: string): Uint8Array {
  // The URL parser writes every spelling as hex words (a dotted-quad tail too), with at most one `::`.
  const [head = '', tail] = new URL(`http://[${text.split('%')[0]}]/`).hostname.slice(1, -1).split('::');
  const words = (part: string): number[] => (part === '' ? [] : part.split(':').map((w) => parseInt(w, 16)));
  const gap = tail === undefined ? 0 : 8 - words(head).length - words(tail).length;
  const all = [...words(head), ...new Array<number>(gap).fill(0), ...words(tail ?? '')];
  const bytes = new DataView(new ArrayBuffer(16));
  all.forEach((word, i) => bytes.setUint16(i * 2, word));
  return new Uint8Array(bytes.buffer);
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

/** Why `address` is not a public destination (its range's label), or null; anything not an IP literal is refused. */
export function refusedRange(address: string): string | null {
  const family = isIP(address);
  if (family === 4) return refusedV4(address);
  if (family !== 6) return 'not an IP address';
  const inner = embeddedV4(parseV6(address));
  const label = inner ? refusedV4(inner.v4.join('.')) : null;
  if (inner && label) return `${inner.form} ${label}`;
  return refusedV6(address);
}

/**
 * One spelling per address (a policy's `127.0.0.2` must match a resolver's `::ffff:127.0.0.2`): IPv4 dotted quad,
 * IPv4-mapped IPv6 as its IPv4, other IPv6 in RFC 5952 form.
 */
export function canonicalAddress(address: string): string | null {
  const family = isIP(address);
  if (family === 4) return address;
  if (family !== 6 || address.includes('%')) return null;
  const inner = embeddedV4(parseV6(address));
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
  // The WHATWG URL parser lower-cases, applies IDNA (punycode) and writes every IPv4 spelling (0x7f.1, 2130706433)
  // as its dotted quad.
  const hostname = URL.parse(`http://${raw}/`)?.hostname;
  if (hostname === undefined || hostname.startsWith('[')) throw new BadHostError(`host "${raw}" is not a host name`);
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
