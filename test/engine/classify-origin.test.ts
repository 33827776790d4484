import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, symlinkSync, mkdirSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { makeRepo, GIT_ENV, type TestRepo } from './fixtures.ts';
import { classifyInput, isWebhookOrigin } from '../../src/engine/spec.ts';
import { prepareRun } from '../../src/engine/launch.ts';
import { runDir } from '../../src/engine/paths.ts';

describe('file inputs named by webhook text', () => {
  let repo: TestRepo;
  let outsideMd: string;
  let outsideJson: string;

  before(() => {
    repo = makeRepo();
    outsideMd = join(repo.root, 'private-notes.md');
    outsideJson = join(repo.home, 'credentials.json');
    writeFileSync(outsideMd, '# Private\nsecret plans');
    writeFileSync(outsideJson, '{"token":"x"}');
    writeFileSync(join(repo.repo, 'task.md'), '# Task\nDo it');
    execFileSync('git', ['add', 'task.md'], { cwd: repo.repo });
    execFileSync('git', ['commit', '-qm', 'task'], { cwd: repo.repo, env: { ...process.env, ...GIT_ENV } });
    symlinkSync(outsideMd, join(repo.repo, 'link.md'));
  });
  after(() => repo.cleanup());

  function start(input: string, origin: string | undefined) {
    const env: NodeJS.ProcessEnv = { ...process.env, ...GIT_ENV, HOME: repo.home };
    if (origin === undefined) delete env.SVC_ORIGIN;
    else env.SVC_ORIGIN = origin;
    // Each prepared run stays queued; with a worktree of its own, none holds the checkout against the next.
    return prepareRun({ input, forceBrief: false, pr: false, worktree: true, provider: 'fake', repo: repo.repo, runId: null, env });
  }

  it('treats a .md or .json path outside the repo as a brief when the run came from a webhook', async () => {
    for (const origin of ['chata', 'errtrack', 'jobs']) {
      const md = await start(outsideMd, origin);
      assert.deepEqual(md.state.input, { kind: 'brief', value: outsideMd });
      assert.equal(md.state.brief, outsideMd);
      const json = await start(outsideJson, origin);
      assert.equal(json.state.input.kind, 'brief');
      const up = await start('../private-notes.md', origin);
      assert.equal(up.state.input.kind, 'brief');
    }
  });

  it('does not follow a link inside the repo to a file outside it for webhook text', async () => {
    const run = await start(join(repo.repo, 'link.md'), 'chata');
    assert.equal(run.state.input.kind, 'brief');
  });

  it('reads no file the repository does not track for webhook text: svc\'s run folders, worktrees, the checkout\'s',
    async () => {
      // Another sender's run: its spec (a private tracker issue, an alert) is svc's, hidden from every agent.
      const other = join(repo.repo, '.svc', 'runs', 'r01jd0000000000000000000001');
      mkdirSync(other, { recursive: true });
      writeFileSync(join(other, 'spec.md'), '# Another sender\'s task\nprivate details');
      const tree = join(repo.repo, '.svc', 'worktrees', 'r01jd0000000000000000000001');
      mkdirSync(tree, { recursive: true });
      writeFileSync(join(tree, 'NOTES.md'), '# Agent notes\nanother run\'s work');
      // The operator's file in the checkout, not the repository's (as `.env` or a local config would be).
      writeFileSync(join(repo.repo, 'local-notes.md'), '# Local\noperator notes');
      symlinkSync(join(other, 'spec.md'), join(repo.repo, 'inside-link.md'));
      // A link the repository tracks names a file it does not: the link is tracked, its target is not.
      symlinkSync('.svc/runs/r01jd0000000000000000000001/spec.md', join(repo.repo, 'tracked-link.md'));
      execFileSync('git', ['add', 'tracked-link.md'], { cwd: repo.repo });
      execFileSync('git', ['commit', '-qm', 'link'], { cwd: repo.repo, env: { ...process.env, ...GIT_ENV } });
      const run = 'r01jd0000000000000000000001';
      for (const name of [`.svc/runs/${run}/spec.md`, `.svc/worktrees/${run}/NOTES.md`, 'local-notes.md',
        'inside-link.md', 'tracked-link.md'].map((name) => join(repo.repo, name))) {
        const run = await start(name, 'chata');
        assert.deepEqual(run.state.input, { kind: 'brief', value: name });
      }
      const cli = await start(join(repo.repo, 'local-notes.md'), 'cli');
      assert.equal(cli.state.input.kind, 'spec-file');
    });

  it('reads no trackera delivery svc kept for another sender\'s run: a chat message naming a team\'s issue',
    async () => {
      // What the trigger server stages for a trackera job routed here: a private team's issue, as delivered.
      const inbox = join(repo.repo, '.svc', 'inbox', 'trackera');
      mkdirSync(inbox, { recursive: true });
      writeFileSync(join(inbox, 'SEC-7.json'), JSON.stringify({ type: 'Issue', action: 'create', data: {
        identifier: 'SEC-7', title: 'Private breach report', description: 'the attacker used key 4f2a',
      } }));
      for (const origin of ['chata', 'chatb', 'webhook', 'trackerb', 'errtrack']) {
        const run = await start('trackera:SEC-7', origin);
        assert.equal(run.state.brief, 'trackera:SEC-7', origin);
        assert.doesNotMatch(readFileSync(join(runDir(repo.repo, run.state.run), 'spec.md'), 'utf8'), /Private breach|4f2a/, origin);
      }
      // The tracker's own job, the operator's /jobs and a person read it.
      for (const origin of ['trackera', 'jobs', 'control', undefined]) {
        const run = await start('trackera:SEC-7', origin);
        assert.equal(run.state.brief, 'trackera:SEC-7 Private breach report', String(origin));
      }
    });

  it('still reads a spec inside the repo for webhook text', async () => {
    const run = await start(join(repo.repo, 'task.md'), 'chata');
    assert.equal(run.state.input.kind, 'spec-file');
    assert.equal(run.state.brief, 'Task');
  });

  it('lets a person at the CLI or the Control Plane name a file anywhere', async () => {
    for (const origin of [undefined, 'cli', 'control']) {
      const run = await start(outsideMd, origin);
      assert.deepEqual(run.state.input, { kind: 'spec-file', value: outsideMd });
    }
  });

  it('knows which origins are webhooks', () => {
    assert.deepEqual([undefined, '', 'cli', 'control', 'chata', 'trackerb'].map(isWebhookOrigin), [false, false, false, false, true, true]);
    assert.equal(classifyInput('missing.md', { forceBrief: false, cwd: repo.repo, confineTo: repo.repo }).kind, 'brief');
  });
});
