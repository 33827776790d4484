// `svc repos add` run as root in the service user's folder: the file is replaced through a temporary file of its own,
// never through a link planted at a name the service user could guess.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { chownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import repos from '../../src/cli/repos.ts';

describe('svc repos add', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-repos-write-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('writes through no link planted at the temporary name it used to take (<file>.<pid>.tmp)', async () => {
    const file = join(dir, 'repos.conf');
    const victim = join(dir, 'victim');
    writeFileSync(victim, 'not yours\n');
    symlinkSync(victim, `${file}.${process.pid}.tmp`);
    let out = '';
    const io = { env: { HOME: dir }, stdout: (t: string) => (out += t), stderr: () => {} };
    const argv = ['add', 'acme/web', 'clone=https://github.com/acme/web.git', '--file', file];
    const code = await repos({ ...io, argv });
    assert.equal(code, 0);
    assert.match(out, /^Added acme\/web clone=https:\/\/github\.com\/acme\/web\.git to /);
    assert.equal(readFileSync(victim, 'utf8'), 'not yours\n');
    assert.ok(lstatSync(file).isFile());
    assert.equal(readFileSync(file, 'utf8'), 'acme/web clone=https://github.com/acme/web.git\n');
  });

  it('as root, gives the new file to the folder\'s owner and leaves no temporary file behind', async (t) => {
    if (process.getuid?.() !== 0) return t.skip('only root can give a file away');
    const owned = join(dir, 'service');
    mkdirSync(owned);
    chownSync(owned, 65534, 65534);
    const file = join(owned, 'repos.conf');
    const io = { env: { HOME: dir }, stdout: () => {}, stderr: () => {} };
    assert.equal(await repos({ ...io, argv: ['add', 'acme/api', 'clone=https://github.com/acme/api.git', '--file', file] }), 0);
    assert.deepEqual([statSync(file).uid, statSync(file).gid], [65534, 65534]);
    assert.deepEqual(readdirSync(owned), ['repos.conf']);
  });
});
