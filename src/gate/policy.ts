// The egress gate's policy (DESIGN §7a): host patterns to allow and to deny. Deny wins; an empty allow
// list means no network. Patterns are parsed once, up front, and a bad one is refused by name — a typo must not
// silently widen or narrow the gate. Matching is pure; resolving and address rules live in decide.ts.
import { BadHostError, normaliseHost, parsePort } from './host.ts';
import { canonicalAddress } from './address.ts';
import { isIP } from 'node:net';

export class GatePolicyError extends Error {
  readonly pattern: string;
  constructor(pattern: string, why: string) {
    super(`Network pattern "${pattern}": ${why}`);
    this.name = 'GatePolicyError';
    this.pattern = pattern;
  }
}

export interface HostPattern {
  /** The pattern as written, for records and messages. */
  text: string;
  /** any: `*`; exact: a name; subdomains: `*.name` (not the name itself); address: an IP literal. */
  kind: 'any' | 'exact' | 'subdomains' | 'address';
  /** Normal spelling of the name or address ('' for any). */
  host: string;
  /** null: every port. */
  port: number | null;
}

export interface GatePolicy {
  allow: readonly HostPattern[];
  deny: readonly HostPattern[];
}

/** `[v6]:port`, `[v6]`, a bare `v6` (no port), `host:port` or `host`. */
function splitPort(text: string): { host: string; port: string | null } {
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    const rest = text.slice(close + 1);
    if (close < 0 || (rest !== '' && !rest.startsWith(':'))) throw new BadHostError('brackets are unbalanced');
    if (isIP(text.slice(1, close)) !== 6) throw new BadHostError('brackets hold only an IPv6 address');
    return { host: text.slice(1, close), port: rest === '' ? null : rest.slice(1) };
  }
  const colon = text.indexOf(':');
  if (colon < 0 || colon !== text.lastIndexOf(':')) return { host: text, port: null };
  return { host: text.slice(0, colon), port: text.slice(colon + 1) };
}

export function parseHostPattern(text: string): HostPattern {
  if (typeof text !== 'string' || text === '') throw new GatePolicyError(String(text), 'is empty');
  if (/\s/.test(text) || text.includes('://')) throw new GatePolicyError(text, 'must be a host with an optional :port');
  try {
    const { host, port } = splitPort(text);
    const portNumber = port === null ? null : parsePort(port);
    if (host === '*') return { text, kind: 'any', host: '', port: portNumber };
    if (host.startsWith('*.')) {
      const base = normaliseHost(host.slice(2));
      if (base.literal) throw new GatePolicyError(text, 'a wildcard needs a name, not an address');
      return { text, kind: 'subdomains', host: base.host, port: portNumber };
    }
    if (host.includes('*')) throw new GatePolicyError(text, 'a wildcard is allowed only as a leading "*."');
    const target = normaliseHost(host);
    return { text, kind: target.literal ? 'address' : 'exact', host: target.host, port: portNumber };
  } catch (err) {
    if (err instanceof BadHostError) throw new GatePolicyError(text, err.message);
    throw err;
  }
}

function patternList(value: unknown, field: string): HostPattern[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new GatePolicyError(field, 'must be a list of host patterns');
  return value.map((item: unknown) => {
    if (typeof item !== 'string') throw new GatePolicyError(String(item), 'must be a string');
    return parseHostPattern(item);
  });
}

/** `{allow, deny}` as read from policy.json (either list may be missing). */
export function parseGatePolicy(value: { allow?: unknown; deny?: unknown }): GatePolicy {
  return { allow: patternList(value.allow, 'allow'), deny: patternList(value.deny, 'deny') };
}

/** Whether the pattern covers this destination host (a name, or an IP literal the request named). */
export function matchesHost(pattern: HostPattern, host: string, port: number): boolean {
  if (pattern.port !== null && pattern.port !== port) return false;
  switch (pattern.kind) {
    case 'any':
      return true;
    case 'exact':
      return host === pattern.host;
    case 'subdomains':
      return host.endsWith(`.${pattern.host}`);
    case 'address':
      return canonicalAddress(host) === pattern.host;
  }
}

/** Whether the pattern names this resolved address (deny lists apply to addresses as well as names). */
export function matchesAddress(pattern: HostPattern, address: string, port: number): boolean {
  return pattern.kind === 'address' && matchesHost(pattern, address, port);
}

/** The allow entry naming exactly this address and port: the only way past the address rules. */
export function exactAddressRule(policy: GatePolicy, address: string, port: number): HostPattern | null {
  const canonical = canonicalAddress(address);
  return policy.allow.find((p) => p.kind === 'address' && p.port === port && p.host === canonical) ?? null;
}
