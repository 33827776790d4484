// A run whose built-in provider CLI is a version the conformance suite did not test says so in its log, naming the
// tested range; a tested one does not. The version comes from the CLI's npm package, else from `--version`.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, CLI, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { packageVersion, createVersionProbe } from '../../src/engine/cli-version.ts';

/** Edits a.txt and ends with a result line as claude prints it. */
const AGENT = `#!/bin/sh
cat > /dev/null
echo fixed >> a.txt
echo '{"type":"result","total_cost_usd":0.01,"usage":{"input_tokens":5,"output_tokens":2}}'
`;

describe('provider CLI version check', () => {
  let repo: TestRepo;
  let bin: string;

  before(() => {
    repo = makeRepo();
    bin = join(repo.root, 'clis');
    mkdirSync(bin);
    // claude as npm installs it: .bin/claude links into @anthropic-ai/claude-code, whose package.json says 3.0.0.
    const pkg = join(repo.root, 'npm', 'node_modules', '@anthropic-ai', 'claude-code');
    mkdirSync(join(pkg, 'bin'), { recursive: true });
    writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: '@anthropic-ai/claude-code', version: '3.0.0' }));
    writeFileSync(join(pkg, 'bin', 'claude.exe'), AGENT);
    chmodSync(join(pkg, 'bin', 'claude.exe'), 0o755);
    symlinkSync(join(pkg, 'bin', 'claude.exe'), join(bin, 'claude'));
    // codex installed some other way: only --version tells, and it names a tested version.
    const version = '[ "$1" = --version ] && { echo "codex-cli 0.169.4"; exit 0; }';
    writeFileSync(join(bin, 'codex'), `#!/bin/sh\n${version}\n${AGENT}`);
    chmodSync(join(bin, 'codex'), 0o755);
  });
  after(() => repo.cleanup());

  const run = async (provider: string) => {
    const PATH = `${bin}:${process.env.PATH}`;
    const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0', PATH };
    const args = [CLI, 'start', '--brief', 'fix it', '--worktree', '--provider', provider];
    const res = await runChild(process.execPath, args, { cwd: repo.repo, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const summary = JSON.parse(res.stdout.trim().split('\n').at(-1)!);
    const events = readFileSync(join(repo.repo, '.svc', 'runs', summary.run, 'events.jsonl'), 'utf8');
    const logs = events.trim().split('\n').map((l) => JSON.parse(l)).filter((e) => e.kind === 'log');
    return { res, summary, logs: logs.map((e) => String(e.data.text)) };
  };

  it('reads an npm-installed CLI\'s version from its package, through the .bin link', async () => {
    assert.equal(packageVersion(join(bin, 'claude'), '@anthropic-ai/claude-code'), '3.0.0');
    assert.equal(packageVersion(join(bin, 'claude'), '@openai/codex'), null, 'another package\'s name never matches');
    assert.equal(await createVersionProbe(process.env)(join(bin, 'codex'), 'codex'), '0.169.4');
  });

  it('logs a warning naming the tested range when the CLI is an untested major version', async () => {
    const { res, summary, logs } = await run('claude');
    assert.equal(summary.status, 'succeeded', `${summary.error}\n${res.stderr}`);
    const warning = logs.find((t) => t.startsWith('warning: claude 3.0.0 is outside'));
    assert.ok(warning, logs.join('\n'));
    assert.match(warning, />=2\.1\.330 <3\.0\.0/);
    assert.match(res.stderr, /claude 3\.0\.0 is outside/, 'the person running svc start sees it too');
  });

  it('says nothing about a version inside the tested range', async () => {
    const { summary, logs } = await run('codex');
    assert.equal(summary.status, 'succeeded', summary.error);
    assert.ok(!logs.some((t) => /outside the range/.test(t)), logs.join('\n'));
  });
});
