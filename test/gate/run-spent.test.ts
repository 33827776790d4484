// What a run spent, by the one rule the three budget checks share (docs/gate.md "Budgets").
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { runSpent } from '../../src/gate/budgets.ts';
import type { MeteredCost } from '../../src/run-json.ts';

const whole = (cost: unknown, tunnels: number | null = 0) =>
  ({ cost_usd: cost, unpriced: 0, doubtful: 0, ...(tunnels === null ? {} : { tunnels }) }) as unknown as MeteredCost;

describe('runSpent', () => {
  it('takes the metered figure alone when the gate priced every call and saw no tunnel', () => {
    assert.equal(runSpent({ metered: whole(0.01), reported: { cost_usd: 5 } }), 0.01);
  });

  it('takes the larger figure when tunnels were not counted or one was opened', () => {
    assert.equal(runSpent({ metered: whole(0.01, null), reported: { cost_usd: 5 } }), 5);
    assert.equal(runSpent({ metered: whole(0.01, 1), reported: { cost_usd: 5 } }), 5);
  });

  // A state.json figure that is no finite number (read back unchecked) once made NaN, which no budget is reached by.
  it('counts a metered or reported figure that is not a finite number as unknown, never NaN', () => {
    assert.equal(runSpent({ metered: whole('x'), reported: { cost_usd: 5 } }), 5);
    assert.equal(runSpent({ metered: whole(Number.NaN), reported: { cost_usd: 5 } }), 5);
    assert.equal(runSpent({ metered: whole(0.5, 1), reported: { cost_usd: 'y' as unknown as number } }), 0.5);
  });
});
