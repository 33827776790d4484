// What an earlier plan was granted is judged again at each start of it (docs/engine.md "The run's plan"): the
// environment names it passes and a server's plan's operator provider. The attack: the operator withdraws a name or a
// provider's folders from operator.json after a run started, and the run's resume, verify or retry still hands the
// agent what was withdrawn. Black-box: real `svc start` in bwrap, a real temp HOME whose operator.json is edited
// between the first start and the next.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeRepo, readJson, AGENT_STATE, CLI, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';

/** Writes its environment into the tree each time; fails its first invocation, finishes on the next. */
const ENV_ONCE = `#!/bin/sh
cat > /dev/null
env > agent-env.txt
if [ -f tried ]; then echo fixed >> a.txt; exit 0; fi
touch tried
exit 3
`;

const POLICY = { checks: [{ name: 'env', run: ['sh', '-c', 'env'], required: false }] };

describe('an earlier plan started again after the operator withdrew a grant', { skip: !bwrapWorks && 'needs bwrap' },
  () => {
    let repo: TestRepo;
    let env: NodeJS.ProcessEnv;
    const server = (): NodeJS.ProcessEnv => ({ ...env, SVC_ORIGIN: 'control' });
    const operatorPath = () => join(repo.home, '.svc', 'operator.json');
    const operator = (change: (config: Record<string, any>) => void) => {
      const config = readJson(operatorPath()) as Record<string, any>;
      change(config);
      writeFileSync(operatorPath(), JSON.stringify(config));
    };
    const dirOf = (run: string) => join(repo.repo, '.svc', 'runs', run);
    const svc = (args: string[], e = server()) =>
      runChild(process.execPath, [CLI, 'start', ...args], { cwd: repo.repo, env: e });
    const runOf = (stdout: string) => (JSON.parse(stdout.trim().split('\n')[0]!) as { run: string }).run;
    const agentEnv = (run: string) => readFileSync(join(readJson(join(dirOf(run), 'state.json')).workdir,
      'agent-env.txt'), 'utf8');
    const events = (run: string) => readFileSync(join(dirOf(run), 'events.jsonl'), 'utf8');
    /** A run of `e`'s start, failed by its agent's first invocation. */
    const failedRun = async (e = server()) => {
      const res = await svc(['--brief', 'env', '--worktree', '--provider', 'agent'], e);
      const run = runOf(res.stdout);
      assert.equal(readJson(join(dirOf(run), 'state.json')).status, 'failed', res.stderr);
      return run;
    };

    before(() => {
      repo = makeRepo({ providers: { agent: ENV_ONCE }, policy: POLICY });
      env = { PATH: process.env.PATH, HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0',
        SVC_CONTROL_URL: 'http://127.0.0.1:9', OPS_TOOL_HOME: '/opt/ops-tool-7101', LATER_NAME: '/opt/later-7102',
        PERSON_TOOL_HOME: '/opt/person-tool-7103' };
    });
    after(() => repo.cleanup());

    it('a server\'s resume and verify leave out a name the operator withdrew, say so, and pick up none added since',
      async () => {
        operator((c) => { c.env = ['OPS_TOOL_HOME']; });
        const run = await failedRun();
        assert.match(agentEnv(run), /^OPS_TOOL_HOME=\/opt\/ops-tool-7101$/m, 'the first start passed it');
        operator((c) => { c.env = ['LATER_NAME']; });
        const resumed = await svc(['--resume', run]);
        assert.equal(resumed.code, 0, resumed.stderr);
        const text = agentEnv(run);
        assert.doesNotMatch(text, /ops-tool-7101/, 'the withdrawn name reached the resumed agent');
        assert.doesNotMatch(text, /later-7102/, 'a name granted since reached an earlier plan');
        assert.match(events(run), /env OPS_TOOL_HOME left out: no longer in the operator's configuration/);
        const verified = await svc(['--verify', run]);
        assert.equal(verified.code, 0, verified.stderr);
        const check = readFileSync(join(dirOf(run), 'artifacts', 'checks', 'env.log'), 'utf8');
        assert.doesNotMatch(check, /ops-tool-7101|later-7102/, 'the verify\'s check got a name not granted now');
      });

    it('a server\'s resume and verify of a plan whose operator provider changed are refused, changing nothing; its '
      + 'retry is planned anew', async () => {
      operator((c) => { c.env = []; });
      const run = await failedRun();
      const state = readFileSync(join(dirOf(run), 'state.json'), 'utf8');
      const log = events(run);
      // The operator takes back the host folder it let the provider write.
      operator((c) => { c.providers.agent.writable = []; });
      for (const flag of ['--resume', '--verify']) {
        const res = await svc([flag, run]);
        assert.equal(res.code, 1, `${flag}: ${res.stderr}`);
        assert.match(res.stderr, /runs the operator's provider "agent" as its entry was .*retry it \(a new run/, flag);
        assert.equal(readFileSync(join(dirOf(run), 'state.json'), 'utf8'), state, `${flag} changed state.json`);
        assert.equal(events(run), log, `${flag} changed the run's log`);
      }
      const retried = await svc(['--retry', run, '--detach']);
      assert.equal(retried.code, 0, retried.stderr);
      const plan = readJson(join(dirOf(runOf(retried.stdout)), 'plan.json')) as { provider: { writable: string[] } };
      assert.deepEqual(plan.provider.writable, [], 'the retry runs the entry as the operator has it now');
      // Gone altogether: refused the same way.
      operator((c) => { delete c.providers.agent; });
      const gone = await svc(['--resume', run]);
      assert.equal(gone.code, 1, gone.stderr);
      assert.match(gone.stderr, /changed or removed that entry since/);
    });

    it('a person\'s resume leaves out a name neither the operator nor their trusted file grants now', async () => {
      operator((c) => {
        c.env = ['OPS_TOOL_HOME'];
        c.providers.agent = { command: [join(repo.bin, 'agent.sh')], writable: [AGENT_STATE] };
      });
      const config = join(repo.repo, '.svc', 'config.json');
      writeFileSync(config, JSON.stringify({ ...readJson(config), env: ['PERSON_TOOL_HOME'] }));
      assert.equal((await runChild(process.execPath, [CLI, 'trust'], { cwd: repo.repo, env })).code, 0);
      const run = await failedRun(env);
      assert.match(agentEnv(run), /^PERSON_TOOL_HOME=/m);
      assert.match(agentEnv(run), /^OPS_TOOL_HOME=/m);
      operator((c) => { c.env = []; });
      assert.equal((await runChild(process.execPath, [CLI, 'trust', '--revoke'], { cwd: repo.repo, env })).code, 0);
      const resumed = await svc(['--resume', run], env);
      assert.equal(resumed.code, 0, resumed.stderr);
      assert.doesNotMatch(agentEnv(run), /ops-tool-7101|person-tool-7103/, 'a withdrawn name reached the agent');
      assert.match(events(run), /env OPS_TOOL_HOME, PERSON_TOOL_HOME left out/);
    });
  });
