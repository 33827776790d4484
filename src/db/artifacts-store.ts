// Artifacts table: files recorded for a run, content kept in the DB with its sha256 so reads need no filesystem path.
// Paths are validated by the caller (src/control/params.ts checkArtifactPath) before they reach this store.
import { createHash } from 'node:crypto';
import type { Db } from './open.ts';

export interface ArtifactMeta {
  source: string;
  run: string;
  path: string;
  content_type: string;
  sha256: string;
  size: number;
  created_at: number;
}

export interface ArtifactRow extends ArtifactMeta {
  content: Uint8Array;
}

export interface ArtifactInput {
  path: string;
  content_type: string;
  content: Uint8Array;
  created_at?: number;
}

export function createArtifactsStore(db: Db) {
  // node:sqlite binds a zero-length view of a zero-length ArrayBuffer (an empty file read into Buffer.alloc(0), an
  // empty subarray) as NULL, not as an empty blob; coalesce makes every empty file an empty blob.
  const putStmt = db.prepare(
    `INSERT INTO artifacts (source, run, path, content_type, sha256, size, content, created_at)
     VALUES (?, ?, ?, ?, ?, ?, coalesce(?, X''), ?)
     ON CONFLICT (source, run, path) DO UPDATE SET content_type = excluded.content_type, sha256 = excluded.sha256,
     size = excluded.size, content = excluded.content, created_at = excluded.created_at`,
  );
  const getStmt = db.prepare('SELECT * FROM artifacts WHERE source = ? AND run = ? AND path = ?');
  const listStmt = db.prepare(
    'SELECT source, run, path, content_type, sha256, size, created_at FROM artifacts ' +
      'WHERE source = ? AND run = ? ORDER BY path',
  );

  return {
    /** Replaces a file at the same path. */
    put(source: string, run: string, input: ArtifactInput): ArtifactMeta {
      const { path, content_type, content, created_at = Date.now() } = input;
      const sha256 = createHash('sha256').update(content).digest('hex');
      putStmt.run(source, run, path, content_type, sha256, content.length, content, created_at);
      return { source, run, path, content_type, sha256, size: content.length, created_at };
    },
    get(source: string, run: string, path: string) {
      return getStmt.get(source, run, path) as ArtifactRow | undefined;
    },
    /** Sorted by path, without content. */
    list(source: string, run: string) {
      return listStmt.all(source, run) as unknown as ArtifactMeta[];
    },
  };
}
