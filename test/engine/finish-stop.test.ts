// The finish and a stop: a stop asked at any point before the receipt ends the run stopped, with no receipt and no PR.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openRunContext, type RunContext } from '../../src/engine/run-context.ts';
import { finish } from '../../src/engine/finish-phase.ts';
import { parsePolicy } from '../../src/engine/policy.ts';
import { writeState } from '../../src/engine/run-state.ts';
import type { RunPlan } from '../../src/engine/run-plan.ts';
import type { RunGate } from '../../src/engine/egress.ts';
import type { RunSandbox } from '../../src/engine/sandbox.ts';
import { makeRepo, stateFor, type TestRepo } from './fixtures.ts';

describe('finish and a stop asked while it runs', () => {
  let t: TestRepo;
  before(() => {
    t = makeRepo();
  });
  after(() => t.cleanup());

  /** A run folder whose agent left a change in the repository's working tree, opened as its worker opens it. */
  function runAfterAgent(run: string): RunContext {
    const base_sha = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: t.repo, encoding: 'utf8' }).trim();
    writeFileSync(join(t.repo, 'a.txt'), `${run}\n`);
    const dir = join(t.repo, '.svc', 'runs', run);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'spec.md'), 'b\n');
    writeState(dir, stateFor(t.repo, run, { base_sha }));
    return openRunContext(dir, { HOME: t.home, PATH: process.env.PATH }, { ship: false });
  }

  /** A gate whose close runs `onClose`: what a stop's signal, handled while the worker awaits the close, does. */
  function sandboxClosing(onClose: () => void): RunSandbox {
    const gate = {
      policy: { allow: [], deny: [] },
      summary: () => ({ connections: 0, denied: 0, hosts: [], denials: [] }),
      close: async () => onClose(),
    };
    return { mode: { kind: 'none', why: 'test' }, gate: gate as unknown as RunGate, env: {} };
  }

  const plan = { policy: parsePolicy({}), push_target: null } as unknown as RunPlan;
  const receiptOf = (ctx: RunContext) => join(ctx.dir, 'artifacts', 'receipt.json');

  it('issues the receipt and succeeds when no stop is asked', async () => {
    const ctx = runAfterAgent('r-nostop');
    await finish(ctx, plan, sandboxClosing(() => {}), { kind: 'done' });
    await ctx.close();
    assert.equal(ctx.state.status, 'succeeded');
    assert.equal(existsSync(receiptOf(ctx)), true);
  });

  it('issues no receipt and does not succeed when the stop is asked while the egress gate closes', async () => {
    const ctx = runAfterAgent('r-stop');
    await finish(ctx, plan, sandboxClosing(() => ctx.requestStop('a test')), { kind: 'done' });
    await ctx.close();
    // The worker records `stopped` after finish returns (src/engine/worker.ts); finish must leave that to it.
    assert.equal(ctx.state.status, 'running');
    assert.equal(existsSync(receiptOf(ctx)), false);
  });
});
