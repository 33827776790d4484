import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { memoryControlStores } from '../helpers/memory-stores.ts';

describe('artifacts store', () => {
  const { stores } = memoryControlStores();

  it('stores content with its sha256 and size and returns the bytes', () => {
    const content = Buffer.from('{"ok":true}');
    stores.artifacts.put('s', 'r', { path: 'receipt.json', content_type: 'application/json', content, created_at: 5 });
    const row = stores.artifacts.get('s', 'r', 'receipt.json');
    assert.equal(row?.sha256, createHash('sha256').update(content).digest('hex'));
    assert.equal(row?.size, content.length);
    assert.equal(row?.created_at, 5);
    assert.deepEqual(Buffer.from(row!.content), content);
  });

  it('replaces a file at the same path', () => {
    stores.artifacts.put('s', 'r', { path: 'receipt.json', content_type: 'application/json', content: Buffer.from('{}') });
    assert.equal(stores.artifacts.get('s', 'r', 'receipt.json')?.size, 2);
  });

  it('lists metadata sorted by path without content', () => {
    stores.artifacts.put('s', 'r', { path: 'checks/test.log', content_type: 'text/plain', content: Buffer.from('ok') });
    const list = stores.artifacts.list('s', 'r');
    assert.deepEqual(list.map((a) => a.path), ['checks/test.log', 'receipt.json']);
    assert.equal('content' in list[0]!, false);
  });

  it('answers undefined for a missing file', () => {
    assert.equal(stores.artifacts.get('s', 'r', 'nope'), undefined);
  });
});

describe('control requests store', () => {
  const { stores } = memoryControlStores();

  it('hands pending requests over once, oldest first, only for the runs asked for, only to their source', () => {
    stores.controlRequests.add('remote', 'r1', 'stop');
    stores.controlRequests.add('remote', 'r2', 'answer', { answer: 'yes' });
    stores.controlRequests.add('remote', 'r1', 'answer', { answer: 'no' });
    stores.controlRequests.add('elsewhere', 'r1', 'stop');
    assert.equal(stores.controlRequests.pending('remote').length, 3);
    const taken = stores.controlRequests.takePending('remote', ['r1'], 100);
    assert.deepEqual(taken.map((r) => [r.run, r.action, r.payload]), [['r1', 'stop', null], ['r1', 'answer', { answer: 'no' }]]);
    assert.equal(stores.controlRequests.takePending('remote', ['r1']).length, 0);
    assert.deepEqual(stores.controlRequests.pending('remote').map((r) => r.run), ['r2']);
    assert.equal(stores.controlRequests.pending('elsewhere').length, 1);
  });
});
