// House style: lines in src/ stay within 120 columns. The files that still hold longer lines (from before this test)
// have a budget in long-lines-budget.json that may only go down: a file over its budget fails, a file under it fails
// until the budget is lowered, and a file without one may hold none.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));
const MAX = 120;
const budget = JSON.parse(readFileSync(new URL('./long-lines-budget.json', import.meta.url), 'utf8')) as Record<string, number>;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []);
}

function longLines(text: string): number {
  return text.split('\n').filter((line) => [...line].length > MAX).length;
}

describe('line length in src/', () => {
  it(`keeps every line within ${MAX} columns, apart from the budget that only shrinks`, () => {
    const files = sourceFiles(SRC);
    assert.ok(files.length > 100, 'the walk found the source tree');
    const off: string[] = [];
    const seen = new Set<string>();
    for (const file of files) {
      const name = relative(SRC, file);
      seen.add(name);
      const found = longLines(readFileSync(file, 'utf8'));
      const allowed = budget[name] ?? 0;
      if (found !== allowed) off.push(`${name}: ${found} lines over ${MAX} columns, budget ${allowed}`);
    }
    for (const name of Object.keys(budget)) if (!seen.has(name)) off.push(`${name}: in the budget but gone`);
    assert.deepEqual(off, []);
  });

  it('counts a line over the limit and not one at it', () => {
    assert.equal(longLines(`${'x'.repeat(MAX)}\n${'y'.repeat(MAX + 1)}`), 1);
  });
});
