// A --worktree or --pr run's worktree holds only what its base commit holds: svc start refuses a command provider whose
// script is not committed there (src/engine/run-plan.ts refuseUncommitted), and only then.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { refuseUncommitted } from '../../src/engine/run-plan.ts';
import type { ResolvedProvider } from '../../src/engine/providers.ts';

const identity = ['-c', 'user.name=T', '-c', 'user.email=t@e'];
const git = (repo: string, ...args: string[]) => execFileSync('git', ['-C', repo, ...identity, ...args], {
  encoding: 'utf8',
}).trim();
const provider = (...argv: string[]): ResolvedProvider =>
  ({ name: 'p', kind: 'command', argv, stdinPrompt: false }) as unknown as ResolvedProvider;
const refused = /Refusing to start: provider "p" names (\S+), which is not committed/;

describe('a command provider\'s uncommitted script (refuseUncommitted)', () => {
  const repo = realpathSync(mkdtempSync(join(tmpdir(), 'svc-uncommitted-')));
  after(() => rmSync(repo, { recursive: true, force: true }));
  git(repo, 'init', '-q', '-b', 'main');
  mkdirSync(join(repo, 'tools'));
  writeFileSync(join(repo, 'tools', 'agent.sh'), 'echo hi\n');
  symlinkSync('tools', join(repo, 'scripts'));
  writeFileSync(join(repo, '.gitignore'), 'notes.txt\n');
  writeFileSync(join(repo, 'notes.txt'), 'data\n');
  git(repo, 'add', '-A');
  git(repo, 'commit', '-qm', 'base');

  it('takes a script behind a committed link to a committed folder as committed', () => {
    refuseUncommitted(provider('/bin/sh', 'scripts/agent.sh'), repo, 'HEAD');
  });

  it('tells a trigger server\'s job to commit the script, not to start without --worktree (it cannot)', () => {
    const job = () => refuseUncommitted(provider('/bin/sh', 'notes.txt'), repo, 'HEAD', true);
    assert.throws(job, /a trigger server's job works in a worktree of the served checkout, .*Commit it in the served /);
    // A clone= job has no served checkout: what it runs must be pushed.
    assert.throws(job, /for a clone= job, commit it and push it to the remote the job clones$/);
    assert.throws(job, (err: Error) => !err.message.includes('start without --worktree'));
  });

  it('checks only the script an interpreter runs, not a data file after it', () => {
    refuseUncommitted(provider('/bin/sh', 'tools/agent.sh', 'notes.txt'), repo, 'HEAD');
    assert.throws(() => refuseUncommitted(provider('/usr/bin/python3', 'notes.txt'), repo, 'HEAD'), refused);
    // Options before the script: the first argument that is not one is the script.
    assert.throws(() => refuseUncommitted(provider('/usr/bin/python3', '-u', 'notes.txt'), repo, 'HEAD'), refused);
    assert.throws(() => refuseUncommitted(provider('/bin/bash', '-e', 'notes.txt'), repo, 'HEAD'), refused);
  });

  it('checks against the commit the worktree is made at, not HEAD', () => {
    const head = git(repo, 'rev-parse', 'HEAD');
    git(repo, 'checkout', '-q', '-b', 'pr-branch');
    writeFileSync(join(repo, 'tools', 'new.sh'), 'echo new\n');
    git(repo, 'add', 'tools/new.sh');
    git(repo, 'commit', '-qm', 'new script');
    const prHead = git(repo, 'rev-parse', 'HEAD');
    git(repo, 'checkout', '-q', 'main');
    writeFileSync(join(repo, 'tools', 'new.sh'), 'echo new\n');
    refuseUncommitted(provider('/bin/sh', 'tools/new.sh'), repo, prHead);
    assert.throws(() => refuseUncommitted(provider('/bin/sh', 'tools/new.sh'), repo, head), refused);
  });
});
