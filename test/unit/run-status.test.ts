// The run statuses have one home on each side (src/run-json.ts, static/lib/run-status.js); the two must agree.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ACTIVE_STATUSES, FAILURE_CLASSES, RUN_STATUSES, TERMINAL, TERMINAL_STATUSES } from '../../src/run-json.ts';

const ui: {
  RUN_STATUSES: readonly string[]; TERMINAL: ReadonlySet<string>; FAILURE_CLASSES: readonly string[];
  failureText(f: unknown): string;
} =
  await import(new URL('../../static/lib/run-status.js', import.meta.url).href);

describe('run statuses', () => {
  it('splits every status into exactly one of terminal and active', () => {
    assert.deepEqual([...ACTIVE_STATUSES, ...TERMINAL_STATUSES].sort(), [...RUN_STATUSES].sort());
    assert.deepEqual([...TERMINAL].sort(), [...TERMINAL_STATUSES].sort());
  });

  it('is the same list in the UI as on the server', () => {
    assert.deepEqual(ui.RUN_STATUSES, RUN_STATUSES);
    assert.deepEqual([...ui.TERMINAL].sort(), [...TERMINAL_STATUSES].sort());
    assert.deepEqual(ui.FAILURE_CLASSES, FAILURE_CLASSES);
  });

  it('shows a failure the UI reads by type alone, and nothing for a malformed one', () => {
    assert.equal(ui.failureText({ class: 'infra', reason: 'the gate died', retryable: true }), 'infra: the gate died');
    for (const odd of [null, 'infra', { class: 'gremlins' }, { class: { toString: () => 'infra' } }, ['infra']]) {
      assert.equal(ui.failureText(odd), '');
    }
  });
});
