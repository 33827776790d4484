// codex 0.169 ignores OPENAI_BASE_URL (it reads only its openai_base_url setting): a sandboxed run with an OpenAI
// key must hand codex the run gate's base URL on its argv, or its model calls leave by an unmetered CONNECT tunnel
// to api.openai.com with the placeholder key (docs/gate.md "The model CLIs and the gate").
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, readJson, CLI, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';

// A stand-in codex: records its arguments and the base-URL variable, and edits the tracked file.
const FAKE_CODEX = `#!/bin/sh
cat > /dev/null
printf '%s\\n' "$@" > argv.txt
echo "env=$OPENAI_BASE_URL" >> argv.txt
echo fixed > a.txt
exit 0
`;

describe('codex is pointed at the run gate by its own setting', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;

  before(() => {
    repo = makeRepo({ providers: {} });
    const bin = join(repo.root, 'codex-bin');
    mkdirSync(bin);
    writeFileSync(join(bin, 'codex'), FAKE_CODEX);
    chmodSync(join(bin, 'codex'), 0o755);
    env = {
      ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
      PATH: `${bin}:${process.env.PATH ?? ''}`, OPENAI_API_KEY: 'sk-real-openai', SVC_SANDBOX_FORWARDER: 'node',
    };
    delete env.SVC_SANDBOX;
    delete env.OPENAI_BASE_URL;
  });
  after(() => repo.cleanup());

  it('gives `-c openai_base_url="<the gate\'s /_model/openai>"` before its subcommand, no key on the argv', async () => {
    const started = await runChild(process.execPath, [CLI, 'start', '--brief', 'fix', '--worktree', '--detach',
      '--provider', 'codex'], { cwd: repo.repo, env });
    assert.equal(started.code, 0, started.stderr);
    const run = JSON.parse(started.stdout).run;
    const state = await waitFor(() => {
      const s = readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
      return ['succeeded', 'failed', 'stopped', 'blocked'].includes(s.status) ? s : null;
    }, 'the run to end', 60_000);
    const lines = readFileSync(join(state.workdir, 'argv.txt'), 'utf8').trim().split('\n');
    const base = lines.at(-1)!.slice('env='.length);
    assert.match(base, /^http:\/\/localhost:\d+\/_model\/openai$/);
    assert.deepEqual(lines.slice(0, 3), ['-c', `openai_base_url="${base}"`, 'exec'], lines.join('\n'));
    assert.ok(!lines.some((l) => l.includes('sk-real-openai') || l.includes('placeholder')), lines.join('\n'));
  });
});
