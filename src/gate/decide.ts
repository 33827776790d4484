// The egress gate's one decision: may this destination be reached, at which address, and by which rule. The name
// is checked against the policy, then resolved here (never by the agent) and every address it resolves to is
// checked; the caller connects to the returned address, so there is no window for a DNS rebinding.
import { lookup } from 'node:dns/promises';
import { refusedRange } from './address.ts';
import { exactAddressRule, matchesAddress, matchesHost, type GatePolicy } from './policy.ts';
import { formatDestination, type Destination } from './host.ts';

/** Every address a name resolves to (the gate refuses the name when any of them is refused). */
export type Resolver = (host: string) => Promise<string[]>;

export async function systemResolver(host: string): Promise<string[]> {
  const found = await lookup(host, { all: true, verbatim: true });
  return found.map((a) => a.address);
}

export interface Allowed {
  allowed: true;
  /** The allow pattern that let it through (the exact-address entry when that is what admitted the address). */
  rule: string;
  address: string;
}

export interface Denied {
  allowed: false;
  /** The pattern that refused it, when one did (a deny entry). */
  rule: string | null;
  /** Short plain reason for the client and the log. */
  reason: string;
  address: string | null;
}

export type Decision = Allowed | Denied;

function denied(reason: string, rule: string | null = null, address: string | null = null): Denied {
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
    const byAddress = policy.deny.find((p) => matchesAddress(p, address, dest.port));
    if (byAddress) {
      return denied(`${where} resolves to ${address}, denied by "${byAddress.text}"`, byAddress.text, address);
    }
    const range = refusedRange(address);
    if (range === null) continue;
    const named = exactAddressRule(policy, address, dest.port);
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
