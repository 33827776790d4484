// Append-only audit log as a hash chain: each row's hash covers the previous hash, so edits and deletions show.
import type { StatementSync } from 'node:sqlite';
import type { Db } from './open.ts';
import { GENESIS_HASH, entryHash, type HashedEntry } from './audit-hash.ts';
import { LIMIT_PARAM } from './limit-param.ts';

export interface AuditInput {
  actor: string;
  peer: string;
  action: string;
  target: string | null;
  outcome: string;
  detail?: Record<string, unknown> | null;
}

/** A stored entry: the hashed fields plus the chain links. */
export interface AuditEntry extends HashedEntry {
  prev_hash: string;
  hash: string;
}

export interface AuditPage {
  items: AuditEntry[];
  /** Id to pass as `beforeId` for the next (older) page; null on the last page. */
  nextBeforeId: number | null;
}

export interface AuditStore {
  append(input: AuditInput): AuditEntry;
  /** Newest first, keyset-paged on id so rows appended meanwhile cause no duplicates or gaps. */
  list(opts: { limit: number; beforeId?: number | null }): AuditPage;
  /** Recomputes the chain oldest first; returns the id of the first row that does not match, or null. */
  verifyChain(): number | null;
}

/** As SQLite returns it: detail still JSON text. */
interface Row extends Omit<AuditEntry, 'detail'> {
  detail: string | null;
}

function toEntry(row: Row): AuditEntry {
  return { ...row, detail: row.detail === null ? null : (JSON.parse(row.detail) as Record<string, unknown>) };
}

export function createAuditStore(db: Db, clock: () => number = Date.now): AuditStore {
  const last = db.prepare('SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1');
  const insert = db.prepare(
    'INSERT INTO audit (id, at, actor, peer, action, target, outcome, detail, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  const newest = db.prepare(`SELECT * FROM audit ORDER BY id DESC ${LIMIT_PARAM}`);
  const older = db.prepare(`SELECT * FROM audit WHERE id < ? ORDER BY id DESC ${LIMIT_PARAM}`);
  const all = db.prepare('SELECT * FROM audit ORDER BY id ASC');

  function appendLocked(input: AuditInput): AuditEntry {
    const tail = last.get() as { id: number; hash: string } | undefined;
    const id = (tail?.id ?? 0) + 1;
    const prevHash = tail?.hash ?? GENESIS_HASH;
    const detail = input.detail ?? null;
    const entry = { id, at: clock(), actor: input.actor, peer: input.peer, action: input.action, target: input.target, outcome: input.outcome, detail };
    const hash = entryHash(prevHash, entry);
    insert.run(id, entry.at, entry.actor, entry.peer, entry.action, entry.target, entry.outcome, detail === null ? null : JSON.stringify(detail), prevHash, hash);
    return { ...entry, prev_hash: prevHash, hash };
  }

  function page(stmt: StatementSync, args: number[], limit: number): AuditPage {
    const rows = stmt.all(...args, limit + 1) as unknown as Row[];
    const items = rows.slice(0, limit).map(toEntry);
    return { items, nextBeforeId: rows.length > limit ? items[items.length - 1]!.id : null };
  }

  return {
    append(input) {
      // Reading the tail and inserting must be one step, or two writers could chain onto the same parent.
      if (db.isTransaction) return appendLocked(input);
      db.exec('BEGIN IMMEDIATE');
      try {
        const entry = appendLocked(input);
        db.exec('COMMIT');
        return entry;
      } catch (err) {
        if (db.isTransaction) db.exec('ROLLBACK');
        throw err;
      }
    },
    list({ limit, beforeId }) {
      return beforeId === undefined || beforeId === null ? page(newest, [], limit) : page(older, [beforeId], limit);
    },
    verifyChain() {
      let prev = GENESIS_HASH;
      for (const raw of all.iterate()) {
        const row = raw as unknown as Row;
        let detail: Record<string, unknown> | null;
        try {
          detail = row.detail === null ? null : (JSON.parse(row.detail) as Record<string, unknown>);
        } catch {
          return row.id;
        }
        if (row.prev_hash !== prev || entryHash(prev, { ...row, detail }) !== row.hash) return row.id;
        prev = row.hash;
      }
      return null;
    },
  };
}
