import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createRunEventBus, eventJson, type EncodedBatch } from '../../src/control/event-bus.ts';
import type { EventRow } from '../../src/db/events-store.ts';

const LIMITS = { total: 2000, perRun: 100 };

function row(id: number, run = 'r1', source = 's'): EventRow {
  return { id, source, run, seq: id, ts: Date.UTC(2026, 0, 1), kind: 'log', data: '{"text":"hi"}' };
}

describe('run event bus', () => {
  it('encodes a publish once and hands the same batch to 1,000 subscribers', () => {
    const bus = createRunEventBus(LIMITS);
    const got: EncodedBatch[] = [];
    for (let i = 0; i < 1000; i++) bus.subscribe({ deliver: (b) => got.push(b), end() {} });
    bus.publish([row(1), row(2)]);
    assert.equal(got.length, 1000);
    assert.ok(got.every((b) => b === got[0]));
    const [a, b] = got[0]!.events;
    assert.equal(a!.frame, `id: 1\nevent: log\ndata: ${eventJson(row(1))}\n\n`);
    assert.equal(got[0]!.bytes.toString('utf8'), a!.frame + b!.frame);
  });

  it('routes by source and by run', () => {
    const bus = createRunEventBus(LIMITS);
    const seen: Record<string, number[]> = { all: [], src: [], run: [] };
    bus.subscribe({ deliver: (b) => seen.all!.push(...b.events.map((e) => e.id)), end() {} });
    bus.subscribe({ source: 's', deliver: (b) => seen.src!.push(...b.events.map((e) => e.id)), end() {} });
    bus.subscribe({ source: 's', run: 'r2', deliver: (b) => seen.run!.push(...b.events.map((e) => e.id)), end() {} });
    bus.publish([row(1), row(2, 'r2'), row(3, 'r2', 'other')]);
    assert.deepEqual(seen, { all: [1, 2, 3], src: [1, 2], run: [2] });
  });

  it('stops delivering after unsubscribe and keeps going past a throwing subscriber', () => {
    const bus = createRunEventBus(LIMITS);
    const got: number[] = [];
    bus.subscribe({ deliver: () => { throw new Error('broken'); }, end() {} });
    const off = bus.subscribe({ deliver: (b) => got.push(...b.events.map((e) => e.id)), end() {} });
    bus.publish([row(1)]);
    off();
    bus.publish([row(2)]);
    assert.deepEqual(got, [1]);
    assert.equal(bus.size(), 1);
  });

  it('ends every subscriber on close and ends late subscribers at once', () => {
    const bus = createRunEventBus(LIMITS);
    let ended = 0;
    bus.subscribe({ deliver() {}, end: () => ended++ });
    bus.subscribe({ source: 's', run: 'r', deliver() {}, end: () => ended++ });
    bus.close();
    assert.equal(ended, 2);
    bus.subscribe({ deliver() {}, end: () => ended++ });
    assert.equal(ended, 3);
    assert.equal(bus.size(), 0);
  });

  it('builds event JSON with data embedded as stored and an ISO timestamp', () => {
    assert.deepEqual(JSON.parse(eventJson(row(7))), { id: 7, source: 's', run: 'r1', seq: 7, ts: '2026-01-01T00:00:00.000Z', kind: 'log', data: { text: 'hi' } });
  });
});
