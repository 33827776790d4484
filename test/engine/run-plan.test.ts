// A run's plan is resolved once, when its launcher makes it (src/engine/run-plan.ts). The attack: a repository changes
// its .svc/config.json and .svc/policy.json after a run started (a push, a person, another run's agent) to point the
// provider at another program, add a check and switch the sandbox off, and waits for the run to be resumed or
// retried. Neither picks the change up; a run folder whose plan is gone, or is not svc's own file, is refused rather
// than resolved again.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeRepo, readJson, CLI, GIT_ENV, type TestRepo } from './fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';
import { readPlan, refuseServersBuiltin, serverShare } from '../../src/engine/plan-reuse.ts';
import { writePlan, type RunPlan } from '../../src/engine/run-plan.ts';
import { RefusedError } from '../../src/errors.ts';
import { keptLocal, MAX_PLAN } from '../../src/engine/plain-tree.ts';


/** Fails its first invocation, leaving a mark in the working tree; finishes the task on the next. */
const FAILS_ONCE = `#!/bin/sh
cat > /dev/null
if [ -e tried.txt ]; then echo fixed >> a.txt; exit 0; fi
echo once > tried.txt
exit 3
`;

/** What the repository swaps in after the run started. */
const SWAPPED_IN = `#!/bin/sh
cat > /dev/null
echo swapped > swapped-in-ran.txt
`;

describe('a run plan resolved once', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;
  let run: string;
  let retry: string;
  const dirOf = (r: string) => join(repo.repo, '.svc', 'runs', r);
  const svc = (args: string[]) => runChild(process.execPath, [CLI, 'start', ...args], { cwd: repo.repo, env });

  before(async () => {
    repo = makeRepo({ providers: { agent: FAILS_ONCE }, policy: { checks: [] } });
    // The provider is the repository's own (no operator definition shadows it), so its file is what an attack edits.
    rmSync(join(repo.home, '.svc', 'operator.json'));
    writeFileSync(join(repo.bin, 'swapped.sh'), SWAPPED_IN);
    chmodSync(join(repo.bin, 'swapped.sh'), 0o755);
    env = { PATH: process.env.PATH, HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0',
      ...(bwrapWorks ? {} : { SVC_SANDBOX: 'none' }) };
    const res = await svc(['--brief', 'append fixed', '--worktree', '--provider', 'agent']);
    run = (JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string }).run;
    assert.equal(readJson(join(dirOf(run), 'state.json')).status, 'failed', res.stderr);
  });
  after(() => repo.cleanup());

  it('resumes by the plan: a provider, check and sandbox setting the repository changed since do not apply', async () => {
    const plan = readFileSync(join(dirOf(run), 'plan.json'), 'utf8');
    writeFileSync(join(repo.repo, '.svc', 'config.json'),
      JSON.stringify({ providers: { agent: { command: [join(repo.bin, 'swapped.sh')] } } }));
    writeFileSync(join(repo.repo, '.svc', 'policy.json'),
      JSON.stringify({ checks: [{ name: 'late', run: ['false'] }], sandbox: 'none' }));
    const res = await svc(['--resume', run]);
    assert.equal(res.code, 0, res.stderr);
    const state = readJson(join(dirOf(run), 'state.json'));
    assert.equal(state.status, 'succeeded');
    assert.equal(existsSync(join(state.workdir, 'swapped-in-ran.txt')), false, 'the swapped-in program never ran');
    assert.match(readFileSync(join(state.workdir, 'a.txt'), 'utf8'), /fixed/);
    const events = readFileSync(join(dirOf(run), 'events.jsonl'), 'utf8');
    assert.doesNotMatch(events, /"name":"late"/, 'the check added since was not run');
    if (bwrapWorks) assert.doesNotMatch(events, /WITHOUT a sandbox/, 'the sandbox stayed on');
    assert.equal(readFileSync(join(dirOf(run), 'plan.json'), 'utf8'), plan, 'the plan is as the launcher wrote it');
  });

  it('retries with the earlier run\'s plan, not the repository\'s files of now', async () => {
    const res = await svc(['--retry', run]);
    retry = (JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string }).run;
    assert.notEqual(retry, run);
    assert.deepEqual(readJson(join(dirOf(retry), 'plan.json')), readJson(join(dirOf(run), 'plan.json')));
    const state = readJson(join(dirOf(retry), 'state.json'));
    assert.equal(existsSync(join(state.workdir, 'swapped-in-ran.txt')), false, 'the swapped-in program never ran');
  });

  it('refuses to resume or verify a run whose plan is gone, and changes nothing; its retry is planned anew', async () => {
    const dir = dirOf(retry);
    assert.equal(readJson(join(dir, 'state.json')).status, 'failed');
    rmSync(join(dir, 'plan.json'));
    const before = readFileSync(join(dir, 'state.json'), 'utf8');
    for (const flag of ['--resume', '--verify']) {
      const res = await svc([flag, retry]);
      assert.equal(res.code, 1, `${flag}: ${res.stderr}`);
      assert.match(res.stderr, /has no readable plan .*plan\.json.*retry it/, flag);
    }
    // A run made before svc kept plans has none: retrying it is a new run, planned as `svc start` plans one (so the
    // untrusted "sandbox": "none" the repository wrote above would refuse it: it goes).
    writeFileSync(join(repo.repo, '.svc', 'policy.json'), JSON.stringify({ checks: [{ name: 'late', run: ['false'] }] }));
    const again = await svc(['--retry', retry, '--detach']);
    assert.doesNotMatch(again.stderr, /has no readable plan/);
    assert.equal(again.code, 0, again.stderr);
    const third = (JSON.parse(again.stdout.trim().split('\n')[0]!) as { run: string }).run;
    assert.equal(existsSync(join(dirOf(third), 'plan.json')), true, again.stderr);
    writeFileSync(join(dir, 'plan.json'), '{"policy":');
    for (const flag of ['--retry', '--verify']) {
      assert.match((await svc([flag, retry])).stderr, /has no readable plan/, `${flag}: a broken plan is refused`);
    }
    assert.equal(readFileSync(join(dir, 'state.json'), 'utf8'), before, 'the run is as it was');
  });

  it('refuses a plan that is not svc\'s own file: one another user planted, or one others may write', async () => {
    const planted = { ...readJson(join(dirOf(run), 'plan.json')), sandbox: { kind: 'none', why: 'planted' } };
    const path = join(dirOf(retry), 'plan.json');
    writeFileSync(path, JSON.stringify(planted));
    chmodSync(path, 0o666);
    assert.match((await svc(['--verify', retry])).stderr, /has no readable plan/, 'writable by others');
    if (process.getuid?.() === 0) {
      chmodSync(path, 0o644);
      chownSync(path, 65534, 65534);
      assert.match((await svc(['--verify', retry])).stderr, /has no readable plan/, 'owned by another user');
    }
    assert.doesNotMatch(readFileSync(join(dirOf(retry), 'events.jsonl'), 'utf8'), /WITHOUT a sandbox/);
  });

  it('refuses a plan svc did not mark for the run\'s folder: its own edited, or another run\'s copied with its mark',
    async () => {
      const own = join(dirOf(run), 'plan.json');
      const text = readFileSync(own, 'utf8');
      const state = readFileSync(join(dirOf(run), 'state.json'), 'utf8');
      writeFileSync(own, JSON.stringify({ ...JSON.parse(text), passed_env: ['PLANTED'] }, null, 2) + '\n');
      // The run was resumed to its end above: a verify and a retry go by its plan.
      for (const flag of ['--verify', '--retry']) {
        const res = await svc([flag, run]);
        assert.equal(res.code, 1, `${flag}: ${res.stderr}`);
        assert.match(res.stderr, /has no valid mark of svc on this host/, flag);
      }
      writeFileSync(own, text);
      // Written anew: the retry's plan.json is another user's, or others may write it (above).
      for (const name of ['plan.json', 'plan.mark']) {
        rmSync(join(dirOf(retry), name), { force: true });
        writeFileSync(join(dirOf(retry), name), readFileSync(join(dirOf(run), name)), { mode: 0o644 });
      }
      assert.match((await svc(['--verify', retry])).stderr, /has no valid mark/, 'another run\'s plan and mark');
      assert.equal(readFileSync(join(dirOf(run), 'state.json'), 'utf8'), state, 'the run is as it was');
    });
});

describe('a plan\'s mark', () => {
  const home = mkdtempSync(join(tmpdir(), 'svc-mark-'));
  const dir = join(home, 'project', '.svc', 'runs', 'r1');
  const env = { HOME: home };
  const plan = { policy: {}, provider: {}, passed_env: [], sandbox: { kind: 'bwrap' }, push_target: null, notes: [] };
  after(() => rmSync(home, { recursive: true, force: true }));

  it('is refused as no mark of svc when it is not the 64 hex digits svc writes, and never throws another error', () => {
    mkdirSync(dir, { recursive: true });
    writePlan(dir, plan as unknown as RunPlan, false, env);
    assert.deepEqual(readPlan(dir, env, false), plan);
    const made = readFileSync(join(dir, 'plan.mark'), 'utf8').trim();
    // Too short, too long, upper case, not hex: each a mark whose length or shape timingSafeEqual must not be given.
    for (const mark of [made.slice(2), `${made}00`, made.toUpperCase(), `${made.slice(1)}g`, '']) {
      rmSync(join(dir, 'plan.mark'));
      writeFileSync(join(dir, 'plan.mark'), mark + '\n', { mode: 0o644 });
      assert.throws(() => readPlan(dir, env, false), (err: Error) => err instanceof RefusedError, mark);
    }
    rmSync(join(dir, 'plan.mark'));
    writeFileSync(join(dir, 'plan.mark'), made + '\n', { mode: 0o644 });
    assert.throws(() => readPlan(dir, env, true), RefusedError, 'the mark binds whether the run works in a worktree');
  });
});

describe('a server starting again a run a person planned (serverShare)', () => {
  const home = mkdtempSync(join(tmpdir(), 'svc-share-'));
  const operator = (config: unknown) => writeFileSync(join(home, '.svc', 'operator.json'), JSON.stringify(config));
  const server = { HOME: home, SVC_ORIGIN: 'control' };
  const cache = join(home, 'operator-cache');
  const plan = (provider: Partial<RunPlan['provider']>, authority: RunPlan['authority'] = 'person'): RunPlan => ({
    policy: {} as RunPlan['policy'], sandbox: { kind: 'none' } as RunPlan['sandbox'], push_target: null, notes: [],
    passed_env: ['OPERATOR_NAME', 'PERSON_NAME'], authority,
    provider: { name: 'x', kind: 'command', argv: ['/bin/x'], stdinPrompt: true, ...provider },
  });
  before(() => {
    mkdirSync(join(home, '.svc'));
    operator({ env: ['OPERATOR_NAME'] });
  });
  after(() => rmSync(home, { recursive: true, force: true }));

  it('refuses a built-in the person\'s file redefined, and leaves a server\'s plan and a person\'s CLI start alone',
    () => {
      const impostor = plan({ name: 'claude' });
      assert.throws(() => refuseServersBuiltin(impostor, server, '/w'), /in place of the built-in/);
      refuseServersBuiltin(impostor, { HOME: home }, '/w');
      refuseServersBuiltin(plan({ name: 'claude' }, 'server'), server, '/w');
    });

  it('keeps the operator\'s names and provider as they are, and of the repository\'s the folders in its tree', () => {
    operator({ env: ['OPERATOR_NAME'], providers: { ops: { command: ['/bin/sh'], writable: [cache] } } });
    const notes: string[] = [];
    const ops = serverShare(plan({ name: 'ops', argv: ['/bin/sh'], writable: [cache] }), server, '/w',
      (t) => notes.push(t));
    assert.deepEqual([ops.passed_env, ops.provider.writable], [['OPERATOR_NAME'], [cache]]);
    const own = serverShare(plan({ writable: ['/w/cache', cache], showFolder: true }), server, '/w',
      (t) => notes.push(t));
    assert.deepEqual([own.provider.writable, own.provider.showFolder], [['/w/cache'], false]);
    assert.deepEqual(notes.map((n) => n.split(':')[0]),
      ['Refused env PERSON_NAME', 'Refused env PERSON_NAME', `Refused providers.x.writable "${cache}"`]);
  });

  it('counts a provider under the operator\'s name as the operator\'s only while its argv and folders are the entry\'s',
    () => {
      operator({ env: [], providers: { ops: { command: ['/bin/sh'], writable: [cache] } } });
      const notes: string[] = [];
      const person = plan({ name: 'ops', argv: ['/bin/sh', '-c', 'x'], writable: [cache, '/home/p/.x'] });
      const used = serverShare(person, server, '/w', (t) => notes.push(t));
      assert.deepEqual([used.provider.writable, used.provider.showFolder], [[], false]);
      assert.equal(notes.filter((n) => n.startsWith('Refused providers.ops.writable')).length, 2);
      const builtin = plan({ name: 'claude', argv: ['/bin/sh'], writable: [cache] });
      operator({ env: [], providers: { claude: { command: ['/bin/sh'], writable: [cache] } } });
      refuseServersBuiltin(builtin, server, '/w');
      operator({ env: [], providers: { claude: { command: ['/bin/sh', '-x'] } } });
      assert.throws(() => refuseServersBuiltin(builtin, server, '/w'), /in place of the built-in/);
    });
});

describe('a plan as large as the operator\'s settings make it', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;
  const operatorPath = () => join(repo.home, '.svc', 'operator.json');
  const svc = (args: string[]) => runChild(process.execPath, [CLI, 'start', ...args], { cwd: repo.repo, env });
  before(() => {
    repo = makeRepo({ policy: { checks: [] } });
    env = { PATH: process.env.PATH, HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0',
      ...(bwrapWorks ? {} : { SVC_SANDBOX: 'none' }) };
  });
  after(() => repo.cleanup());

  it('reads back a plan of more than 1 MiB that a long operator network.allow made: the run goes, and stays local',
    async () => {
      const label = (c: string) => c.repeat(60);
      const allow = Array.from({ length: 6000 }, (_, i) => `h${i}.${label('a')}.${label('b')}.${label('c')}.example`);
      writeFileSync(operatorPath(), JSON.stringify({ ...readJson(operatorPath()), network: { allow } }));
      const res = await svc(['--brief', 'edit', '--provider', 'fake']);
      assert.equal(res.code, 0, res.stderr);
      const run = (JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string }).run;
      const dir = join(repo.repo, '.svc', 'runs', run);
      assert.ok(statSync(join(dir, 'plan.json')).size > 1024 * 1024, 'the plan is larger than the old cap');
      assert.equal(readJson(join(dir, 'state.json')).status, 'succeeded', res.stderr);
      assert.equal(keptLocal(dir), true);
      const verify = await svc(['--verify', run]);
      assert.doesNotMatch(verify.stderr, /has no readable plan/);
    });

  it('refuses, naming its size, a run whose plan would pass what svc reads back; nothing is made', async () => {
    const operator = readJson(operatorPath()) as { providers: Record<string, { command: string[] }> };
    const fake = operator.providers.fake!;
    // One argument longer than MAX_PLAN: the provider's argv goes into the plan whole.
    fake.command = [...fake.command, 'x'.repeat(MAX_PLAN)];
    writeFileSync(operatorPath(), JSON.stringify({ providers: operator.providers }));
    const runs = readdirSync(join(repo.repo, '.svc', 'runs'));
    const res = await svc(['--brief', 'edit', '--provider', 'fake']);
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /Refusing to start: the run's plan would be \d+ bytes, more than the 16777216/);
    assert.deepEqual(readdirSync(join(repo.repo, '.svc', 'runs')), runs, 'no run folder was made');
  });
});

describe('a run without a worktree', () => {
  it('resumes in its project, where its folder is, not in a workdir its state.json was changed to name', async () => {
    const repo = makeRepo({ providers: { agent: FAILS_ONCE }, policy: { checks: [] } });
    const elsewhere = mkdtempSync(join(tmpdir(), 'svc-elsewhere-'));
    try {
      const env = { PATH: process.env.PATH, HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0',
        ...(bwrapWorks ? {} : { SVC_SANDBOX: 'none' }) };
      const svc = (args: string[]) => runChild(process.execPath, [CLI, 'start', ...args], { cwd: repo.repo, env });
      const first = await svc(['--brief', 'append fixed', '--provider', 'agent']);
      const run = (JSON.parse(first.stdout.trim().split('\n')[0]!) as { run: string }).run;
      const path = join(repo.repo, '.svc', 'runs', run, 'state.json');
      assert.equal(readJson(path).status, 'failed', first.stderr);
      writeFileSync(path, JSON.stringify({ ...readJson(path), workdir: elsewhere }));
      const resumed = await svc(['--resume', run]);
      assert.equal(resumed.code, 0, resumed.stderr);
      assert.equal(readJson(path).status, 'succeeded');
      assert.equal(readJson(path).workdir, repo.repo);
      assert.deepEqual(readdirSync(elsewhere), [], 'nothing ran in the folder state.json named');
    } finally {
      repo.cleanup();
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });
});

/** Writes the file-size limit it runs under (`ulimit -f`, blocks) to limit-<n>.txt; fails its first invocation. */
const RECORDS_LIMIT = `#!/bin/sh
cat > /dev/null
n=$(ls limit-*.txt 2>/dev/null | wc -l)
ulimit -f > limit-$n.txt
if [ "$n" -gt 0 ]; then echo fixed >> a.txt; exit 0; fi
exit 3
`;

describe('an earlier plan started again under the operator\'s caps of now', () => {
  let repo: TestRepo;
  let env: NodeJS.ProcessEnv;
  const dirOf = (r: string) => join(repo.repo, '.svc', 'runs', r);
  const svc = (args: string[]) => runChild(process.execPath, [CLI, 'start', ...args], { cwd: repo.repo, env });
  const runOf = (stdout: string) => (JSON.parse(stdout.trim().split('\n')[0]!) as { run: string }).run;
  const limitIn = (dir: string, n: number) => Number(readFileSync(join(dir, `limit-${n}.txt`), 'utf8').trim());

  before(() => {
    repo = makeRepo({ providers: { agent: RECORDS_LIMIT }, policy: { checks: [], limits: { file_mb: 4096 } } });
    env = { PATH: process.env.PATH, HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0',
      ...(bwrapWorks ? {} : { SVC_SANDBOX: 'none' }) };
  });
  after(() => repo.cleanup());

  it('holds a resumed and a retried run to a cap the operator lowered since the run was planned', async () => {
    const first = await svc(['--brief', 'append fixed', '--worktree', '--provider', 'agent']);
    const run = runOf(first.stdout);
    const state = readJson(join(dirOf(run), 'state.json'));
    assert.equal(state.status, 'failed', first.stderr);
    const planned = limitIn(state.workdir, 0);
    // The operator lowers the file size cap to 64 MiB (1/64 of the policy's 4096) after the run was planned.
    const operatorFile = join(repo.home, '.svc', 'operator.json');
    writeFileSync(operatorFile, JSON.stringify({ ...readJson(operatorFile), limits: { file_mb: 64 } }));
    const resumed = await svc(['--resume', run]);
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.equal(limitIn(state.workdir, 1), planned / 64, 'the resumed agent runs under the cap of now');
    assert.match(readFileSync(join(dirOf(run), 'events.jsonl'), 'utf8'),
      /limits\.file_mb 4096 is above the operator's cap: 64 applies/);
    const retried = await svc(['--retry', run]);
    const again = readJson(join(dirOf(runOf(retried.stdout)), 'state.json'));
    assert.equal(limitIn(again.workdir, 0), planned / 64, 'the retry, a new run, runs under the cap of now');
  });
});
