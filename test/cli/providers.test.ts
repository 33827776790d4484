// `svc providers`: the agent CLIs on PATH, their versions and whether svc's conformance suite tested them.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { CLI } from '../engine/fixtures.ts';
import { runChild } from '../helpers/run-child.ts';

describe('svc providers', () => {
  let root: string;
  let bin: string;
  let project: string;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'svc-providers-'));
    bin = join(root, 'bin');
    project = join(root, 'project');
    mkdirSync(bin);
    mkdirSync(join(project, '.svc'), { recursive: true });
    const script = (name: string, out: string) => {
      writeFileSync(join(bin, name), `#!/bin/sh\necho "${out}"\n`);
      chmodSync(join(bin, name), 0o755);
    };
    script('claude', '2.1.330 (Claude Code)');
    script('codex', 'codex-cli 0.171.0');
    script('my-agent', 'never asked');
    const config = { providers: { mine: { command: ['my-agent'] } } };
    writeFileSync(join(project, '.svc', 'config.json'), JSON.stringify(config));
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  const providers = (args: string[], cwd = project) => runChild(process.execPath, [CLI, 'providers', ...args], {
    cwd, env: { PATH: `${bin}:/usr/bin:/bin`, HOME: root }, stdio: ['ignore', 'pipe', 'pipe'],
  });

  it('--json reports each CLI found, its version and whether it lies in the tested range', async () => {
    const res = await providers(['--json']);
    assert.equal(res.code, 0, res.stderr);
    const by = Object.fromEntries(JSON.parse(res.stdout).map((p: { name: string }) => [p.name, p]));
    assert.deepEqual(by.claude, {
      name: 'claude', kind: 'builtin', available: true, path: join(bin, 'claude'), version: '2.1.330',
      tested_version: '2.1.330', tested_range: '>=2.1.330 <3.0.0', within_tested_range: true,
    });
    assert.equal(by.codex.within_tested_range, false);
    assert.equal(by.codex.tested_range, '>=0.169.0 <0.170.0');
    assert.equal(by.gemini.available, false);
    assert.equal(by.gemini.within_tested_range, null);
    assert.equal(by.aider.tested_range, null);
    assert.deepEqual([by.mine.kind, by.mine.available, by.mine.version], ['command', true, null]);
  });

  it('prints a table that says which versions are untested', async () => {
    const res = await providers([]);
    assert.equal(res.code, 0, res.stderr);
    const lines = res.stdout.trim().split('\n');
    assert.match(lines[0]!, /^NAME\s+VERSION\s+STATUS\s+PATH$/);
    assert.match(res.stdout, /claude\s+2\.1\.330\s+tested \(>=2\.1\.330 <3\.0\.0\)/);
    assert.match(res.stdout, /codex\s+0\.171\.0\s+UNTESTED: outside >=0\.169\.0 <0\.170\.0/);
    assert.match(res.stdout, /gemini\s+-\s+not installed/);
    assert.match(res.stdout, /mine\s+-\s+command provider/);
  });

  it('lists the operator\'s providers too, whose entry wins over the project\'s of the same name', async () => {
    mkdirSync(join(root, '.svc'), { recursive: true });
    const operator = { providers: { ops: { command: ['ops-agent'] }, mine: { command: ['/usr/bin/env'] } } };
    writeFileSync(join(root, '.svc', 'operator.json'), JSON.stringify(operator));
    try {
      const res = await providers(['--json']);
      assert.equal(res.code, 0, res.stderr);
      const rows = JSON.parse(res.stdout) as { name: string; kind: string; available: boolean; path: string }[];
      const by = Object.fromEntries(rows.map((p) => [p.name, p]));
      assert.deepEqual([by.ops?.kind, by.ops?.available], ['command', false]);
      assert.equal(by.mine?.path, '/usr/bin/env');
      assert.equal(rows.filter((p) => p.name === 'mine').length, 1);
    } finally {
      rmSync(join(root, '.svc', 'operator.json'));
    }
  });

  it('refuses an operator.json provider whose program is relative with exit 2, naming the file and the provider',
    async () => {
      mkdirSync(join(root, '.svc'), { recursive: true });
      const file = join(root, '.svc', 'operator.json');
      writeFileSync(file, JSON.stringify({ providers: { near: { command: ['./bin/near-agent', '--yes'] } } }));
      try {
        const res = await providers(['--json']);
        assert.equal(res.code, 2, res.stdout);
        assert.equal(res.stdout, '');
        assert.ok(res.stderr.includes(`${file} providers.near.command must start with a program on PATH or an ` +
          'absolute path'), res.stderr);
      } finally {
        rmSync(file);
      }
    });

  it('finds the project\'s providers from a subfolder, and refuses a --repo that is no repository', async () => {
    const repo = join(root, 'repo');
    mkdirSync(join(repo, 'src', 'deep'), { recursive: true });
    assert.equal(spawnSync('git', ['init', '-q', repo]).status, 0);
    mkdirSync(join(repo, '.svc'));
    writeFileSync(join(repo, '.svc', 'config.json'), JSON.stringify({ providers: { sub: { command: ['my-agent'] } } }));
    const names = (stdout: string) => (JSON.parse(stdout) as { name: string }[]).map((p) => p.name);
    const inside = await providers(['--json'], join(repo, 'src', 'deep'));
    assert.equal(inside.code, 0, inside.stderr);
    assert.ok(names(inside.stdout).includes('sub'), inside.stdout);
    const named = await providers(['--json', '--repo', join(repo, 'src')]);
    assert.equal(named.code, 0, named.stderr);
    assert.ok(names(named.stdout).includes('sub'), named.stdout);

    const missing = join(root, 'no-such-folder');
    const refused = await providers(['--repo', missing]);
    assert.equal(refused.code, 2);
    assert.equal(refused.stdout, '');
    assert.match(refused.stderr, new RegExp(`^svc providers: Not a git repository: "${missing}"`));
  });

  it('rejects an unknown flag with a usage error', async () => {
    const res = await providers(['--nope']);
    assert.equal(res.code, 2);
  });
});
