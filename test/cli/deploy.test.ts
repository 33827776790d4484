import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CLI = join(import.meta.dirname, '../../dist/cli.js');

describe('svc deploy outside a git repository', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  function svc(args: string[]): Promise<{ code: number | null; stderr: string }> {
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [CLI, 'deploy', ...args], { cwd: dir, env: { PATH: process.env.PATH ?? '', HOME: dir, GIT_CEILING_DIRECTORIES: dir } });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c));
      child.on('close', (code) => resolve({ code, stderr }));
    });
  }

  it('exits 1 naming the folder: a runtime condition, not a usage mistake', async () => {
    for (const args of [['record', '--sha', 'abcdef1234567', '--health', 'ok'], ['last']]) {
      const r = await svc(args);
      assert.equal(r.code, 1, args.join(' '));
      assert.match(r.stderr, /^svc deploy: Not a git repository: "/, args.join(' '));
    }
  });

  it('still exits 2 for a usage mistake, checked before the repository', async () => {
    assert.equal((await svc(['record', '--sha', 'abcdef1234567'])).code, 2);
    assert.equal((await svc(['explode'])).code, 2);
    // An argument last does not take is a mistake to name, not one to drop.
    const extra = await svc(['last', 'extra']);
    assert.equal(extra.code, 2);
    assert.match(extra.stderr, /^svc deploy: Usage: svc deploy record /);
  });
});

describe('svc deploy record with a value it cannot use', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-'));
    execFileSync('git', ['init', '-q'], { cwd: dir, env: { PATH: process.env.PATH ?? '', HOME: dir } });
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  function svc(args: string[]): Promise<{ code: number | null; stderr: string }> {
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [CLI, 'deploy', 'record', '--health', 'ok', ...args],
        { cwd: dir, env: { PATH: process.env.PATH ?? '', HOME: dir } });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c));
      child.on('close', (code) => resolve({ code, stderr }));
    });
  }

  it('exits 2 naming the flag whose value is wrong: --sha or --finished-at', async () => {
    const short = await svc(['--sha', 'abc']);
    assert.equal(short.code, 2);
    assert.equal(short.stderr, 'svc deploy: --sha "abc" is not a commit sha: 7 to 64 hex digits\n');
    const when = await svc(['--sha', 'abcdef1', '--finished-at', 'soon']);
    assert.equal(when.code, 2);
    assert.equal(when.stderr,
      'svc deploy: --finished-at "soon" is not a date and time (ISO-8601, e.g. 2026-11-29T12:00:00Z)\n');
    assert.equal(existsSync(join(dir, '.svc', 'deploys')), false, 'nothing recorded');
  });
});

describe('security: svc deploy in a repository whose .svc/deploys is a link', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('records nothing where the link points and exits 1; last reads no record through it', async () => {
    const repo = join(dir, 'repo');
    const outside = join(dir, 'outside');
    mkdirSync(join(repo, '.svc'), { recursive: true });
    mkdirSync(outside);
    execFileSync('git', ['init', '-q'], { cwd: repo, env: { PATH: process.env.PATH ?? '', HOME: dir } });
    symlinkSync(outside, join(repo, '.svc', 'deploys'));
    const run = (args: string[]) => new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const env = { PATH: process.env.PATH ?? '', HOME: dir };
      const child = spawn(process.execPath, [CLI, 'deploy', ...args], { cwd: repo, env });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c));
      child.on('close', (code) => resolve({ code, stderr }));
    });
    const record = await run(['record', '--sha', 'abcdef1234567', '--health', 'ok']);
    assert.equal(record.code, 1, record.stderr);
    assert.match(record.stderr, /Refusing to write into ".*deploys": it is a symbolic link/);
    assert.deepEqual(readdirSync(outside), []);
    const planted = { sha: 'abcdef1234567', finished_at: '2026-01-02T03:04:05Z' };
    writeFileSync(join(outside, 'a.json'), JSON.stringify(planted));
    const last = await run(['last']);
    assert.equal(last.code, 1);
    assert.equal(last.stderr,
      'svc deploy: No deploy records in .svc/deploys: svc deploy record --sha SHA --health STATUS writes one\n');
  });
});
