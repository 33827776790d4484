// Run ids are unique only within a project: a worker, or an --open-pr, of run X in project A holds A's run X alone
// (proc-group.ts liveWorkerOf), never project B's run X. Each is a live process with that command line.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { liveWorkerOf } from '../../src/engine/proc-group.ts';
import { procStart } from '../../src/proc-stat.ts';
import { idleNode } from '../helpers/run-child.ts';
import { CLI, GIT_ENV } from './fixtures.ts';

describe('a live worker of a run id two projects have', () => {
  let root: string;
  let a: string;
  let b: string;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'svc-two-projects-'));
    [a, b] = [join(root, 'a'), join(root, 'b')];
    for (const d of [a, b, join(a, 'sub')]) mkdirSync(d, { recursive: true });
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  async function heldBy(args: string[], cwd: string): Promise<Record<'a' | 'b', number | null>> {
    const worker = await idleNode(args, { cwd });
    try {
      const state = { run: 'r01same', pid: worker.pid!, proc_start: procStart(worker.pid!) };
      const held = { a: liveWorkerOf(state, a), b: liveWorkerOf(state, b) };
      return { a: held.a === worker.pid ? 1 : held.a, b: held.b === worker.pid ? 1 : held.b };
    } finally {
      worker.kill('SIGKILL');
      await once(worker, 'exit');
    }
  }

  it('does not count a worker of project A\'s run as a worker of project B\'s run of the same id', async () => {
    const held = await heldBy([CLI, 'worker', 'resume', '--run-id', 'r01same', '--repo', a], a);
    assert.deepEqual(held, { a: 1, b: null });
  });

  it('counts an --open-pr for the project it names with --repo, or else the one it runs in', async () => {
    assert.deepEqual(await heldBy([CLI, 'start', '--open-pr', 'r01same'], join(a, 'sub')), { a: 1, b: null });
    assert.deepEqual(await heldBy([CLI, 'start', '--open-pr', 'r01same', '--repo', b], a), { a: null, b: 1 });
    assert.deepEqual(await heldBy([CLI, 'start', '--open-pr=r01same', `--repo=${join(b, '.')}`], root),
      { a: null, b: 1 });
  });
});

// `svc start` takes git's top level for its project (launch.ts resolveRepo): an --open-pr in a repository nested in
// another project's folder is the nested one's, so it holds the outer project's run of the same id no more than a
// sibling's does. Two real repositories, one inside the other.
describe('an --open-pr in a repository nested in another project', () => {
  let root: string;
  let outer: string;
  let inner: string;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'svc-nested-projects-'));
    outer = join(root, 'outer');
    inner = join(outer, 'inner');
    for (const d of [join(inner, 'sub'), join(outer, 'plain')]) mkdirSync(d, { recursive: true });
    for (const repo of [outer, inner]) execFileSync('git', ['init', '-q', repo], { env: { ...process.env, ...GIT_ENV } });
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  async function heldBy(args: string[], cwd: string): Promise<Record<'outer' | 'inner', boolean>> {
    const opener = await idleNode(args, { cwd });
    try {
      const state = { run: 'r01same', pid: opener.pid!, proc_start: procStart(opener.pid!) };
      return { outer: liveWorkerOf(state, outer) === opener.pid, inner: liveWorkerOf(state, inner) === opener.pid };
    } finally {
      opener.kill('SIGKILL');
      await once(opener, 'exit');
    }
  }

  it('counts it for the nested project only, whether it runs there, in a folder of it, or names it', async () => {
    const open = [CLI, 'start', '--open-pr', 'r01same'];
    assert.deepEqual(await heldBy(open, inner), { outer: false, inner: true });
    assert.deepEqual(await heldBy(open, join(inner, 'sub')), { outer: false, inner: true });
    assert.deepEqual(await heldBy([...open, '--repo', inner], outer), { outer: false, inner: true });
    assert.deepEqual(await heldBy([...open, '--repo', join(inner, 'sub')], root), { outer: false, inner: true });
  });

  it('still counts one in the outer project\'s own folders for the outer project', async () => {
    const open = [CLI, 'start', '--open-pr', 'r01same'];
    assert.deepEqual(await heldBy(open, join(outer, 'plain')), { outer: true, inner: false });
    assert.deepEqual(await heldBy([...open, '--repo', outer], inner), { outer: true, inner: false });
  });
});

// Only a `.git` git takes for a repository makes one: an empty `.git` folder (an agent's, a tool's) is passed over by
// git's discovery, so `svc start` there takes the outer project, and its --open-pr must hold the outer project's run.
describe('an --open-pr under a `.git` git does not take for a repository', () => {
  let root: string;
  let outer: string;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'svc-planted-git-'));
    outer = join(root, 'outer');
    mkdirSync(join(outer, 'planted', '.git'), { recursive: true });
    mkdirSync(join(outer, 'headless', '.git', 'refs'), { recursive: true });
    mkdirSync(join(outer, 'headless', '.git', 'objects'));
    // A HEAD that names neither a ref nor an object: git passes over this one too.
    mkdirSync(join(outer, 'garbled', '.git', 'refs'), { recursive: true });
    mkdirSync(join(outer, 'garbled', '.git', 'objects'));
    writeFileSync(join(outer, 'garbled', '.git', 'HEAD'), 'not a ref\n');
    // One git does take: its HEAD as git reads it, spaces after `ref:` and no newline.
    mkdirSync(join(outer, 'spaced', '.git', 'refs'), { recursive: true });
    mkdirSync(join(outer, 'spaced', '.git', 'objects'));
    writeFileSync(join(outer, 'spaced', '.git', 'HEAD'), 'ref:  refs/heads/main');
    execFileSync('git', ['init', '-q', outer], { env: { ...process.env, ...GIT_ENV } });
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  /** Whether an --open-pr in `folder` of the outer project holds the outer project's run, and git's top level there. */
  async function outerHeld(folder: string): Promise<{ held: boolean; top: string }> {
    const cwd = join(outer, folder);
    const top = execFileSync('git', ['rev-parse', '--show-toplevel'], { cwd, encoding: 'utf8' }).trim();
    const opener = await idleNode([CLI, 'start', '--open-pr', 'r01same'], { cwd });
    try {
      const state = { run: 'r01same', pid: opener.pid!, proc_start: procStart(opener.pid!) };
      return { held: liveWorkerOf(state, outer) === opener.pid, top };
    } finally {
      opener.kill('SIGKILL');
      await once(opener, 'exit');
    }
  }

  it('counts it for the project git finds from there', async () => {
    for (const folder of ['planted', 'headless', 'garbled']) {
      assert.deepEqual(await outerHeld(folder), { held: true, top: outer }, folder);
    }
  });

  it('does not count it where git takes the `.git` for a repository of its own', async () => {
    assert.deepEqual(await outerHeld('spaced'), { held: false, top: join(outer, 'spaced') });
  });
});
