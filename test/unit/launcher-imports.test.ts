// `svc start`'s launcher and its run's worker load what a plain start runs: each module is ~1 ms of CPU on every
// run's way to its agent (docs/bench.md, "the launcher's modules"). A follow-up's module, and the receipt and key
// modules it brings, load only for a follow-up; the egress gate's only for a sandboxed run, its forwarding after the
// agent's spawn.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** Every module a fresh process loads to import `entry`. */
function modulesLoadedBy(entry: string): string[] {
  const script = [
    "import { registerHooks } from 'node:module';",
    'const seen = [];',
    'registerHooks({ load(url, context, next) { seen.push(url); return next(url, context); } });',
    `await import(${JSON.stringify(entry)});`,
    'console.log(JSON.stringify(seen));',
  ].join('\n');
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  return JSON.parse(out) as string[];
}

describe("svc start's launcher", () => {
  it('loads no follow-up, receipt or key module for a plain start', () => {
    const loaded = modulesLoadedBy(fileURLToPath(new URL('../../src/cli/start.ts', import.meta.url)));
    assert.ok(loaded.some((url) => url.endsWith('/src/engine/launch.ts')), 'the launcher itself was loaded');
    const rare = loaded.filter((url) => /\/src\/(engine\/follow-up|engine\/receipt|keys)\.ts$/.test(url));
    assert.deepEqual(rare, []);
  });

  it('loads no node:dns: the gate policy it checks resolves names only in the gate, at its first lookup', () => {
    const loaded = modulesLoadedBy(fileURLToPath(new URL('../../src/cli/start.ts', import.meta.url)));
    assert.ok(loaded.includes('node:fs'), 'the hook sees Node\'s own modules');
    assert.deepEqual(loaded.filter((url) => /^node:dns/.test(url)), []);
  });
});

describe("a run's worker", () => {
  it('loads no egress gate module before it knows the run is sandboxed: an unsandboxed run opens no gate', () => {
    const loaded = modulesLoadedBy(fileURLToPath(new URL('../../src/engine/worker.ts', import.meta.url)));
    assert.ok(loaded.some((url) => url.endsWith('/src/engine/worker.ts')), 'the worker itself was loaded');
    // Its plan's host patterns and its budget pause need these three, which serve nothing.
    const served = /\/src\/(engine\/egress|gate\/(?!(budgets|policy|address)\.ts$)[^/]+)\.ts$/;
    const gate = loaded.filter((url) => served.test(url));
    assert.deepEqual(gate, []);
  });

  it("opens its gate without the forwarding and tunnel modules, which load after the agent's spawn", () => {
    const loaded = modulesLoadedBy(fileURLToPath(new URL('../../src/engine/egress.ts', import.meta.url)));
    assert.ok(loaded.some((url) => url.endsWith('/src/gate/gate.ts')), 'the gate itself was loaded');
    const later = loaded.filter((url) => /\/src\/gate\/(forward|tunnel|usage)\.ts$|^node:(tls|zlib)$/.test(url));
    assert.deepEqual(later, []);
  });
});
