// svc's code takes node:http and node:https as CommonJS modules (process.getBuiltinModule), never by an ESM import.
// Such an import makes Node build the module's ESM facade, which reads every export, the lazy fetch and WebSocket ones
// too: that loads Node's bundled undici and node:http2, ~20 ms of CPU at the start of every process whose code imports
// it (a run's launcher and worker, each on a job's way to its agent: docs/bench.md), for code none of them runs.
// Type-only imports are erased and cost nothing.
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

// A value import or re-export (not `import type`), a bare import, or import(), with or without the node: prefix.
const HTTP_IMPORT =
  /(?:^\s*(?:import|export)(?!\s+type\s)[^;'"]*from\s*|^\s*import\s*|import\s*\(\s*)['"](?:node:)?https?['"]/m;

describe('node:http and node:https', () => {
  it('are never imported as ESM modules in src/', () => {
    const files = sourceFiles(SRC);
    assert.ok(files.length > 50, 'the walk found the source tree');
    const offenders = files.filter((f) => HTTP_IMPORT.test(readFileSync(f, 'utf8'))).map((f) => relative(SRC, f));
    assert.deepEqual(offenders, []);
  });

  it('are caught in each form an import takes, and type-only imports are not', () => {
    for (const line of ["import { request } from 'node:http';", "export { get } from 'https';",
      "await import('node:https');", "import 'node:http';", "import'http'"]) {
      assert.match(`// a file\n${line}\n`, HTTP_IMPORT);
    }
    assert.doesNotMatch("import type { Server } from 'node:http';\n", HTTP_IMPORT);
  });

  it('loads no undici when a run\'s worker code is imported', async () => {
    await import('../../src/engine/worker.ts');
    await import('../../src/cli/start.ts');
    const loaded = (process as unknown as { moduleLoadList: string[] }).moduleLoadList;
    assert.deepEqual(loaded.filter((m) => /undici|http2/.test(m)), []);
  });
});
