import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createRefusalTally } from '../../src/control/refusal-tally.ts';
import { createLogger } from '../../src/log.ts';
import type { AuditInput, AuditStore } from '../../src/db/audit-store.ts';

const WINDOW_MS = 60_000;

function refusal(peer: string, target: string | null = 'local/r1'): AuditInput {
  return { actor: 'anonymous', peer, action: 'run.stop', target, outcome: 'forbidden_origin', detail: { request_id: 'q1' } };
}

function tallyOf() {
  const rows: AuditInput[] = [];
  const disk = { full: false };
  const logged: string[] = [];
  let now = 1_700_000_000_000;
  const audit = {
    append(input: AuditInput) {
      if (disk.full) throw new Error('disk full');
      rows.push(input);
    },
  } as unknown as AuditStore;
  const tally = createRefusalTally(audit, () => now, createLogger('test', (line) => logged.push(line)));
  return { tally, rows, logged, disk, advance: (ms: number) => (now += ms) };
}

describe('refusal tally', () => {
  it('writes the repeats of a window as one row when the same refusal arrives after the window ends', () => {
    const { tally, rows, advance } = tallyOf();
    tally.record(refusal('10.0.0.1'));
    advance(1_000);
    tally.record(refusal('10.0.0.1'));
    tally.record(refusal('10.0.0.1'));
    assert.equal(rows.length, 1);
    advance(WINDOW_MS);
    tally.record(refusal('10.0.0.1'));
    assert.deepEqual(rows.map((r) => r.detail!.count), [1, 2, 1]);
    assert.equal(rows[1]!.detail!.repeated, true);
    assert.equal(rows[1]!.detail!.request_id, undefined, 'the repeats row names no single request');
    tally.close();
  });

  it('counts refusals past 1,000 distinct keys under peer * without a row per request', () => {
    const { tally, rows } = tallyOf();
    for (let i = 0; i < 1_000; i++) tally.record(refusal(`10.0.${i >> 8}.${i & 255}`));
    assert.equal(rows.length, 1_000);
    for (let i = 0; i < 50; i++) tally.record(refusal(`10.9.0.${i}`, `local/r${i}`));
    assert.equal(rows.length, 1_000, 'new keys past the cap are only counted');
    tally.close();
    const pooled = rows.filter((r) => r.peer === '*');
    assert.equal(pooled.length, 1);
    assert.equal(pooled[0]!.target, null);
    assert.equal(pooled[0]!.detail!.count, 50);
  });

  it('logs a failed flush from its timer and keeps running', (t) => {
    t.mock.timers.enable({ apis: ['setInterval'] });
    const { tally, rows, logged, disk, advance } = tallyOf();
    tally.record(refusal('10.0.0.1'));
    tally.record(refusal('10.0.0.1'));
    disk.full = true;
    advance(WINDOW_MS);
    t.mock.timers.tick(WINDOW_MS);
    assert.equal(logged.length, 1);
    assert.match(logged[0]!, /"msg":"refusal audit flush failed","error":"disk full"/);
    disk.full = false;
    tally.record(refusal('10.0.0.1'));
    assert.equal(rows.length, 2, 'the next refusal is written again');
    tally.close();
  });
});
