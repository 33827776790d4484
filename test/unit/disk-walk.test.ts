// The disk watchdog's walk of a run's worktree (treeBytes, src/spawn/limits.ts): it hands the worker's event loop
// back while it walks (the run's egress gate runs there), counts what it always counted, and follows no link an agent
// swaps in for a folder.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync, linkSync, mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, truncateSync, writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { treeBytes } from '../../src/spawn/limits.ts';

const scratch = mkdtempSync(join(tmpdir(), 'svc-disk-walk-'));
after(() => {
  spawnSync('chmod', ['-R', 'u+rwx', scratch]);
  rmSync(scratch, { recursive: true, force: true });
});

/** Turns of the event loop while `walk` runs: a self-renewing setImmediate counts one per turn. */
async function turnsDuring(walk: () => Promise<number>): Promise<number> {
  let turns = 0;
  let walking = true;
  const count = (): void => {
    turns++;
    if (walking) setImmediate(count);
  };
  setImmediate(count);
  await walk();
  walking = false;
  return turns;
}

describe('the disk watchdog\'s walk', () => {
  it('hands the event loop back while it opens many empty folders, not only while it lists entries', async () => {
    const root = join(scratch, 'empty');
    const folders = 20_000;
    for (let i = 0; i < folders; i++) mkdirSync(join(root, 'wide', `d${i}`), { recursive: true });
    const turns = await turnsDuring(() => treeBytes(root, Infinity));
    // A turn per 256 entries listed and per 256 folders opened: 78 + 78. Counting entries alone gave 78, all while
    // the wide folder was listed, and then opened its 20,000 empty folders in one stretch.
    assert.ok(turns >= 2 * Math.floor(folders / 256), `${turns} turns of the event loop`);
  });

  it('counts the bytes find(1) counts, without following links, through every kind of entry', async () => {
    const root = join(scratch, 'edges');
    mkdirSync(join(root, '.git', 'objects'), { recursive: true });
    writeFileSync(join(root, '.git', 'objects', 'pack'), 'x'.repeat(5000));
    mkdirSync(join(root, 'sub', '.git'), { recursive: true });
    writeFileSync(join(root, 'sub', '.git', 'HEAD'), 'ref: refs/heads/main\n');
    writeFileSync(join(root, 'sub', 'file.txt'), 'y'.repeat(300));
    linkSync(join(root, 'sub', 'file.txt'), join(root, 'hardlink.txt'));
    symlinkSync('sub', join(root, 'link-to-dir'));
    symlinkSync('sub/file.txt', join(root, 'link-to-file'));
    symlinkSync('nowhere/at/all', join(root, 'dangling'));
    assert.equal(spawnSync('mkfifo', [join(root, 'fifo')]).status, 0);
    writeFileSync(join(root, 'new\nline'), 'z'.repeat(77));
    // A folder too large to list at once: read a slice at a time.
    mkdirSync(join(root, 'many'));
    for (let i = 0; i < 2000; i++) writeFileSync(join(root, 'many', `file-${i}`), 'v'.repeat(i % 50));
    mkdirSync(join(root, 'closed'));
    writeFileSync(join(root, 'closed', 'inside'), 'w'.repeat(1234));
    chmodSync(join(root, 'closed'), 0o000);
    const socket = createServer();
    await new Promise<void>((resolve) => socket.listen(join(root, 'socket'), resolve));
    try {
      const find = spawnSync('find', [root, '-path', join(root, '.git'), '-prune', '-o', '!', '-type', 'd',
        '-printf', '%s\\n'], { encoding: 'utf8' });
      const reference = find.stdout.split('\n').filter(Boolean).reduce((n, size) => n + Number(size), 0);
      assert.ok(reference > 0);
      assert.equal(await treeBytes(root, Infinity), reference);
    } finally {
      socket.close();
    }
  });

  it('counts a folder exchanged with its twin mid-walk where it is now (only a link leading out is skipped)', async () => {
    const root = join(scratch, 'twins');
    for (const name of ['a', 'b']) {
      mkdirSync(join(root, name), { recursive: true });
      for (let i = 0; i < 300; i++) writeFileSync(join(root, name, `f${i}`), 'x'.repeat(10));
    }
    // At the walk's first turn (256 looks in, one of the two open), the two folders trade names, as
    // renameat2(RENAME_EXCHANGE) or `mv a t && mv b a && mv t b` does: each name still leads to a folder of the tree.
    const walk = treeBytes(root, Infinity);
    renameSync(join(root, 'a'), join(root, 't'));
    renameSync(join(root, 'b'), join(root, 'a'));
    renameSync(join(root, 't'), join(root, 'b'));
    assert.equal(await walk, 2 * 300 * 10);
  });

  it('counts files whose names are not UTF-8', async () => {
    const root = join(scratch, 'bytes');
    mkdirSync(root);
    const odd = Buffer.concat([Buffer.from(`${root}/`), Buffer.from([0xff])]);
    writeFileSync(odd, 'q'.repeat(4096));
    mkdirSync(Buffer.concat([Buffer.from(`${root}/`), Buffer.from([0xfe])]));
    const inside = Buffer.concat([Buffer.from(`${root}/`), Buffer.from([0xfe]), Buffer.from('/inside')]);
    writeFileSync(inside, 'r'.repeat(100));
    assert.equal(await treeBytes(root, Infinity), 4096 + 100);
  });

  it('follows no link swapped in for a folder after its parent listed it, nor for the folder it reads', async () => {
    const root = join(scratch, 'swapped');
    const host = join(scratch, 'host');
    const moved = join(scratch, 'moved');
    mkdirSync(host);
    mkdirSync(moved);
    writeFileSync(join(host, 'huge'), '');
    truncateSync(join(host, 'huge'), 1024 ** 3);
    for (const name of ['a', 'b']) {
      mkdirSync(join(root, name), { recursive: true });
      for (let i = 0; i < 300; i++) writeFileSync(join(root, name, `f${i}`), 'x'.repeat(10));
    }
    // The walk runs unbroken until its first turn of the event loop, 256 looks in: the root, a and b seen as
    // folders, and the first of them (say a) open, 253 of its entries counted. Here, at that turn, both become
    // links to the host's folder: a is read on through what the walk opened, b's path now leads to another folder.
    const walk = treeBytes(root, Infinity);
    for (const name of ['a', 'b']) {
      renameSync(join(root, name), join(moved, name));
      symlinkSync(host, join(root, name));
    }
    assert.equal(await walk, 300 * 10, 'one folder\'s 300 files, the other one skipped and the host not counted');
  });
});
