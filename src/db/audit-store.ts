// Append-only audit log as a hash chain: each row's hash is sha256 over the previous hash and the canonical JSON of
// its entry, so edits and deletions show.
import { hash } from 'node:crypto';
import { canonicalJson } from '../canonical-json.ts';
import { LIMIT_PARAM, transaction, type Db } from './open.ts';
import { iso } from '../iso-time.ts';
import { tryParseJson } from '../untrusted.ts';

/** The first entry's prev_hash, so it is hashed like every other. */
export const GENESIS_HASH = '0'.repeat(64);

/** The fields an entry's hash covers; `at` is unix ms (the wire's ISO string parses back to it). */
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

/** Over the hashed fields only: a stored row also carries its chain links. */
export function entryHash(prevHash: string, entry: HashedEntry): string {
  const { id, at, actor, peer, action, target, outcome, detail } = entry;
  const body = canonicalJson({ id, at, actor, peer, action, target, outcome, detail });
  return hash('sha256', prevHash + body, 'hex');
}

export type AuditInput = Omit<HashedEntry, 'id' | 'at' | 'detail'> & { detail?: Record<string, unknown> | null };

export interface AuditEntry extends HashedEntry {
  prev_hash: string;
  hash: string;
}

export type AuditStore = ReturnType<typeof createAuditStore>;

/** The action of the row a prune appends; its detail anchors the chain's new start. */
export const PRUNE_ACTION = 'audit.prune';

interface Row extends Omit<AuditEntry, 'detail'> {
  detail: string | null;
}

function toEntry(row: Row): AuditEntry {
  return { ...row, detail: row.detail === null ? null : (JSON.parse(row.detail) as Record<string, unknown>) };
}

export function createAuditStore(db: Db, clock: () => number = Date.now) {
  const last = db.prepare('SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1');
  const insert = db.prepare(
    'INSERT INTO audit (id, at, actor, peer, action, target, outcome, detail, prev_hash, hash) ' +
      'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  const newestBefore = db.prepare(`SELECT * FROM audit WHERE id < ? ORDER BY id DESC ${LIMIT_PARAM}`);
  const all = db.prepare('SELECT * FROM audit ORDER BY id ASC');
  const oldest = db.prepare('SELECT id, prev_hash FROM audit ORDER BY id ASC LIMIT 1');
  const lastPrune = db.prepare(
    `SELECT detail FROM audit WHERE action = '${PRUNE_ACTION}' AND actor = 'system' ORDER BY id DESC LIMIT 1`,
  );
  const expiredThrough = db.prepare(
    'SELECT id, hash FROM audit WHERE id <= (SELECT MIN(id) FROM audit) + ? AND at < ? ORDER BY id DESC LIMIT 1',
  );
  const countThrough = db.prepare('SELECT COUNT(*) AS n FROM audit WHERE id <= ?');
  const deleteThrough = db.prepare('DELETE FROM audit WHERE id <= ?');

  function appendLocked(input: AuditInput): AuditEntry {
    const tail = last.get() as { id: number; hash: string } | undefined;
    const id = (tail?.id ?? 0) + 1;
    const prevHash = tail?.hash ?? GENESIS_HASH;
    const detail = input.detail ?? null;
    const { actor, peer, action, target, outcome } = input;
    const entry = { id, at: clock(), actor, peer, action, target, outcome, detail };
    const hash = entryHash(prevHash, entry);
    const detailText = detail === null ? null : JSON.stringify(detail);
    insert.run(id, entry.at, actor, peer, action, target, outcome, detailText, prevHash, hash);
    return { ...entry, prev_hash: prevHash, hash };
  }

  /** The hash the oldest kept row must link to: genesis for an unpruned chain, else the last prune's anchor. */
  function chainStart(first: { id: number; prev_hash: string }): string | undefined {
    if (first.id === 1) return GENESIS_HASH;
    const row = lastPrune.get() as { detail: string | null } | undefined;
    type Anchor = { pruned_through_id?: unknown; pruned_through_hash?: unknown } | undefined;
    const a = (row?.detail ? tryParseJson(row.detail) : undefined) as Anchor;
    if (a?.pruned_through_id !== first.id - 1 || a.pruned_through_hash !== first.prev_hash) return undefined;
    return first.prev_hash;
  }

  return {
    // Reading the tail and inserting are one step, or two writers could chain onto the same parent.
    append: (input: AuditInput): AuditEntry => transaction(db, () => appendLocked(input)),
    /**
     * Newest first, keyset-paged on id so rows appended meanwhile cause no duplicates or gaps; `nextBeforeId`: the
     * `beforeId` of the next (older) page, null on the last.
     */
    list({ limit, beforeId }: { limit: number; beforeId?: number | null }) {
      const rows = newestBefore.all(beforeId ?? Number.MAX_SAFE_INTEGER, limit + 1) as unknown as Row[];
      const items = rows.slice(0, limit).map(toEntry);
      return { items, nextBeforeId: rows.length > limit ? items[items.length - 1]!.id : null };
    },
    /** Deletes up to `maxRows` of the oldest rows before `before`, with the `audit.prune` row that anchors the rest. */
    pruneBefore(before: number, maxRows: number): number {
      return transaction(db, () => {
        // Ids grow with time, so "the oldest rows before the cutoff" is a prefix of the chain: id <= through.
        const through = expiredThrough.get(maxRows - 1, before) as { id: number; hash: string } | undefined;
        if (!through) return 0;
        const deleted = (countThrough.get(through.id) as { n: number }).n;
        appendLocked({
          actor: 'system', peer: '', action: PRUNE_ACTION, target: null, outcome: 'ok',
          detail: { deleted, pruned_through_id: through.id, pruned_through_hash: through.hash, before: iso(before) },
        });
        deleteThrough.run(through.id);
        return deleted;
      });
    },
    /**
     * The id of the first row that does not match, or null. After a prune the oldest row kept must follow and link to
     * the newest `audit.prune` row's anchor, so cutting rows off the old end outside a prune still shows.
     */
    verifyChain(): number | null {
      const first = oldest.get() as { id: number; prev_hash: string } | undefined;
      if (!first) return null;
      let prev = chainStart(first);
      if (prev === undefined) return first.id;
      for (const raw of all.iterate()) {
        const row = raw as unknown as Row;
        let entry: AuditEntry;
        try {
          entry = toEntry(row);
        } catch {
          return row.id;
        }
        if (row.prev_hash !== prev || entryHash(prev, entry) !== row.hash) return row.id;
        prev = row.hash;
      }
      return null;
    },
  };
}
