import { describe, it, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { openDatabase, type Db } from '../../src/db/open.ts';
import { controlMigrations } from '../../src/db/control-migrations.ts';
import { createAuditStore, type AuditStore } from '../../src/db/audit-store.ts';
import { GENESIS_HASH, entryHash, type HashedEntry } from '../../src/db/audit-store.ts';
import { canonicalJson } from '../../src/canonical-json.ts';

function entry(i: number) {
  return { actor: 'local', peer: '127.0.0.1', action: 'run.stop', target: `local/r${i}`, outcome: 'ok', detail: { status: 202, n: i } };
}

describe('audit store', () => {
  let dir: string;
  let db: Db;
  let audit: AuditStore;
  let now = 1_700_000_000_000;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-'));
    db = openDatabase(join(dir, 'control.db'), controlMigrations);
    audit = createAuditStore(db, () => now++);
  });
  afterEach(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts the chain from 64 zeros and links each entry to the previous hash', () => {
    const a = audit.append(entry(1));
    const b = audit.append(entry(2));
    assert.equal(a.prev_hash, GENESIS_HASH);
    assert.equal(b.prev_hash, a.hash);
    assert.match(a.hash, /^[0-9a-f]{64}$/);
    assert.notEqual(a.hash, b.hash);
  });

  it('hashes the previous hash followed by the canonical JSON of the entry', () => {
    const a = audit.append(entry(1));
    const body = canonicalJson({ id: a.id, at: a.at, actor: a.actor, peer: a.peer, action: a.action, target: a.target, outcome: a.outcome, detail: a.detail });
    assert.equal(a.hash, createHash('sha256').update(GENESIS_HASH + body).digest('hex'));
  });

  it('writes canonical JSON with sorted keys at every depth', () => {
    assert.equal(canonicalJson({ b: 1, a: { d: [1, { z: 0, y: null }], c: 'x' } }), '{"a":{"c":"x","d":[1,{"y":null,"z":0}]},"b":1}');
  });

  it('refuses NaN and Infinity in canonical JSON (JSON would sign them as null); undefined as JSON does', () => {
    for (const bad of [NaN, Infinity, -Infinity]) {
      assert.throws(() => canonicalJson({ a: [bad] }), { name: 'TypeError', message: /cannot hold NaN or Infinity/ });
    }
    assert.equal(canonicalJson({ a: undefined, b: [undefined] }), '{"b":[null]}');
    assert.equal(canonicalJson(undefined), 'null');
  });

  it('lists newest first and pages by id without duplicates or gaps while rows are appended', () => {
    for (let i = 0; i < 7; i++) audit.append(entry(i));
    const first = audit.list({ limit: 3 });
    assert.deepEqual(first.items.map((e) => e.id), [7, 6, 5]);
    audit.append(entry(99));
    const second = audit.list({ limit: 3, beforeId: first.nextBeforeId });
    assert.deepEqual(second.items.map((e) => e.id), [4, 3, 2]);
    const third = audit.list({ limit: 3, beforeId: second.nextBeforeId });
    assert.deepEqual(third.items.map((e) => e.id), [1]);
    assert.equal(third.nextBeforeId, null);
  });

  it('verifies an untouched chain as intact', () => {
    for (let i = 0; i < 5; i++) audit.append(entry(i));
    assert.equal(audit.verifyChain(), null);
  });

  it('verifies an empty chain as intact', () => {
    assert.equal(audit.verifyChain(), null);
  });

  it('reports the first row whose content was edited', () => {
    for (let i = 0; i < 5; i++) audit.append(entry(i));
    db.prepare("UPDATE audit SET outcome = 'forbidden' WHERE id = 3").run();
    assert.equal(audit.verifyChain(), 3);
  });

  it('reports the row after one that was edited and re-hashed', () => {
    for (let i = 0; i < 5; i++) audit.append(entry(i));
    const row = db.prepare('SELECT * FROM audit WHERE id = 2').get() as Record<string, unknown>;
    const edited = { ...(row as never as HashedEntry), actor: 'someone', detail: JSON.parse(String(row.detail)) };
    db.prepare("UPDATE audit SET actor = 'someone', hash = ? WHERE id = 2").run(entryHash(String(row.prev_hash), edited));
    assert.equal(audit.verifyChain(), 3);
  });

  it('reports a deleted row as a break at the next row', () => {
    for (let i = 0; i < 5; i++) audit.append(entry(i));
    db.prepare('DELETE FROM audit WHERE id = 2').run();
    assert.equal(audit.verifyChain(), 3);
  });

  it('reports an edited detail, including unparseable JSON', () => {
    for (let i = 0; i < 3; i++) audit.append(entry(i));
    db.prepare(`UPDATE audit SET detail = '{"status":500,"n":1}' WHERE id = 2`).run();
    assert.equal(audit.verifyChain(), 2);
    db.prepare(`UPDATE audit SET detail = 'not json' WHERE id = 1`).run();
    assert.equal(audit.verifyChain(), 1);
  });

  it('appends inside a caller transaction without opening its own', () => {
    db.exec('BEGIN IMMEDIATE');
    audit.append(entry(1));
    db.exec('ROLLBACK');
    assert.equal(audit.list({ limit: 10 }).items.length, 0);
  });

  it('keeps one chain when two connections append to the same file', () => {
    const other = openDatabase(join(dir, 'control.db'), controlMigrations);
    const audit2 = createAuditStore(other);
    for (let i = 0; i < 10; i++) (i % 2 ? audit : audit2).append(entry(i));
    other.close();
    assert.equal(audit.verifyChain(), null);
    assert.equal(audit.list({ limit: 50 }).items.length, 10);
  });
});
