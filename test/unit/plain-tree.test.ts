import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listPlain, openPlainPath, readPlainIn, walkPlainTree, type PlainDir } from '../../src/engine/plain-tree.ts';
import { makePlainPath, openRunDir, UnsafePathError } from '../../src/engine/safe-fs.ts';
import { readEngineConfigFile } from '../../src/engine/config.ts';

describe('plain-tree', () => {
  let root: string;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'svc-plain-'));
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('keeps reading the folder it opened after that folder is swapped for a link', () => {
    mkdirSync(join(root, 'a', 'run'), { recursive: true });
    writeFileSync(join(root, 'a', 'run', 'f.txt'), 'own');
    mkdirSync(join(root, 'secret'));
    writeFileSync(join(root, 'secret', 'f.txt'), 'SECRET');
    const dir = openPlainPath(root, ['a', 'run']) as PlainDir;
    assert.ok(!('failed' in dir));
    try {
      // The race an attacker runs between two steps of a path walk: the opened folder moves, a link takes its name.
      renameSync(join(root, 'a', 'run'), join(root, 'a', 'moved'));
      symlinkSync(join(root, 'secret'), join(root, 'a', 'run'));
      assert.equal((readPlainIn(dir, 'f.txt', 100) as Buffer).toString(), 'own');
      assert.deepEqual(listPlain(dir), [{ name: 'f.txt', kind: 'file' }]);
    } finally {
      dir.close();
    }
    assert.deepEqual(openPlainPath(root, ['a', 'run']), { failed: join(root, 'a', 'run'), kind: 'link' });
  });

  it('reports links, folders too deep and files too large instead of reading them', () => {
    const tree = join(root, 'tree');
    mkdirSync(join(tree, 'a', 'b', 'c'), { recursive: true });
    writeFileSync(join(tree, 'a', 'b', 'c', 'deep.txt'), 'x');
    writeFileSync(join(tree, 'big.bin'), Buffer.alloc(11));
    writeFileSync(join(tree, 'ok.txt'), 'ok');
    symlinkSync(join(tree, 'ok.txt'), join(tree, 'link.txt'));
    const dir = openPlainPath(tree, []) as PlainDir;
    const skipped: string[] = [];
    try {
      const files: string[] = [];
      const skip = (rel: string, why: string) => skipped.push(`${rel} ${why}`);
      walkPlainTree(dir, { maxFile: 10, maxDepth: 2, skip }, (f) => files.push(f.rel));
      assert.deepEqual(files, ['ok.txt']);
    } finally {
      dir.close();
    }
    assert.deepEqual(skipped, [
      'a/b/c is more than 2 folders deep',
      'big.bin is larger than 10 bytes',
      'link.txt is a symbolic link (never followed)',
    ]);
  });
});

describe('safe-fs folders', () => {
  it('refuses a missing run folder and a link on the way, and makes plain levels as needed', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-safe-fs-'));
    try {
      const gone = join(root, 'gone');
      assert.throws(() => openRunDir(gone), new UnsafePathError(`Run folder "${gone}" is missing (ENOENT)`));
      symlinkSync(tmpdir(), join(root, 'link'));
      assert.throws(() => makePlainPath(root, ['link', 'x']), new UnsafePathError(
        `Refusing to write into "${join(root, 'link')}": it is a symbolic link, not a plain directory`));
      const made = makePlainPath(root, ['a', 'b']);
      made.close();
      assert.equal(made.path, join(root, 'a', 'b'));
      const run = openRunDir(join(root, 'a', 'b'));
      run.close();
      assert.equal(run.path, join(root, 'a', 'b'));
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('a repository\'s .svc/config.json', () => {
  it('is read as policy.json is: a committed link to a host file holding a config is refused, not followed', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-config-link-'));
    try {
      const host = join(root, 'operator.json');
      writeFileSync(host, JSON.stringify({ providers: { x: { kind: 'command', argv: ['/bin/true'] } } }));
      mkdirSync(join(root, 'repo', '.svc'), { recursive: true });
      symlinkSync(host, join(root, 'repo', '.svc', 'config.json'));
      assert.throws(() => readEngineConfigFile(join(root, 'repo')), {
        code: 'bad_setting', message: '.svc/config.json is a symbolic link (never followed)',
      });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
