import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { fastIso, runTupleJson } from '../../src/db/run-json-text.ts';
import { pageFrame } from '../../src/control/runs-page-frame.ts';
import { encodeRunCursor } from '../../src/control/run-cursor.ts';
import { runToJson } from '../../src/db/run-row-json.ts';
import { PUBLIC_RUN_COLUMNS, type RunRow } from '../../src/db/run-types.ts';

/** A deterministic generator (mulberry32), so a failure names a reproducible row. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ODD_STRINGS = ['', 'plain', 'ünïcødé ✓ 日本', 'quote " and \\ backslash', 'ctrl \u0000\u0001\u001f\b\f\n\r\t', '\u2028\u2029', '😀 astral', 'lone \ud800 high', 'lone \udc00 low', '</script>'];
const ODD_TIMES = [0, 1, 999, 1000, 86_399_999, 86_400_000, Date.UTC(2026, 1, 28, 23, 59, 59, 999), Date.UTC(2024, 1, 29, 12), 253_402_300_799_999, 253_402_300_800_000, -1, -86_400_001, 8.64e15, -8.64e15, 1.5];
const ODD_NUMBERS = [0, -0, 1, -1, 0.1 + 0.2, 1e21, 1e-7, 123456789.123, Number.MAX_SAFE_INTEGER, Infinity, -Infinity, Number.NaN];

function rowFrom(values: Record<string, unknown>): RunRow {
  return { repo_path: '/secret', pid: 7, extra: '{}', ...values } as unknown as RunRow;
}

function tupleOf(row: RunRow): unknown[] {
  return PUBLIC_RUN_COLUMNS.map((c) => (row as unknown as Record<string, unknown>)[c]);
}

function makeRow(next: () => number): RunRow {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)]!;
  const maybe = <T>(v: T): T | null => (next() < 0.3 ? null : v);
  const time = (): number => (next() < 0.3 ? pick(ODD_TIMES) : Math.floor(next() * 4e12));
  return rowFrom({
    source: pick(['local', 'ci', 'laptop-2']), run: `r${Math.floor(next() * 1e6)}`, repo: maybe(pick(ODD_STRINGS)),
    group_id: pick(ODD_STRINGS), status: pick(['queued', 'running', 'failed']), verdict: maybe('verified'),
    brief: maybe(pick(ODD_STRINGS)), origin: maybe(pick(ODD_STRINGS)), provider: maybe('claude'), branch: maybe(pick(ODD_STRINGS)),
    pr_url: maybe('https://example.test/pr/1'), question: maybe(pick(ODD_STRINGS)), started_at: time(), ended_at: maybe(time()),
    updated_at: time(), cost_usd: maybe(next() < 0.5 ? pick(ODD_NUMBERS) : next() * 10), tokens_in: maybe(Math.floor(next() * 1e7)),
    tokens_out: maybe(pick(ODD_NUMBERS)), exit_code: maybe(pick([0, 1, 137, -1])), error: maybe(pick(ODD_STRINGS)),
  });
}

describe('run JSON text', () => {
  it('formats every time the way Date.prototype.toISOString does, including day edges and out-of-range years', () => {
    const next = random(1);
    const times = [...ODD_TIMES, ...Array.from({ length: 20_000 }, () => Math.floor(next() * 253_402_300_800_000))];
    for (const ms of times) assert.equal(fastIso(ms), new Date(ms).toISOString(), `ms=${ms}`);
  });

  it('throws the same RangeError as toISOString for a time a Date cannot hold', () => {
    assert.throws(() => fastIso(8.64e15 + 1), RangeError);
    assert.throws(() => fastIso(Number.NaN), RangeError);
  });

  it('writes each run byte-for-byte as JSON.stringify(runToJson(row)) over thousands of odd rows', () => {
    const next = random(42);
    for (let i = 0; i < 5000; i++) {
      const row = makeRow(next);
      let expected: string;
      try {
        expected = JSON.stringify(runToJson(row));
      } catch (err) {
        assert.throws(() => runTupleJson(tupleOf(row)), (err as Error).constructor as new () => Error, `row ${i}`);
        continue;
      }
      assert.equal(runTupleJson(tupleOf(row)), expected, `row ${i}: ${JSON.stringify(tupleOf(row))}`);
    }
  });

  it('writes a whole page as JSON.stringify({ items, next_cursor }) with and without a cursor', () => {
    const next = random(7);
    const rows = Array.from({ length: 50 }, () => makeRow(next)).filter((r) => r.started_at < 8.64e15 && r.started_at > -8.64e15);
    const safe = rows.filter((r) => {
      try {
        JSON.stringify(runToJson(r));
        return true;
      } catch {
        return false;
      }
    });
    const page = (rows: typeof safe, next: Parameters<typeof pageFrame>[0]): string => {
      const { open, close } = pageFrame(next);
      return open + rows.map((r) => runTupleJson(tupleOf(r))).join(',') + close;
    };
    const key = { started_at: 1, source: 'a', run: 'b' };
    assert.equal(page(safe, null), JSON.stringify({ items: safe.map(runToJson), next_cursor: null }));
    assert.equal(page(safe, key), JSON.stringify({ items: safe.map(runToJson), next_cursor: encodeRunCursor(key) }));
    assert.equal(page([], null), JSON.stringify({ items: [], next_cursor: null }));
  });

  it('never writes the internal columns repo_path, pid or extra', () => {
    const nulls = Object.fromEntries(PUBLIC_RUN_COLUMNS.map((c) => [c, null]));
    const text = runTupleJson(tupleOf(rowFrom({ ...nulls, source: 's', run: 'r', started_at: 0, updated_at: 0, repo_path: '/secret', pid: 4242 })));
    assert.doesNotMatch(text, /secret|4242|repo_path|"pid"|"extra"/);
  });
});
