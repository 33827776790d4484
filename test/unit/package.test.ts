import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

describe('package.json', () => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as Record<string, unknown>;

  it('has no runtime dependencies', () => {
    assert.equal(pkg.dependencies, undefined);
    assert.equal(pkg.optionalDependencies, undefined);
    assert.equal(pkg.peerDependencies, undefined);
  });

  it('keeps devDependencies to the toolchain', () => {
    // kubernetes-models and yaml are test-only: the Kubernetes schema checks (test/unit/k8s-schemas.test.ts);
    // @modelcontextprotocol/sdk and /client too: the official MCP clients test/http/mcp*.test.ts connect with (v1 for
    // revision 2025-11-25, v2 for 2026-07-28).
    const allowed = new Set(['typescript', '@types/node', 'node', 'playwright-core', 'kubernetes-models', 'yaml',
      '@modelcontextprotocol/sdk', '@modelcontextprotocol/client']);
    for (const name of Object.keys(pkg.devDependencies as object)) assert.ok(allowed.has(name), `unexpected devDependency ${name}`);
  });

  it('maps the svc binary to dist/cli.js', () => {
    assert.deepEqual(pkg.bin, { svc: 'dist/cli.js' });
  });
});
