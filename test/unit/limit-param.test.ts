// A bare `LIMIT ?` makes SQLite recompile its statement on every call from node:sqlite (src/db/open.ts LIMIT_PARAM).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { LIMIT_PARAM } from '../../src/db/open.ts';

const SRC = join(import.meta.dirname, '..', '..', 'src');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath, e.name));
}

describe('bound LIMITs', () => {
  it('appear in src/ only as LIMIT_PARAM', () => {
    const bare = sources(SRC).filter((file) => /\bLIMIT\s+\?/.test(readFileSync(file, 'utf8').replace(/\/\/.*$/gm, '')));
    assert.deepEqual(bare, []);
  });

  it('limit and page like a bare LIMIT ?', () => {
    const db = new DatabaseSync(':memory:');
    db.exec(`CREATE TABLE t (id INTEGER PRIMARY KEY);
      WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20) INSERT INTO t SELECT i FROM n`);
    const ids = (limit: unknown) => db.prepare(`SELECT id FROM t ORDER BY id DESC ${LIMIT_PARAM}`).all(limit as number).map((r) => r.id);
    assert.deepEqual(ids(3), [20, 19, 18]);
    assert.deepEqual(ids(0), []);
    assert.equal(ids(-1).length, 20);
    db.close();
  });
});
