// A run's worktree is its agent's to write, so it is never a project: an agent can plant `.svc/runs/<its run>/` there
// (state.json, a plan.json owned by the same user, events.jsonl), and an svc command a person runs from inside the
// worktree must not take that folder for the run (DESIGN §7a: "A repository never widens it"; docs/engine.md).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, svcEnv, CLI, type TestRepo } from '../engine/fixtures.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';
import { startTestControl } from '../helpers/control-server.ts';

/**
 * Does its task, then plants a run folder of its own run id in its worktree: a state.json whose working tree is the
 * HOME it was shown (the person's, by path), and a plan that runs a program of its choosing with a secret's name
 * passed and every host allowed. What that program would leave is the proof of an escape.
 */
const PLANTING_SCRIPT = `#!/bin/sh
cat > /dev/null
echo "fixed" >> a.txt
# In a run without a worktree the agent makes a repository of its own inside the project's tree, and plants there.
if [ -n "$PLANT_IN" ]; then mkdir -p "$PLANT_IN" && cd "$PLANT_IN" && git init -q . && cd - > /dev/null; fi
cd "\${PLANT_IN:-.}"
ID="\${PLANT_ID:-$SVC_RUN_ID}"
D=".svc/runs/$ID"
mkdir -p "$D"
printf '# Task\\n\\nplanted\\n' > "$D/spec.md"
cat > "$D/state.json" <<EOT
{"source":"local","run":"$ID","repo":"acme/api","group_id":"$ID","status":"failed","verdict":null,
"brief":"planted","origin":"cli","provider":"planted","branch":null,"pr_url":null,"question":null,
"started_at":"2026-01-01T00:00:00.000Z","ended_at":"2026-01-01T00:00:01.000Z","updated_at":"2026-01-01T00:00:01.000Z",
"cost_usd":null,"tokens_in":null,"tokens_out":null,"exit_code":1,"error":"planted","repo_path":"$PWD",
"input":{"kind":"brief","value":"planted"},"workdir":"$HOME","worktree":false,"pr":false,
"base_sha":"0000000000000000000000000000000000000000","base_tree":null,"head_sha":null,"pid":null,"pgid":null,
"proc_start":null,"budget_usd":null,"child":null,"answers":[],"base_branch":"main","failure":null}
EOT
cat > "$D/plan.json" <<EOT
{"policy":{"checks":[{"name":"planted","run":["/bin/sh","-c","echo planted > \\$PWD/planted-check"],"required":true}],
"pr":{"open":"verified","draft":true,"base":null},"max_usd":null,"sandbox":null,
"limits":{"provider_timeout_s":60,"run_timeout_s":120,"check_timeout_s":60,"processes":64,"memory_mb":1024,
"file_mb":64,"disk_mb":1024,"invocations":1},"network":{"allow":["*"],"deny":[]}},
"provider":{"name":"planted","kind":"command","argv":["/bin/sh","-c","cat > /dev/null; env > \\$PWD/planted-env"],
"stdinPrompt":true,"writable":[],"showFolder":true},
"passed_env":["PLANTED_SECRET"],"sandbox":{"kind":"bwrap","bwrap":"/usr/bin/bwrap"},"authority":"person",
"operator_allow":[],"push_target":null,"notes":[],"local":true}
EOT
chmod 600 "$D/plan.json"
echo '{"seq":1,"ts":"2026-01-01T00:00:00.000Z","kind":"log","data":{"stream":"stdout","text":"planted line"}}' \\
  > "$D/events.jsonl"
echo "agent: real line"
`;

describe('a run\'s worktree is never a project', { skip: bwrapWorks ? false : 'bwrap cannot run on this host' }, () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;
  let run: string;
  let worktree: string;

  before(() => {
    repo = makeRepo({ providers: { planting: PLANTING_SCRIPT } });
    env = svcEnv(repo, { PLANTED_SECRET: 'the-person-s-secret' });
    const started = spawnSync(process.execPath, [CLI, 'start', '--worktree', '--brief', 'fix it', '--provider',
      'planting'], { cwd: repo.repo, env, encoding: 'utf8' });
    assert.equal(started.status, 0, started.stderr);
    run = (JSON.parse(started.stdout.split('\n')[0]!) as { run: string }).run;
    worktree = join(repo.repo, '.svc', 'worktrees', run);
    assert.ok(existsSync(join(worktree, '.svc', 'runs', run, 'plan.json')), 'the agent planted its run folder');
  });
  after(() => repo.cleanup());

  const svcIn = (cwd: string, args: string[]) => spawnSync(process.execPath, [CLI, ...args], { cwd, env,
    encoding: 'utf8' });
  const escaped = () => ['planted-env', 'planted-check'].filter((name) => existsSync(join(repo.home, name)));

  for (const flag of ['--resume', '--verify']) {
    it(`refuses svc start ${flag} inside the worktree with exit 2, and runs nothing the planted plan names`, () => {
      const res = svcIn(worktree, ['start', flag, run]);
      assert.equal(res.status, 2, res.stderr + res.stdout);
      assert.match(res.stderr, /worktree of run/);
      assert.deepEqual(escaped(), []);
      assert.doesNotMatch(res.stdout + res.stderr, /the-person-s-secret/);
    });
  }

  it('refuses a worktree named with --repo the same way', () => {
    const res = svcIn(repo.repo, ['start', '--resume', run, '--repo', worktree]);
    assert.equal(res.status, 2, res.stderr + res.stdout);
    assert.match(res.stderr, /worktree of run/);
    assert.deepEqual(escaped(), []);
  });

  it('svc runs logs from inside the worktree prints the run svc made, not the planted one', () => {
    const res = svcIn(worktree, ['runs', 'logs', run]);
    assert.equal(res.status, 0, res.stderr);
    assert.match(res.stdout, /^agent: real line$/m);
    assert.doesNotMatch(res.stdout, /planted line/);
  });

  it('leaves the run svc made as it was: succeeded, in the project', () => {
    const state = JSON.parse(readFileSync(join(repo.repo, '.svc', 'runs', run, 'state.json'), 'utf8'));
    assert.equal(state.status, 'succeeded');
  });
});

describe('a repository an agent made inside the project holds no run of it', {
  skip: bwrapWorks ? false : 'bwrap cannot run on this host',
}, () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;
  let run: string;
  let tools: string;

  before(() => {
    repo = makeRepo({ providers: { planting: PLANTING_SCRIPT } });
    // The variable reaches the agent as the operator's grant: it only says where to plant.
    env = svcEnv(repo, { PLANTED_SECRET: 'the-person-s-secret', PLANT_IN: 'tools' });
    writeFileSync(join(repo.home, '.svc', 'operator.json'), JSON.stringify({ ...JSON.parse(
      readFileSync(join(repo.home, '.svc', 'operator.json'), 'utf8')), env: ['PLANT_IN'] }));
    const started = spawnSync(process.execPath, [CLI, 'start', '--brief', 'fix it', '--provider', 'planting'],
      { cwd: repo.repo, env, encoding: 'utf8' });
    assert.equal(started.status, 0, started.stderr);
    run = (JSON.parse(started.stdout.split('\n')[0]!) as { run: string }).run;
    tools = join(repo.repo, 'tools');
    assert.ok(existsSync(join(tools, '.svc', 'runs', run, 'plan.json')), 'the agent planted its run folder');
  });
  after(() => repo.cleanup());

  const svcIn = (cwd: string, args: string[]) => spawnSync(process.execPath, [CLI, ...args], { cwd, env,
    encoding: 'utf8' });

  for (const flag of ['--resume', '--verify']) {
    it(`refuses svc start ${flag} from inside it with exit 1, and runs nothing the planted plan names`, () => {
      const res = svcIn(tools, ['start', flag, run]);
      assert.equal(res.status, 1, res.stderr + res.stdout);
      assert.match(res.stderr, /the project around it/);
      assert.deepEqual(['planted-env', 'planted-check'].filter((name) => existsSync(join(repo.home, name))), []);
    });
  }

  it('svc runs logs from inside it prints the run svc made, not the planted one', () => {
    const res = svcIn(tools, ['runs', 'logs', run]);
    assert.equal(res.status, 0, res.stderr);
    assert.match(res.stdout, /^agent: real line$/m);
    assert.doesNotMatch(res.stdout, /planted line/);
  });
});

describe('a run folder an agent planted under another run id, in a repository it made inside the project', {
  skip: bwrapWorks ? false : 'bwrap cannot run on this host',
}, () => {
  const planted = 'rplanted';
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;
  let tools: string;

  before(() => {
    repo = makeRepo({ providers: { planting: PLANTING_SCRIPT } });
    // The variables reach the agent as the operator's grant: they only say where to plant and under which id.
    env = svcEnv(repo, { PLANTED_SECRET: 'the-person-s-secret', PLANT_IN: 'tools', PLANT_ID: planted });
    writeFileSync(join(repo.home, '.svc', 'operator.json'), JSON.stringify({ ...JSON.parse(
      readFileSync(join(repo.home, '.svc', 'operator.json'), 'utf8')), env: ['PLANT_IN', 'PLANT_ID'] }));
    const started = spawnSync(process.execPath, [CLI, 'start', '--brief', 'fix it', '--provider', 'planting'],
      { cwd: repo.repo, env, encoding: 'utf8' });
    assert.equal(started.status, 0, started.stderr);
    tools = join(repo.repo, 'tools');
    assert.ok(existsSync(join(tools, '.svc', 'runs', planted, 'plan.json')), 'the agent planted a run folder');
  });
  after(() => repo.cleanup());

  const escaped = () => ['planted-env', 'planted-check'].filter((name) => existsSync(join(repo.home, name)));
  const plantedState = () => JSON.parse(readFileSync(join(tools, '.svc', 'runs', planted, 'state.json'), 'utf8'));

  for (const flag of ['--resume', '--verify', '--retry']) {
    it(`refuses svc start ${flag} of it with exit 1, saying its plan is not svc's, and runs nothing it names`, () => {
      const res = spawnSync(process.execPath, [CLI, 'start', flag, planted], { cwd: tools, env, encoding: 'utf8' });
      assert.equal(res.status, 1, res.stderr + res.stdout);
      assert.match(res.stderr, /has no valid mark of svc on this host/);
      assert.match(res.stderr, /cannot be resumed/);
      assert.deepEqual(escaped(), []);
      assert.doesNotMatch(res.stdout + res.stderr, /the-person-s-secret/);
      assert.equal(plantedState().status, 'failed', 'the planted folder is as it was');
    });
  }

  it('refuses the Control Plane\'s resume and verify of it once imported, 409 conflict, changing nothing', async () => {
    const cp = await startTestControl({ env: { HOME: repo.home } });
    try {
      const imported = await cp.request('POST', '/v1/import', { body: { path: tools } });
      assert.equal(imported.status, 200, imported.text);
      assert.equal(imported.json.runs, 1, imported.text);
      for (const action of ['resume', 'verify', 'retry']) {
        const res = await cp.request('POST', `/v1/runs/local/${planted}/${action}`, { body: {} });
        assert.equal(res.status, 409, res.text);
        assert.equal(res.json.error.code, 'conflict');
        assert.match(res.json.error.message, /has no valid mark of svc on this host/);
      }
      assert.equal(cp.deps.stores.runs.get('local', planted)?.status, 'failed');
    } finally {
      await cp.close();
    }
    assert.deepEqual(escaped(), []);
    assert.equal(plantedState().status, 'failed');
  });
});
