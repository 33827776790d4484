// House style: lines stay within 120 columns, in src/, static/ (the UI) and scripts/, with no exceptions; in test/ too,
// where the lines written before this test covered it are held to their count until they are mended.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));
const STATIC = fileURLToPath(new URL('../../static/', import.meta.url));
const TEST = fileURLToPath(new URL('../', import.meta.url));
const SCRIPTS = fileURLToPath(new URL('../../scripts/', import.meta.url));
const MAX = 120;
/** test/'s lines over MAX on 2026-11-30, when this test first read test/: lower it as they are mended, never raise. */
const TEST_LONG_LINES = 1526;

function filesUnder(dir: string, keep: (name: string) => boolean): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(dir, e.name), keep) : keep(e.name) ? [join(dir, e.name)] : []);
}

/** `file:line: N columns` for every line longer than MAX (counted in characters, not bytes). */
function longLines(root: string, files: readonly string[]): string[] {
  const off: string[] = [];
  for (const file of files) {
    readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
      const columns = [...line].length;
      if (columns > MAX) off.push(`${relative(root, file)}:${i + 1}: ${columns} columns`);
    });
  }
  return off;
}

describe('line length', () => {
  it(`keeps every line in src/ within ${MAX} columns`, () => {
    const files = filesUnder(SRC, (name) => name.endsWith('.ts'));
    assert.ok(files.length > 100, 'the walk found the source tree');
    assert.deepEqual(longLines(SRC, files), []);
  });

  it(`keeps every line of the UI (js, css, html, svg) within ${MAX} columns`, () => {
    const files = filesUnder(STATIC, (name) => /\.(js|css|html|svg)$/.test(name));
    assert.ok(files.some((f) => f.endsWith('index.html')) && files.length > 40, 'the walk found the UI');
    assert.deepEqual(longLines(STATIC, files), []);
  });

  it(`keeps every line of scripts/ (the build, tests, bench and deploy files) within ${MAX} columns`, () => {
    const files = filesUnder(SCRIPTS, (name) => /\.(js|mjs|ts|sh|py|yaml|service)$|^Containerfile/.test(name));
    assert.ok(files.some((f) => f.endsWith('test.js')) && files.some((f) => f.endsWith('Containerfile')) &&
      files.length > 40, 'the walk found scripts/');
    assert.deepEqual(longLines(SCRIPTS, files), []);
  });

  it(`adds no line over ${MAX} columns to test/`, () => {
    const files = filesUnder(TEST, (name) => /\.(ts|js|mjs)$/.test(name));
    assert.ok(files.some((f) => f.endsWith('line-length.test.ts')) && files.length > 100, 'the walk found test/');
    const long = longLines(TEST, files);
    assert.ok(long.length <= TEST_LONG_LINES, `${long.length} lines over ${MAX} columns in test/ (at most ` +
      `${TEST_LONG_LINES}, the count before this test read test/: wrap the new ones)`);
  });

  it('counts a line over the limit and not one at it, in characters', () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-lines-'));
    try {
      const file = join(dir, 'sample.ts');
      writeFileSync(file, `${'x'.repeat(MAX)}\n${'y'.repeat(MAX + 1)}\n${'é'.repeat(MAX)}\n`);
      assert.deepEqual(longLines(dir, [file]), [`sample.ts:2: ${MAX + 1} columns`]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
