// The UI's money() (static/lib/format.js) and the CLI's formatUsd (src/cli/runs-format.ts) are one rule in two
// files (the browser's no-build modules cannot import dist/): the same dollars print the same everywhere.
// Also the event log's first status line (static/lib/event-text.js).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { formatUsd } from '../../src/cli/runs-format.ts';

// Imported by URL so the test type-checks without allowJs; the modules are plain browser JS.
const lib = (name: string) => new URL(`../../static/lib/${name}`, import.meta.url).href;
const format: { money(usd: number | null | undefined): string } = await import(lib('format.js'));
const events: { eventText(kind: string, data: unknown): string; logTag(data: unknown): string } =
  await import(lib('event-text.js'));

describe('money (UI) and formatUsd (CLI)', () => {
  it('shows $0.0123 as $0.0123, not $0.01, and keeps cents from a dollar up', () => {
    const cases: Array<[number, string]> = [
      [0.0123, '$0.0123'], [0.004, '$0.004'], [0, '$0.00'], [0.1, '$0.10'], [1.5, '$1.50'], [1234.5678, '$1234.57'],
    ];
    for (const [usd, text] of cases) assert.equal(format.money(usd), text, String(usd));
  });

  it('agrees with the CLI on every amount from a millionth of a dollar to thousands', () => {
    const amounts = [0, -0.0123, 0.000042, 0.0099, 0.01, 0.0105, 0.099, 0.5, 0.999, 0.9999, 1, 9.995, 42.42, 1e6];
    for (let exp = -7; exp <= 4; exp += 0.37) amounts.push(Number((1.2345 * 10 ** exp).toPrecision(6)));
    for (const usd of amounts) assert.equal(format.money(usd), formatUsd(usd), String(usd));
  });

  it('says unknown for a missing cost, never a made-up zero', () => {
    for (const usd of [null, undefined, Number.NaN]) assert.equal(format.money(usd), 'unknown');
  });
});

describe('eventText run.status', () => {
  it('shows the first status without a made-up predecessor', () => {
    assert.equal(events.eventText('run.status', { from: null, to: 'queued' }), 'status queued');
    assert.equal(events.eventText('run.status', { to: 'queued' }), 'status queued');
  });

  it('shows a transition as from → to', () => {
    assert.equal(events.eventText('run.status', { from: 'queued', to: 'running' }), 'status queued → running');
  });
});

describe('eventText cost', () => {
  // A pod's run container's cost line is its agent's word (ingest marks it): the run's cost is its signer's.
  it('says whose report a pod run container\u2019s cost line is', () => {
    const line = { usd: 0.5, tokens_in: 10, tokens_out: 5 };
    assert.equal(events.eventText('cost', line), 'cost $0.50, 10 tokens in / 5 out');
    assert.equal(events.eventText('cost', { ...line, by: 'run-container' }),
      'cost $0.50, 10 tokens in / 5 out (the run container\'s report)');
  });
});

describe('logTag', () => {
  // The tag is what tells svc's own lines from the agent's: a line a pod's agent wrote as stream "receipt", "pr" or
  // "svc" showed that stream as its tag, reading like svc's own "Evidence Receipt written: verified".
  it('shows a stream only for the agent\'s stdout and stderr, and svc only when no run container sent it', () => {
    const cases: Array<[unknown, string]> = [
      [{ stream: 'stdout' }, 'stdout'], [{ stream: 'stderr', by: 'run-container' }, 'stderr'],
      [{ stream: 'svc' }, 'svc'],
      [{ stream: 'svc', by: 'run-container' }, 'log'], [{ stream: 'receipt' }, 'log'], [{ stream: 'pr' }, 'log'],
      [{}, 'log'], [null, 'log'],
    ];
    for (const [data, tag] of cases) assert.equal(events.logTag(data), tag, JSON.stringify(data));
  });
});
