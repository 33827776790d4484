import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  checkArtifactPath, parseLimit, parseWindow, runParams,
} from '../../src/control/params.ts';
import { iso, timeMs } from '../../src/iso-time.ts';
import { runToJson } from '../../src/db/runs-store.ts';
import { decodeCursor, encodeCursor } from '../../src/control/params.ts';
import { HttpError } from '../../src/http/http-error.ts';

function code(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof HttpError ? err.code : 'other';
  }
  return undefined;
}

describe('params', () => {
  it('defaults limit to 50, clamps above 500 and rejects non-positive integers', () => {
    assert.equal(parseLimit(null), 50);
    assert.equal(parseLimit('7'), 7);
    assert.equal(parseLimit('9999'), 500);
    for (const bad of ['0', '-1', '1.5', '', 'ten', '1e3']) assert.equal(code(() => parseLimit(bad)), 'invalid_param', bad);
  });

  it('parses ISO-8601 and unix milliseconds and rejects anything else', () => {
    const since = (value: string) => parseWindow(new URLSearchParams({ since: value })).since;
    assert.equal(since('2026-01-01T00:00:00Z'), Date.UTC(2026, 0, 1));
    assert.equal(since('2026-01-01'), Date.UTC(2026, 0, 1));
    assert.equal(since('1767225600000'), 1767225600000);
    for (const bad of ['yesterday', '2026-02-30T99:00Z', '99999999999999999', 'Tue, 01 Jan 2026']) {
      assert.equal(code(() => since(bad)), 'invalid_param', bad);
    }
  });

  it('reads and formats each time as its own, the same one repeated or not (the last one is remembered)', () => {
    const texts = ['2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 'yesterday', 'yesterday', '1767225600001', '',
      '2026-01-01T00:00:00Z', 'yesterday', 12, 12.5];
    const read = texts.map((text) => timeMs(text));
    const day = 1767225600000;
    assert.deepEqual(read, [day, day, null, null, day + 1, null, day, null, 12, null]);
    const times = [0, 0, 1767225600001, 1767225600001, 0, -1];
    assert.deepEqual(times.map((ms) => iso(ms)), times.map((ms) => new Date(ms).toISOString()));
    assert.throws(() => iso(8.64e15 + 1), RangeError);
    assert.equal(iso(-1), '1969-12-31T23:59:59.999Z');
    assert.equal(iso(null), null);
  });

  it('checks source and run segments', () => {
    assert.deepEqual(runParams({ params: { source: 'local', run: 'r01.a_b-c' } }), { source: 'local', run: 'r01.a_b-c' });
    for (const bad of ['', '.hidden', '-x', 'a/b', 'x'.repeat(129)]) {
      assert.equal(code(() => runParams({ params: { source: 'local', run: bad } })), 'invalid_param', bad);
    }
  });

  it('accepts relative artifact paths and rejects traversal, absolute, NUL and backslash', () => {
    assert.equal(checkArtifactPath('checks/unit.log'), 'checks/unit.log');
    for (const bad of ['../x', 'a/../b', '/etc/passwd', 'a\\b', 'a\0b', 'a//b', './a', 'C:x', '']) {
      assert.equal(code(() => checkArtifactPath(bad)), 'invalid_param', JSON.stringify(bad));
    }
  });

  it('round-trips a run cursor and refuses one it did not make', () => {
    const RUN_KEY = ['int', 'segment', 'segment'] as const;
    const decodeRunCursor = (text: string) => decodeCursor(text, RUN_KEY);
    assert.deepEqual(decodeRunCursor(encodeCursor([123, 'local', 'r1'])), [123, 'local', 'r1']);
    for (const bad of ['x', Buffer.from('{"a":1}').toString('base64url'), Buffer.from('[1.5,"a","b"]').toString('base64url'), 'a+b']) {
      assert.equal(code(() => decodeRunCursor(bad)), 'invalid_param', bad);
    }
  });

  it('renders Run JSON with ISO times and without internal fields', () => {
    const json = runToJson({
      source: 's', run: 'r', repo: null, repo_path: '/x', group_id: 'r', status: 'queued', verdict: null, brief: null, origin: null,
      provider: null, branch: null, pr_url: null, question: null, started_at: 0, ended_at: null, updated_at: 0, cost_usd: null,
      tokens_in: null, tokens_out: null, exit_code: null, error: null, pid: 1, extra: '{}',
      failure_class: null, failure_reason: null, failure_retryable: null, reported: null, metered: null,
    });
    assert.equal(json.started_at, '1970-01-01T00:00:00.000Z');
    assert.equal('repo_path' in json || 'pid' in json || 'extra' in json, false);
  });
});
