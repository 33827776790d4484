// DESIGN §8: src/ is a house of floors (cli → control/trigger → pod → engine → gate → db/http/spawn/client → leaves).
// A module imports only from its own folder or from a floor below, and no set of modules imports itself round.
// Inside control/ and trigger/, the entry files sit above the handlers and routes, which sit above the rest.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

/** Top-level folders by floor, highest first; top-level files (src/*.ts) are the leaves below them all. */
const FLOORS: readonly (readonly string[])[] = [
  ['cli'],
  ['control', 'trigger'],
  ['pod'],
  ['engine'],
  ['gate'],
  ['db', 'http', 'spawn', 'client'],
];

/** Within one folder: files named here sit above its sub-folders, and sub-folders above the folder's other files. */
const INSIDE: Readonly<Record<string, readonly string[]>> = {
  control: ['main.ts', 'app.ts', 'handlers/'],
  trigger: ['main.ts', 'app.ts', 'routes/', 'sources/'],
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : /\.ts$/.test(e.name) ? [join(dir, e.name)] : []);
}

// Static and dynamic imports and re-exports, `import type` included: a circle of types is still a circle.
const IMPORT = /(?:^|\n)\s*(?:import|export)\b[^'";]*?from\s*'(\.[^']+)'|\bimport\(\s*'(\.[^']+)'\s*\)/g;

function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(IMPORT)].map((m) => relative(SRC, resolve(dirname(file), (m[1] ?? m[2])!)));
}

/** A module's place: its floor (0 = top) and, inside control/ and trigger/, its rank in that folder (0 = top). */
function placeOf(path: string): { floor: number; folder: string; rank: number } {
  const top = path === 'cli.ts' ? 'cli' : path.includes('/') ? path.slice(0, path.indexOf('/')) : '';
  const floor = top === '' ? FLOORS.length : FLOORS.findIndex((f) => f.includes(top));
  assert.ok(floor >= 0, `src/${top}/ has no floor in this test: add it to DESIGN §8 and FLOORS`);
  const order = INSIDE[top] ?? [];
  const inner = path.slice(top.length + 1);
  const at = order.findIndex((o) => (o.endsWith('/') ? inner.startsWith(o) : inner === o));
  return { floor, folder: top, rank: at === -1 ? order.length : at };
}

const files = sourceFiles(SRC).map((f) => relative(SRC, f));
const graph = new Map(files.map((f) => [f, importsOf(join(SRC, f))]));

/** Every import that goes up a floor, sideways to another folder on the same floor, or up inside a folder. */
function upwardImports(): string[] {
  const out: string[] = [];
  for (const [from, targets] of graph) {
    const a = placeOf(from);
    for (const to of targets) {
      const b = placeOf(to);
      const sameFolder = a.folder === b.folder;
      if (b.floor < a.floor || (b.floor === a.floor && !sameFolder) || (sameFolder && b.rank < a.rank)) {
        out.push(`${from} → ${to}`);
      }
    }
  }
  return out;
}

/** The import circles: strongly connected sets of more than one module, or a module that imports itself. */
function circles(): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  function visit(v: string): void {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const part: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      part.push(w);
    } while (w !== v);
    if (part.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(part.sort());
  }
  for (const f of files) if (!index.has(f)) visit(f);
  return found;
}

describe('the floors of src/', () => {
  it('reads the whole source tree and resolves every relative import to a file in it', () => {
    assert.ok(files.length > 100, 'the walk found the source tree');
    const missing = [...graph].flatMap(([from, to]) => to.filter((t) => !graph.has(t)).map((t) => `${from} → ${t}`));
    assert.deepEqual(missing, []);
  });

  it('has no import that goes up a floor or sideways to another folder of the same floor', () => {
    assert.deepEqual(upwardImports(), []);
  });

  it('has no import circle', () => {
    assert.deepEqual(circles(), []);
  });

  it('would catch an import up a floor and a circle (the checks themselves can fail)', () => {
    assert.ok(placeOf('db/open.ts').floor > placeOf('control/app.ts').floor);
    assert.ok(placeOf('control/handlers/runs.ts').rank < placeOf('control/params.ts').rank);
    assert.ok(placeOf('control/app.ts').rank < placeOf('control/handlers/runs.ts').rank);
    const saved = graph.get('log.ts')!;
    graph.set('log.ts', [...saved, 'cli.ts']);
    try {
      assert.ok(upwardImports().includes('log.ts → cli.ts'));
      assert.ok(circles().some((c) => c.includes('log.ts') && c.includes('cli.ts')));
    } finally {
      graph.set('log.ts', saved);
    }
  });
});
