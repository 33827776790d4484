// The gate's policy and its one decision (docs/gate.md "Widening it"). A bad pattern is refused by name: a typo must
// not silently widen or narrow the gate. The caller connects to the address checked here: no DNS rebinding window.
import { readFileSync } from 'node:fs';
import { errorMessage } from '../errors.ts';
import {
  BadHostError, canonicalAddress, formatDestination, normaliseHost, parsePort, refusedRange, splitHostPort,
  type Destination,
} from './address.ts';

/** What is wrong with a network pattern or, with `subject` 'file', with an operator's gate file named by its path. */
export class GatePolicyError extends Error {
  readonly pattern: string;
  constructor(pattern: string, why: string, subject: 'pattern' | 'file' = 'pattern') {
    super(subject === 'file' ? `${pattern} ${why}` : `Network pattern "${pattern}": ${why}`);
    this.name = 'GatePolicyError';
    this.pattern = pattern;
  }
}

/** The JSON of an operator's gate file (policy, prices), or GatePolicyError naming it when unreadable or not JSON. */
export function readGateFile(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new GatePolicyError(file, `cannot be read (${errorMessage(err).slice(0, 120)})`, 'file');
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new GatePolicyError(file, `is not JSON (${errorMessage(err).slice(0, 120)})`, 'file');
  }
}

export interface HostPattern {
  /** The pattern as written. */
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

export function parseHostPattern(text: string): HostPattern {
  if (text === '') throw new GatePolicyError(text, 'is empty');
  if (/\s/.test(text) || text.includes('://')) throw new GatePolicyError(text, 'must be a host with an optional :port');
  try {
    const { host, port } = splitHostPort(text);
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

export function parseGatePolicy(value: { allow?: unknown; deny?: unknown }): GatePolicy {
  return { allow: patternList(value.allow, 'allow'), deny: patternList(value.deny, 'deny') };
}

/**
 * A repository's allow list as its gate may use it (DESIGN §7a): an entry naming an address in a refused range is
 * dropped, so the refused ranges hold for everything a repository lists, by literal and by what a name resolves to
 * (the one way past them, an exact address and port, then comes only from the operator's settings).
 */
export function repositoryAllow(allow: readonly string[]): { kept: string[]; dropped: string[] } {
  const kept: string[] = [];
  const dropped: string[] = [];
  for (const text of allow) {
    const pattern = parseHostPattern(text);
    const range = pattern.kind === 'address' ? refusedRange(pattern.host) : null;
    if (range === null) kept.push(text);
    else dropped.push(`"${text}" (${range})`);
  }
  return { kept, dropped };
}

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

/** Every address a name resolves to. */
export type Resolver = (host: string) => Promise<string[]>;

export async function systemResolver(host: string): Promise<string[]> {
  // Loaded at the first lookup, not with the module: svc start's launcher and worker check policies on a run's way to
  // its agent but resolve nothing there (~1.5 ms of CPU each: docs/bench.md).
  const { lookup } = process.getBuiltinModule('node:dns/promises');
  const found = await lookup(host, { all: true, verbatim: true });
  return found.map((a) => a.address);
}

/** `rule`: the allow pattern that let it through (or the exact-address entry), or the deny entry that refused it. */
type Decision =
  | { allowed: true; rule: string; address: string }
  | { allowed: false; rule: string | null; reason: string; address: string | null };

function denied(reason: string, rule: string | null = null, address: string | null = null): Decision {
  return { allowed: false, rule, reason, address };
}

export async function decide(dest: Destination, policy: GatePolicy, resolve: Resolver): Promise<Decision> {
  const where = formatDestination(dest.host, dest.port);
  const deny = policy.deny.find((p) => matchesHost(p, dest.host, dest.port));
  if (deny) return denied(`${where} is denied by "${deny.text}"`, deny.text);
  const allow = policy.allow.find((p) => matchesHost(p, dest.host, dest.port));
  if (!allow) return denied(`${where} is not in the allow list`);

  let addresses: string[];
  if (dest.literal) addresses = [dest.host];
  else {
    try {
      addresses = await resolve(dest.host);
    } catch {
      return denied(`${dest.host} does not resolve`);
    }
    if (addresses.length === 0) return denied(`${dest.host} does not resolve`);
  }
  let exact: string | null = null;
  for (const address of addresses) {
    const byAddress = policy.deny.find((p) => p.kind === 'address' && matchesHost(p, address, dest.port));
    if (byAddress) {
      return denied(`${where} resolves to ${address}, denied by "${byAddress.text}"`, byAddress.text, address);
    }
    const range = refusedRange(address);
    if (range === null) continue;
    // Only an allow entry naming exactly this address and port gets past the address rules.
    const canonical = canonicalAddress(address);
    const named = policy.allow.find((p) => p.kind === 'address' && p.port === dest.port && p.host === canonical);
    if (named) {
      exact = named.text;
      continue;
    }
    const why = dest.literal ? `${where} is in ${range}` : `${where} resolves to ${address} (${range})`;
    return denied(`${why}; only an allow entry naming that exact address and port admits it`, null, address);
  }
  const address = addresses[0] as string;
  return { allowed: true, rule: exact ?? allow.text, address };
}
