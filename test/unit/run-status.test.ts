// The run statuses have one home on each side (src/run-json.ts, static/lib/run-status.js); the two must agree.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ACTIVE_STATUSES, RUN_STATUSES, TERMINAL, TERMINAL_STATUSES } from '../../src/run-json.ts';

const ui: { RUN_STATUSES: readonly string[]; TERMINAL: ReadonlySet<string> } =
  await import(new URL('../../static/lib/run-status.js', import.meta.url).href);

describe('run statuses', () => {
  it('splits every status into exactly one of terminal and active', () => {
    assert.deepEqual([...ACTIVE_STATUSES, ...TERMINAL_STATUSES].sort(), [...RUN_STATUSES].sort());
    assert.deepEqual([...TERMINAL].sort(), [...TERMINAL_STATUSES].sort());
  });

  it('is the same list in the UI as on the server', () => {
    assert.deepEqual(ui.RUN_STATUSES, RUN_STATUSES);
    assert.deepEqual([...ui.TERMINAL].sort(), [...TERMINAL_STATUSES].sort());
  });
});
