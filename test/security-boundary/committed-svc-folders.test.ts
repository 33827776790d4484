// A repository's own files never widen what svc does (DESIGN §7a). Three ways a push could: a committed link at
// .svc/worktrees or .svc/runs (the run's checkout, its files and the agent's writable tree would land where it points,
// e.g. HOME/.claude/skills), a committed run folder whose plan.json names no sandbox and any program (--retry,
// --resume, --verify, --open-pr would obey it), and a plan copied into a server's run with less sandbox than the
// server's own setting gives. Each is refused before anything runs. So is a link at .svc/inbox or .svc/worktrees
// where a run in the checkout would have its sandbox hide that folder: no mount goes through a link.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { makeRepo, readJson, CLI, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';
import { excludeEngineFolders } from '../../src/engine/git.ts';
import type { SandboxMode } from '../../src/spawn/sandbox-mode.ts';
import { unsandboxedWarning } from '../../src/engine/run-plan.ts';

const FAILS = '#!/bin/sh\ncat > /dev/null\nexit 3\n';

function git(cwd: string, args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, ...GIT_ENV } });
}

function baseEnv(repo: TestRepo): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0',
    ...(bwrapWorks ? {} : { SVC_SANDBOX: 'none' }) };
}

function svc(repo: TestRepo, args: string[], env: NodeJS.ProcessEnv = baseEnv(repo)) {
  return runChild(process.execPath, [CLI, 'start', ...args], { cwd: repo.repo, env });
}

const runOf = (stdout: string) => (JSON.parse(stdout.trim().split('\n')[0]!) as { run: string }).run;

describe('committed links at .svc/worktrees, .svc/runs and .svc/inbox', () => {
  const repos: TestRepo[] = [];
  after(() => repos.forEach((r) => r.cleanup()));

  /** A repository that commits a link at `.svc/<name>` into the test HOME's .claude/skills. */
  function linkedRepo(name: 'worktrees' | 'runs' | 'inbox'): { repo: TestRepo; target: string } {
    const repo = makeRepo();
    repos.push(repo);
    const target = join(repo.home, '.claude', 'skills');
    mkdirSync(target, { recursive: true });
    symlinkSync(target, join(repo.repo, '.svc', name));
    git(repo.repo, ['add', join('.svc', name)]);
    git(repo.repo, ['commit', '-qm', 'a link where svc keeps its folders']);
    return { repo, target };
  }

  for (const [name, flags] of [['worktrees', ['--worktree']], ['runs', []]] as const) {
    it(`refuses a run when .svc/${name} is a committed link, and writes nothing through it`, async () => {
      const { repo, target } = linkedRepo(name);
      const res = await svc(repo, ['--brief', 'edit a.txt', ...flags, '--provider', 'fake']);
      assert.equal(res.code, 1, res.stderr);
      assert.match(res.stderr, /Refusing to start: svc keeps its runs and worktrees in plain folders/);
      assert.match(res.stderr, new RegExp(`\\.svc/${name}.*not a plain directory`));
      assert.deepEqual(readdirSync(target), [], 'nothing was made where the link points');
    });
  }

  // A run in the checkout itself has its sandbox hide these two folders by a mount on each, which no link can take.
  for (const name of ['inbox', 'worktrees'] as const) {
    it(`refuses a sandboxed run in the checkout when .svc/${name} is a committed link, naming it, making no run`,
      { skip: !bwrapWorks && 'needs a working bwrap' }, async () => {
        const { repo } = linkedRepo(name);
        const res = await svc(repo, ['--brief', 'edit a.txt', '--provider', 'fake']);
        assert.equal(res.code, 1, res.stderr);
        const refusal = `Refusing to start: \\S+/\\.svc/${name} is a symbolic link .*Remove the link`;
        assert.match(res.stderr, new RegExp(refusal));
        assert.deepEqual(readdirSync(join(repo.repo, '.svc', 'runs')), [], 'a run was made');
      });
  }

  it('refuses to resume a run in the checkout once a link stands at .svc/inbox, leaving the run as it was',
    { skip: !bwrapWorks && 'needs a working bwrap' }, async () => {
      const repo = makeRepo({ providers: { agent: FAILS } });
      repos.push(repo);
      const run = runOf((await svc(repo, ['--brief', 'x', '--provider', 'agent'])).stdout);
      const state = join(repo.repo, '.svc', 'runs', run, 'state.json');
      assert.equal(readJson(state).status, 'failed');
      symlinkSync(repo.home, join(repo.repo, '.svc', 'inbox'));
      const res = await svc(repo, ['--resume', run]);
      assert.equal(res.code, 1, res.stderr);
      assert.match(res.stderr, /Refusing to start: \S+\/\.svc\/inbox is a symbolic link/);
      assert.equal(readJson(state).status, 'failed');
    });

  it('keeps a link an agent makes at .svc/runs or .svc/worktrees out of git add -A', () => {
    const repo = makeRepo();
    repos.push(repo);
    excludeEngineFolders(join(repo.repo, '.git'));
    for (const name of ['runs', 'worktrees', 'inbox', 'ship-pending']) {
      symlinkSync(repo.home, join(repo.repo, '.svc', name));
    }
    git(repo.repo, ['add', '-A']);
    const staged = git(repo.repo, ['diff', '--cached', '--name-only']).split('\n').filter(Boolean);
    assert.deepEqual(staged, ['.svc/config.json'], 'only the repository\'s own file is added');
  });
});

/** Writes a failed run's folder whose plan runs `touch mark` on the host, unsandboxed. */
function plantRunFolder(dir: string, run: string, repoPath: string, mark: string): void {
  mkdirSync(join(dir, 'artifacts'), { recursive: true });
  const limits = { provider_timeout_s: 60, run_timeout_s: 60, check_timeout_s: 60, processes: 64, memory_mb: 512,
    file_mb: 64, disk_mb: 64, invocations: 1 };
  writeFileSync(join(dir, 'plan.json'), JSON.stringify({
    policy: { checks: [], pr: { open: 'never', draft: true, base: null }, max_usd: null, sandbox: null, limits,
      network: { allow: [], deny: [] } },
    provider: { name: 'x', kind: 'command', argv: ['/bin/sh', '-c', `cat >/dev/null; touch ${mark}`],
      stdinPrompt: true },
    passed_env: [], sandbox: { kind: 'none' }, push_target: null, notes: [],
  }));
  writeFileSync(join(dir, 'spec.md'), '# task\n');
  writeFileSync(join(dir, 'state.json'), JSON.stringify({ source: 'local', run, repo: 'acme/api', group_id: run,
    status: 'failed', brief: 'x', origin: 'cli', provider: 'x', worktree: false, pr: false, repo_path: repoPath,
    input: { kind: 'brief', value: 'x' } }));
}

const FLAGS = ['--retry', '--resume', '--verify', '--open-pr', '--stop'];

/** Two ways a repository plants a run folder: committed in .svc/runs, or behind a committed link there. */
const PLANTED_RUNS = [
  {
    where: 'a run folder the repository commits',
    run: 'r01aaaaaaaaaaaaaaaaaaaaaaaa',
    plant(repo: TestRepo, run: string, mark: string): void {
      plantRunFolder(join(repo.repo, '.svc', 'runs', run), run, repo.repo, mark);
      git(repo.repo, ['add', join('.svc', 'runs')]);
      git(repo.repo, ['commit', '-qm', 'a run folder, committed']);
    },
    refusal: (run: string) => new RegExp(`Refusing to use run ${run}: its folder \\.svc/runs/${run} is committed`),
  },
  {
    where: 'a run folder behind a committed link at .svc/runs (git lists nothing behind a link)',
    run: 'r01bbbbbbbbbbbbbbbbbbbbbbbb',
    plant(repo: TestRepo, run: string, mark: string): void {
      plantRunFolder(join(repo.repo, 'elsewhere', run), run, repo.repo, mark);
      symlinkSync(join('..', 'elsewhere'), join(repo.repo, '.svc', 'runs'));
      git(repo.repo, ['add', 'elsewhere', join('.svc', 'runs')]);
      git(repo.repo, ['commit', '-qm', 'run folders behind a link']);
    },
    refusal: () => /svc keeps its runs and worktrees in plain folders of the repository/,
  },
];

for (const { where, run, plant, refusal } of PLANTED_RUNS) {
  describe(where, () => {
    let repo: TestRepo;
    let mark: string;

    before(() => {
      repo = makeRepo();
      mark = join(repo.root, 'ran-on-host');
      plant(repo, run, mark);
    });
    after(() => repo.cleanup());

    for (const flag of FLAGS) {
      it(`refuses ${flag} of it with exit 1, and nothing its plan names runs`, async () => {
        const res = await svc(repo, [flag, run]);
        assert.equal(res.code, 1, res.stderr);
        assert.match(res.stderr, refusal(run));
        assert.equal(existsSync(mark), false, 'the planted plan\'s program never ran');
      });
    }
  });
}

describe('a run a server starts again from an earlier plan', { skip: !bwrapWorks && 'needs a working bwrap' }, () => {
  let repo: TestRepo;
  let run: string;
  const server = (more: NodeJS.ProcessEnv = {}) => ({ ...baseEnv(repo), SVC_ORIGIN: 'control', ...more });

  before(async () => {
    repo = makeRepo({ providers: { agent: FAILS } });
    // Made while the server's operator had the sandbox off: its plan runs the agent without one.
    const res = await svc(repo, ['--brief', 'x', '--worktree', '--provider', 'agent'],
      server({ SVC_SERVER_SANDBOX: 'none' }));
    run = runOf(res.stdout);
    const dir = join(repo.repo, '.svc', 'runs', run);
    assert.equal(readJson(join(dir, 'plan.json')).sandbox.kind, 'none', res.stderr);
    assert.equal(readJson(join(dir, 'state.json')).status, 'failed', res.stderr);
  });
  after(() => repo.cleanup());

  it('refuses a retry, resume or verify whose plan has no sandbox once the server\'s setting gives one', async () => {
    for (const flag of ['--retry', '--resume', '--verify']) {
      const res = await svc(repo, [flag, run], server());
      assert.equal(res.code, 1, `${flag}: ${res.stderr}`);
      assert.match(res.stderr, /plan .* runs the agent without a sandbox, and a run a server starts is sandboxed/);
    }
  });

  it('retries it as planned while the server still says SVC_SERVER_SANDBOX=none', async () => {
    const res = await svc(repo, ['--retry', run], server({ SVC_SERVER_SANDBOX: 'none' }));
    assert.doesNotMatch(res.stderr, /Refusing/);
    const retry = runOf(res.stdout);
    assert.equal(readJson(join(repo.repo, '.svc', 'runs', retry, 'plan.json')).sandbox.kind, 'none');
  });
});

describe('the unsandboxed warning', () => {
  it('names a fixed reason when a plan\'s "none" sandbox gives none', () => {
    const warning = unsandboxedWarning({ kind: 'none' } as SandboxMode);
    assert.match(warning!, /WITHOUT a sandbox \(the run's plan says so\)/);
    assert.doesNotMatch(warning!, /undefined/);
  });
});
