// `svc receipt verify` given a file it cannot use: exit 2, saying why and what to give instead.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runChild } from '../helpers/run-child.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');
const INSTEAD = 'give the receipt.json of a run (.svc/runs/<run>/artifacts/) or a saved PR body';

describe('svc receipt verify with a file it cannot use', () => {
  let home: string;
  const svc = (...args: string[]) =>
    runChild(process.execPath, [CLI, ...args], { cwd: home, env: { PATH: process.env.PATH, HOME: home } });
  before(() => {
    home = mkdtempSync(join(tmpdir(), 'svc-receipt-'));
    mkdirSync(join(home, 'folder.json'));
    writeFileSync(join(home, 'notes.md'), '# no receipt here\n');
  });
  after(() => rmSync(home, { recursive: true, force: true }));

  it('says there is no such file, and exits 2', async () => {
    const missing = await svc('receipt', 'verify', 'nope.json');
    assert.deepEqual([missing.code, missing.stdout], [2, '']);
    assert.equal(missing.stderr, `svc receipt: Cannot read "nope.json": there is no such file; ${INSTEAD}\n`);
  });

  it('says a folder is a folder, and exits 2', async () => {
    const folder = await svc('receipt', 'verify', 'folder.json');
    assert.equal(folder.code, 2);
    assert.equal(folder.stderr, `svc receipt: Cannot read "folder.json": it is a folder, not a file; ${INSTEAD}\n`);
  });

  it('names a --key file it cannot read the same way, and a file holding no receipt, with exit 2', async () => {
    writeFileSync(join(home, 'receipt.json'), '{}');
    const key = await svc('receipt', 'verify', 'receipt.json', '--key', 'gone.pem');
    assert.equal(key.code, 2);
    assert.equal(key.stderr,
      'svc receipt: Cannot read "gone.pem": there is no such file; give a public key PEM file\n');
    const notes = await svc('receipt', 'verify', 'notes.md');
    assert.equal(notes.code, 2);
    assert.equal(notes.stderr, 'svc receipt: "notes.md" is neither receipt JSON nor a PR body with a receipt\n');
  });
});
