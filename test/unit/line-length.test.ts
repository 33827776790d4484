// House style: lines stay within 120 columns. In src/, the files that still hold longer lines (from before this test)
// have a budget in long-lines-budget.json that may only go down: a file over its budget fails, a file under it fails
// until the budget is lowered, and a file without one may hold none. static/ (the UI) has no budget: no line may pass.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));
const STATIC = fileURLToPath(new URL('../../static/', import.meta.url));
const MAX = 120;
const budgetFile = new URL('./long-lines-budget.json', import.meta.url);
const budget = JSON.parse(readFileSync(budgetFile, 'utf8')) as Record<string, number>;

function filesUnder(dir: string, keep: (name: string) => boolean): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(dir, e.name), keep) : keep(e.name) ? [join(dir, e.name)] : []);
}

function longLines(text: string): number {
  return text.split('\n').filter((line) => [...line].length > MAX).length;
}

describe('line length in src/', () => {
  it(`keeps every line within ${MAX} columns, apart from the budget that only shrinks`, () => {
    const files = filesUnder(SRC, (name) => name.endsWith('.ts'));
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

describe('line length in static/', () => {
  it(`keeps every line of the UI (js, css, html, svg) within ${MAX} columns, with no budget`, () => {
    const files = filesUnder(STATIC, (name) => /\.(js|css|html|svg)$/.test(name));
    assert.ok(files.some((f) => f.endsWith('index.html')) && files.length > 40, 'the walk found the UI');
    const off: string[] = [];
    for (const file of files) {
      const lines = readFileSync(file, 'utf8').split('\n');
      lines.forEach((line, i) => {
        if ([...line].length > MAX) off.push(`${relative(STATIC, file)}:${i + 1}: ${[...line].length} columns`);
      });
    }
    assert.deepEqual(off, []);
  });
});
