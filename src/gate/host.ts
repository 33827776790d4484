// Destination parsing for the egress gate: a CONNECT authority or an absolute URL's host becomes one normal
// spelling (lower case, IDNA punycode, no trailing dot, IPv4 in dotted quad) before any policy sees it, and every
// oddity — userinfo, an empty host, a port out of range, a zone id, a wildcard — is refused. It never resolves
// names.
import { isIP } from 'node:net';
import { canonicalAddress } from './address.ts';

export class BadHostError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BadHostError';
  }
}

export interface Destination {
  /** Lower-case ASCII host name, or an IP literal in canonical form (IPv6 without brackets). */
  host: string;
  port: number;
  /** Whether `host` is an IP literal rather than a name. */
  literal: boolean;
}

const MAX_AUTHORITY = 300;
// Characters that never belong in a host[:port]: path, query, fragment, userinfo, whitespace, backslash, percent
// (zone ids and escapes), the wildcard.
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
  if (isIP(raw) === 6) {
    const canonical = canonicalAddress(raw);
    if (canonical === null) throw new BadHostError(`host "${raw}" is not a host name`);
    return { host: canonical, literal: true };
  }
  let hostname: string;
  try {
    // The WHATWG URL parser lower-cases, applies IDNA (punycode) and reads every IPv4 spelling (0x7f.1, 2130706433).
    hostname = new URL(`http://${raw}/`).hostname;
  } catch {
    throw new BadHostError(`host "${raw}" is not a host name`);
  }
  if (hostname.startsWith('[')) throw new BadHostError(`host "${raw}" is not a host name`);
  const host = hostname.endsWith('.') ? hostname.slice(0, -1) : hostname;
  if (host === '' || host.endsWith('.') || host.startsWith('.') || host.includes('..')) {
    throw new BadHostError(`host "${raw}" is not a host name`);
  }
  if (isIP(host) === 4) return { host: canonicalAddress(host) ?? host, literal: true };
  return { host, literal: false };
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

/**
 * `host:port`, `[v6]:port`, or without the port when `defaultPort` is given. A bare IPv6 literal without brackets
 * is refused: its last group could be read as a port.
 */
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
