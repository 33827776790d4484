// Node's compile cache holds code svc runs: it is used only in folders svc's user alone can write (docs/engine.md
// "Node's compile cache"); anything doubtful turns it off without failing the command.
import { afterEach, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compileCacheDir } from '../../src/cli/node-setup.ts';
import { runChild } from '../helpers/run-child.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');
const root = process.getuid?.() === 0;

describe('the compile cache folder', () => {
  let home = '';
  let elsewhere = '';
  beforeEach(() => {
    home = mkdtempSync(join(tmpdir(), 'svc-compile-cache-'));
    elsewhere = mkdtempSync(join(tmpdir(), 'svc-compile-cache-elsewhere-'));
  });
  afterEach(() => {
    rmSync(home, { recursive: true, force: true });
    rmSync(elsewhere, { recursive: true, force: true });
  });

  it("is ~/.svc/compile-cache/svc-<version>, each folder made 0700", () => {
    const dir = compileCacheDir({ HOME: home }, '1.2.3');
    assert.equal(dir, join(home, '.svc', 'compile-cache', 'svc-1.2.3'));
    for (const folder of [join(home, '.svc'), join(home, '.svc', 'compile-cache'), dir]) {
      assert.equal(statSync(folder).mode & 0o777, 0o700, folder);
    }
    assert.equal(compileCacheDir({ HOME: home }, '1.2.3'), dir, 'found again as it was made');
  });

  it('is off, and nothing is made, when SVC_COMPILE_CACHE is 0; another value than 1 or 0 is refused', () => {
    assert.equal(compileCacheDir({ HOME: home, SVC_COMPILE_CACHE: '0' }, '1.2.3'), null);
    for (const value of ['false', 'off', 'no', 'true']) {
      assert.throws(() => compileCacheDir({ HOME: home, SVC_COMPILE_CACHE: value }, '1.2.3'),
        { name: 'BadSettingError', message: `SVC_COMPILE_CACHE must be "1" or "0" (got "${value}")` });
    }
    assert.equal(existsSync(join(home, '.svc')), false);
    assert.equal(compileCacheDir({ HOME: home, SVC_COMPILE_CACHE: '' }, '1.2.3'), join(home, '.svc', 'compile-cache',
      'svc-1.2.3'), 'empty is unset, as for every setting');
  });

  it('is off, and nothing is made behind the link, when ~/.svc is a link', () => {
    chmodSync(elsewhere, 0o700);
    symlinkSync(elsewhere, join(home, '.svc'));
    assert.equal(compileCacheDir({ HOME: home }, '1.2.3'), null);
    assert.deepEqual(readdirSync(elsewhere), []);
  });

  it("is off when the cache's own folder or the version's is a link", () => {
    mkdirSync(join(home, '.svc'), { mode: 0o700 });
    chmodSync(elsewhere, 0o700);
    symlinkSync(elsewhere, join(home, '.svc', 'compile-cache'));
    assert.equal(compileCacheDir({ HOME: home }, '1.2.3'), null);
    unlinkSync(join(home, '.svc', 'compile-cache'));
    mkdirSync(join(home, '.svc', 'compile-cache'), { mode: 0o700 });
    symlinkSync(elsewhere, join(home, '.svc', 'compile-cache', 'svc-1.2.3'));
    assert.equal(compileCacheDir({ HOME: home }, '1.2.3'), null);
  });

  it('is off when a folder on its way is writable by its group or by others', () => {
    assert.ok(compileCacheDir({ HOME: home }, '1.2.3'));
    chmodSync(join(home, '.svc', 'compile-cache'), 0o770);
    assert.equal(compileCacheDir({ HOME: home }, '1.2.3'), null);
    chmodSync(join(home, '.svc', 'compile-cache'), 0o700);
    chmodSync(join(home, '.svc', 'compile-cache', 'svc-1.2.3'), 0o707);
    assert.equal(compileCacheDir({ HOME: home }, '1.2.3'), null);
    chmodSync(join(home, '.svc', 'compile-cache', 'svc-1.2.3'), 0o700);
    chmodSync(home, 0o777);
    assert.equal(compileCacheDir({ HOME: home }, '1.2.3'), null, 'a world-writable HOME');
  });

  it("is off when a folder on its way is another user's", { skip: root ? false : 'chown needs root' }, () => {
    mkdirSync(join(home, '.svc'), { mode: 0o700 });
    chownSync(join(home, '.svc'), 65534, 65534);
    assert.equal(compileCacheDir({ HOME: home }, '1.2.3'), null);
  });

  it("is off when the version's folder is a file", () => {
    mkdirSync(join(home, '.svc', 'compile-cache'), { recursive: true, mode: 0o700 });
    writeFileSync(join(home, '.svc', 'compile-cache', 'svc-1.2.3'), '', { mode: 0o700 });
    assert.equal(compileCacheDir({ HOME: home }, '1.2.3'), null);
  });

  it('is off when HOME is missing, relative or inside a git repository', () => {
    assert.equal(compileCacheDir({ HOME: join(home, 'missing') }, '1.2.3'), null);
    // A relative HOME names a private folder here (outside any repository), yet no cache is made from it.
    const cwd = process.cwd();
    mkdirSync(join(home, 'relative', 'home'), { recursive: true, mode: 0o700 });
    process.chdir(home);
    try {
      assert.equal(compileCacheDir({ HOME: 'relative/home' }, '1.2.3'), null);
    } finally {
      process.chdir(cwd);
    }
    assert.equal(existsSync(join(home, 'relative', 'home', '.svc')), false);
    mkdirSync(join(home, '.git'));
    assert.equal(compileCacheDir({ HOME: home }, '1.2.3'), null);
    assert.equal(existsSync(join(home, '.svc')), false);
  });

  it('is off when a link on the way to HOME leads into a git repository', () => {
    mkdirSync(join(elsewhere, 'repo', '.git'), { recursive: true });
    mkdirSync(join(elsewhere, 'repo', 'users', 'me'), { recursive: true, mode: 0o700 });
    symlinkSync(join(elsewhere, 'repo', 'users'), join(home, 'users'));
    assert.equal(compileCacheDir({ HOME: join(home, 'users', 'me') }, '1.2.3'), null);
    assert.equal(existsSync(join(elsewhere, 'repo', 'users', 'me', '.svc')), false);
  });

  it('is off for a version that is not a plain version string', () => {
    assert.equal(compileCacheDir({ HOME: home }, '../1.2.3'), null);
    assert.equal(compileCacheDir({ HOME: home }, ''), null);
  });

  it("is where a command's modules are cached, and a link there leaves the command working and the cache off",
    async () => {
      const env = { PATH: process.env.PATH, HOME: home, SVC_CONTROL_URL: 'http://127.0.0.1:9' };
      const first = await runChild(process.execPath, [CLI, 'start', '--help'], { cwd: home, env });
      assert.equal(first.code, 0, first.stderr);
      const cache = join(home, '.svc', 'compile-cache');
      const [version] = readdirSync(cache);
      assert.match(version ?? '', /^svc-/);
      assert.ok(readdirSync(join(cache, version!)).length > 0, 'Node wrote its cache for this Node');

      rmSync(cache, { recursive: true });
      chmodSync(elsewhere, 0o700);
      symlinkSync(elsewhere, cache);
      const linked = await runChild(process.execPath, [CLI, 'start', '--help'], { cwd: home, env });
      assert.deepEqual([linked.code, linked.stdout, linked.stderr], [0, first.stdout, first.stderr]);
      assert.deepEqual(readdirSync(elsewhere), []);
    });

  it('leaves a NODE_COMPILE_CACHE svc was started with in use, making nothing under ~/.svc', async () => {
    const nodeCache = join(elsewhere, 'node-cache');
    const env = { PATH: process.env.PATH, HOME: home, SVC_CONTROL_URL: 'http://127.0.0.1:9',
      NODE_COMPILE_CACHE: nodeCache };
    const run = await runChild(process.execPath, [CLI, 'start', '--help'], { cwd: home, env });
    assert.equal(run.code, 0, run.stderr);
    assert.ok(readdirSync(nodeCache).length > 0, "Node's own cache, which svc cannot turn off");
    assert.equal(existsSync(join(home, '.svc', 'compile-cache')), false);
  });

  it('stops a command on a value of SVC_COMPILE_CACHE other than 1 or 0, as every setting does', async () => {
    const env = { PATH: process.env.PATH, HOME: home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_COMPILE_CACHE: 'off' };
    const run = await runChild(process.execPath, [CLI, 'start', '--help'], { cwd: home, env });
    assert.deepEqual([run.code, run.stdout, run.stderr],
      [2, '', 'svc start: SVC_COMPILE_CACHE must be "1" or "0" (got "off")\n']);
    assert.equal(existsSync(join(home, '.svc', 'compile-cache')), false);
  });
});
