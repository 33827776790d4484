import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { memoryControlStores } from '../helpers/memory-stores.ts';

describe('events store', () => {
  const { stores } = memoryControlStores();

  it('assigns increasing ids and ignores a repeated (source, run, seq)', () => {
    const a = stores.events.insert({ source: 's', run: 'r', seq: 1, ts: 10, kind: 'log', data: '{"text":"a"}' });
    const b = stores.events.insert({ source: 's', run: 'r', seq: 2, ts: 11, kind: 'log', data: '{"text":"b"}' });
    const dup = stores.events.insert({ source: 's', run: 'r', seq: 1, ts: 12, kind: 'log', data: '{"text":"changed"}' });
    assert.ok(a !== null && b !== null && b > a);
    assert.equal(dup, null);
    assert.equal(stores.events.listAll({ source: 's', run: 'r', after: 0, limit: 10 })[0]?.data, '{"text":"a"}');
  });

  it('gives server-originated events negative seqs that never collide with the runner', () => {
    const first = stores.events.append('s', 'r', { kind: 'answer', data: { answer: 'Postgres' }, ts: 20 });
    const second = stores.events.append('s', 'r', { kind: 'answer', data: { answer: 'again' }, ts: 21 });
    assert.equal(first.seq, -1);
    assert.equal(second.seq, -2);
    assert.equal(first.data, '{"answer":"Postgres"}');
    assert.notEqual(stores.events.insert({ source: 's', run: 'r', seq: 3, ts: 22, kind: 'log', data: '{}' }), null);
  });

  it('pages one run ascending by id after a cursor', () => {
    const all = stores.events.listAll({ source: 's', run: 'r', after: 0, limit: 100 });
    assert.deepEqual(all.map((e) => e.seq), [1, 2, -1, -2, 3]);
    const page = stores.events.listAll({ source: 's', run: 'r', after: all[1]!.id, limit: 2 });
    assert.deepEqual(page.map((e) => e.seq), [-1, -2]);
  });

  it('lists across runs and by source, and reports the highest id', () => {
    const other = stores.events.insert({ source: 't', run: 'x', seq: 1, ts: 30, kind: 'log', data: '{}' });
    assert.equal(stores.events.maxId(), other);
    assert.equal(stores.events.listAll({ after: 0, limit: 100 }).length, 6);
    assert.deepEqual(stores.events.listAll({ after: 0, limit: 100, source: 't' }).map((e) => e.run), ['x']);
    assert.equal(stores.events.listAll({ after: 0, limit: 100, source: 's', run: 'r' }).length, 5);
  });
});
