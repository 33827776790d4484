// Evidence Receipt (DESIGN §6): canonical JSON, integrity = sha256 over it, Ed25519 signature over that digest.
import { createHash, createPublicKey, type KeyObject } from 'node:crypto';
import { canonicalJson } from '../canonical-json.ts';
import { signBytes, verifyBytes, keyIdOf, type SigningKey } from '../keys.ts';
import type { Verdict } from '../run-json.ts';
import type { CheckResult } from './checks.ts';
import type { EgressDenial, EgressHost } from '../gate/evidence.ts';

export const RECEIPT_TYPE = 'svc.evidence_receipt';

export interface ReceiptBody {
  type: typeof RECEIPT_TYPE;
  version: 1;
  source: string;
  run: string;
  group_id: string;
  repo: string;
  branch: string | null;
  base_sha: string | null;
  head_sha: string | null;
  spec_sha256: string;
  provider: string;
  /** A check as the receipt records it: its artifact's name is left out, its output's hash is in. */
  checks: Array<Omit<CheckResult, 'artifact'>>;
  diff: { files: number; insertions: number; deletions: number; patch_sha256: string; paths: string[] };
  cost: { usd: number | null; tokens_in: number | null; tokens_out: number | null };
  verdict: Verdict;
  gaps: string[];
  started_at: string;
  ended_at: string | null;
  issued_at: string;
  /**
   * Only on receipts a Kubernetes pod's signer issued (src/pod/sign.ts): the fields it established itself, and those it
   * copied from the run container's report, which the agent could have changed (docs/deploy.md "Receipts from pods").
   */
  attestation?: { by: 'pod-signer'; verified: string[]; reported: string[] };
  /**
   * The agent's network: whether it was confined to the egress gate, the project's patterns, and what the
   * gate saw (connections, per-host counts, denials). `confined: false` makes no claim about where it connected.
   */
  network?: ReceiptNetwork;
}

export interface ReceiptNetwork {
  confined: boolean;
  allow: string[];
  deny: string[];
  connections: number;
  denied: number;
  hosts: Array<{ host: string; port: number; connections: number; bytes_up: number; bytes_down: number }>;
  denials: EgressDenial[];
}

export const UNCONFINED: ReceiptNetwork = {
  confined: false, allow: [], deny: [], connections: 0, denied: 0, hosts: [], denials: [],
};

/** At most this many hosts and denials are listed; egress.jsonl (or the gate's log) has every connection. */
const NETWORK_ROWS = 50;

/** The section of a run the gate confined: its patterns, the totals, and the busiest hosts and refusals. */
export function confinedNetwork(
  policy: { allow: string[]; deny: string[] },
  seen: { connections: number; denied: number; hosts: EgressHost[]; denials: EgressDenial[] },
): ReceiptNetwork {
  return {
    confined: true,
    allow: policy.allow,
    deny: policy.deny,
    connections: seen.connections,
    denied: seen.denied,
    hosts: seen.hosts.filter((h) => h.allowed > 0).sort((a, b) => b.allowed - a.allowed).slice(0, NETWORK_ROWS).map(
      (h) => ({ host: h.host, port: h.port, connections: h.allowed, bytes_up: h.bytesUp, bytes_down: h.bytesDown }),
    ),
    denials: [...seen.denials].sort((a, b) => b.count - a.count).slice(0, NETWORK_ROWS),
  };
}

export interface Receipt extends ReceiptBody {
  kid: string;
  integrity: string;
  signature: string;
}

/** sha256 hex over the canonical JSON of the receipt without `integrity` and `signature`. */
function receiptDigest(receipt: Record<string, unknown>): Buffer {
  const { integrity: _i, signature: _s, ...rest } = receipt;
  return createHash('sha256').update(canonicalJson(rest)).digest();
}

export function issueReceipt(body: ReceiptBody, key: SigningKey): Receipt {
  const withKid = { ...body, kid: key.kid };
  const digest = receiptDigest(withKid);
  return { ...withKid, integrity: digest.toString('hex'), signature: signBytes(key, digest) };
}

export type ReceiptProblem = 'malformed' | 'integrity_mismatch' | 'unknown_key' | 'bad_signature';

export interface ReceiptCheck {
  ok: boolean;
  problem: ReceiptProblem | null;
  message: string;
  receipt: Receipt | null;
}

/** Known public keys by kid (the local key, a --key file, or GET /v1/keys). */
export type KeyRing = Map<string, KeyObject>;

export function keyRingOf(pems: string[]): KeyRing {
  const ring: KeyRing = new Map();
  for (const pem of pems) {
    const key = createPublicKey(pem);
    ring.set(keyIdOf(key), key);
  }
  return ring;
}

function rejected(problem: ReceiptProblem, message: string): ReceiptCheck {
  return { ok: false, problem, message, receipt: null };
}

export function verifyReceipt(value: unknown, ring: KeyRing): ReceiptCheck {
  const r = value as Partial<Receipt> | null;
  if (
    typeof r !== 'object' || r === null || r.type !== RECEIPT_TYPE ||
    typeof r.integrity !== 'string' || typeof r.signature !== 'string' || typeof r.kid !== 'string'
  ) {
    return rejected('malformed', 'Not an Evidence Receipt: type, kid, integrity or signature is missing');
  }
  const digest = receiptDigest(r as Record<string, unknown>);
  if (digest.toString('hex') !== r.integrity) {
    return rejected('integrity_mismatch', 'Integrity mismatch: the receipt was changed after it was issued');
  }
  const key = ring.get(r.kid);
  if (!key) return rejected('unknown_key', `Unknown key: no public key with kid "${r.kid}" is known here`);
  if (!verifyBytes(key, digest, r.signature)) {
    return rejected('bad_signature', `Bad signature: key "${r.kid}" did not sign this receipt`);
  }
  const message = `Receipt OK: run ${r.source}/${r.run}, verdict ${r.verdict}, signed by ${r.kid}`;
  return { ok: true, problem: null, message, receipt: r as Receipt };
}

/** Pulls the receipt JSON out of a PR body (the fenced block after the "svc-receipt" marker). */
export function receiptFromMarkdown(text: string): unknown {
  const m = /<!-- svc-receipt -->\s*```+json\n([\s\S]*?)\n```+/.exec(text);
  if (!m) return null;
  try {
    return JSON.parse(m[1]!);
  } catch {
    return null;
  }
}
