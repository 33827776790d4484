// `svc init`: the stand-in agent and its config in the repository's .svc/, never written through a link the
// repository committed there.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runChild, type ChildResult } from '../helpers/run-child.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');

describe('svc init', () => {
  let dir: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-init-'));
    mkdirSync(join(dir, 'home'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  function repo(name: string): string {
    const path = join(dir, name);
    mkdirSync(path);
    execFileSync('git', ['-C', path, 'init', '-q']);
    return path;
  }

  function svc(args: string[]): Promise<ChildResult> {
    return runChild(process.execPath, [CLI, 'init', ...args], {
      cwd: dir, env: { PATH: process.env.PATH ?? '', HOME: join(dir, 'home'), SVC_CONTROL_URL: 'http://127.0.0.1:9' },
    });
  }

  it('writes the stand-in agent and its config, and overwrites them only with --force', async () => {
    const project = repo('plain');
    const r = await svc(['--repo', project]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(readFileSync(join(project, '.svc', 'agent.sh'), 'utf8'), /^#!\/bin\/sh\n/);
    assert.equal(statSync(join(project, '.svc', 'agent.sh')).mode & 0o777, 0o755);
    assert.equal(JSON.parse(readFileSync(join(project, '.svc', 'config.json'), 'utf8')).provider, 'hello');
    const again = await svc(['--repo', project]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /already exists; pass --force to overwrite it/);
    assert.equal((await svc(['--repo', project, '--force'])).code, 0);
  });

  it('outside a git repository says how to get into one (exit 2)', async () => {
    const plain = join(dir, 'not-git');
    mkdirSync(plain);
    const r = await svc(['--repo', plain]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^svc init: Not a git repository: ".*not-git" \(.*not a git/);
    const next = '; run svc inside a git repository (git init makes one), or name one with --repo DIR\n';
    assert.ok(r.stderr.endsWith(next), r.stderr);
  });

  it('names the file it could not write as the repository holds it', async () => {
    const project = repo('folder-agent');
    mkdirSync(join(project, '.svc', 'agent.sh'), { recursive: true });
    const r = await svc(['--repo', project, '--force']);
    assert.equal(r.code, 1, r.stdout);
    assert.match(r.stderr, /EISDIR/);
    assert.ok(r.stderr.includes(`'${join(project, '.svc', 'agent.sh')}'`), r.stderr);
    assert.doesNotMatch(r.stderr, /\/proc\/self\/fd/);
  });

  it('refuses to write through a link the repository put at .svc, .svc/agent.sh or .svc/config.json', async () => {
    const outside = join(dir, 'outside');
    mkdirSync(outside);
    const linkedFolder = repo('linked-folder');
    symlinkSync(outside, join(linkedFolder, '.svc'));
    const linkedFiles = repo('linked-files');
    mkdirSync(join(linkedFiles, '.svc'));
    // Dangling links: nothing "exists" at these names, so only a write that never follows a link stays inside.
    symlinkSync(join(outside, 'agent'), join(linkedFiles, '.svc', 'agent.sh'));
    symlinkSync(join(outside, 'config'), join(linkedFiles, '.svc', 'config.json'));
    for (const project of [linkedFolder, linkedFiles]) {
      for (const force of [[], ['--force']]) {
        const r = await svc(['--repo', project, ...force]);
        assert.equal(r.code, 1, r.stdout);
        // A link at either name is something that exists (exit 1 without --force); with it, the write is refused.
        assert.match(r.stderr, force.length ? /Refusing to write/ : /Refusing to write|already exists/);
      }
    }
    assert.deepEqual(readdirSync(outside), []);
    assert.equal(existsSync(join(outside, 'agent')), false);
  });
});
