// DESIGN §7a: every child svc starts goes through the one spawn policy, so only src/spawn/start.ts may import
// node:child_process.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : /\.[cm]?[jt]s$/.test(e.name) ? [join(dir, e.name)] : []);
}

// Any way of naming the module: import/export from, import(), require(), with or without the node: prefix.
const CHILD_PROCESS = /(?:from\s*|import\s*\(\s*|require\s*\(\s*)['"](?:node:)?child_process['"]/;

describe('the one spawn policy', () => {
  it('is the only place in src/ that imports node:child_process', () => {
    const files = sourceFiles(SRC);
    assert.ok(files.length > 50, 'the walk found the source tree');
    const offenders = files.filter((f) => CHILD_PROCESS.test(readFileSync(f, 'utf8'))).map((f) => relative(SRC, f));
    assert.deepEqual(offenders, ['spawn/start.ts']);
  });
});
