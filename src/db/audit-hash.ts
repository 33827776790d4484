// The audit chain's hash: sha256 over the previous hash and the canonical JSON of an entry; no I/O here.
import { createHash } from 'node:crypto';
import { canonicalJson } from '../canonical-json.ts';

/** 64 zeros: the prev_hash of the first entry, so the genesis row is hashed like every other. */
export const GENESIS_HASH = '0'.repeat(64);

/** The fields an entry's hash covers; `at` is unix ms (the wire's ISO string parses back to the same number). */
export interface HashedEntry {
  id: number;
  at: number;
  actor: string;
  peer: string;
  action: string;
  target: string | null;
  outcome: string;
  detail: Record<string, unknown> | null;
}

export function entryHash(prevHash: string, entry: HashedEntry): string {
  const body = canonicalJson({
    id: entry.id,
    at: entry.at,
    actor: entry.actor,
    peer: entry.peer,
    action: entry.action,
    target: entry.target,
    outcome: entry.outcome,
    detail: entry.detail,
  });
  return createHash('sha256').update(prevHash).update(body).digest('hex');
}
