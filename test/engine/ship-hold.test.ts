// `svc ship` holds a run while it sends it (ship-hold.ts): a resume that came meanwhile and started its worker had two
// shippers of one run, the new worker's ship.json rolled back by the late one of `svc ship`, batches out of order. The
// slow step is real: a stand-in Control Plane on loopback that holds the ingest answer until the test releases it.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readJson, CLI, type TestRepo } from './fixtures.ts';
import { idleNode, runChild, type ChildResult } from '../helpers/run-child.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { shippingProject, standInControl, within } from '../helpers/held-ingest.ts';
import { procStart } from '../../src/proc-stat.ts';
import { SHIP_HOLD } from '../../src/engine/ship-hold.ts';

describe('svc ship holds the run it sends', () => {
  let repo: TestRepo;
  let control: Awaited<ReturnType<typeof standInControl>>;
  let env: NodeJS.ProcessEnv;
  let cleanup: (runs: string[]) => void;
  const runs: string[] = [];
  before(async () => ({ repo, control, env, cleanup } = await shippingProject()));
  after(() => cleanup(runs));

  const svc = (args: string[], what: string): Promise<ChildResult> =>
    within(runChild(process.execPath, [CLI, ...args], { cwd: repo.repo, env }), 60_000, what);
  const statePath = (run: string) => join(repo.repo, '.svc', 'runs', run, 'state.json');

  /** A failed run whose worker has shipped it and left. */
  async function failedRun(): Promise<string> {
    const started = await svc(['start', '--brief', 'fix', '--worktree', '--detach', '--provider', 'fails-once'],
      'svc start');
    assert.equal(started.code, 0, started.stderr);
    const run: string = JSON.parse(started.stdout).run;
    runs.push(run);
    await waitFor(() => {
      const state = readJson(statePath(run));
      return state.status === 'failed' && state.pid === null;
    }, 'the run to fail and its worker to leave');
    return run;
  }

  /** `svc ship --all RUN` started, once its first batch is held by the Control Plane. */
  async function shipHeld(run: string): Promise<{ ship: ChildProcess; ended: Promise<ChildResult & { at: number }> }> {
    const held = control.holdFailed('until-released');
    const ship = spawn(process.execPath, [CLI, 'ship', '--all', run], { cwd: repo.repo, env });
    let stdout = '';
    let stderr = '';
    ship.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    ship.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const ended = new Promise<ChildResult & { at: number }>((resolve) =>
      ship.on('close', (code, signal) => resolve({ code, signal, stdout, stderr, at: Date.now() })));
    await within(held, 60_000, 'svc ship to send the run');
    return { ship, ended };
  }

  it('starts the worker of a resume that came while it sends the run only once it has ended', { timeout: 120_000 },
    async () => {
      const run = await failedRun();
      const { ended } = await shipHeld(run);
      let resumed: ChildResult;
      try {
        // The ship's answer is held past its 10 s: the ship gives up first, and the resume, which waits as long for
        // it from a later start, then goes on.
        resumed = await svc(['start', '--resume', run, '--detach'], 'svc start --resume');
      } finally {
        control.release();
      }
      const shipped = await within(ended, 60_000, 'svc ship to end');
      assert.equal(resumed.code, 0, resumed.stderr);
      assert.equal(shipped.code, 1, shipped.stderr);
      await waitFor(() => control.seen.some((b) => b.resumed), 'the resume\'s worker to ship');
      const early = control.seen.filter((b) => b.resumed && b.arrived < shipped.at);
      assert.deepEqual(early, [], 'no batch of the resume came before svc ship had ended');
      assert.ok(!existsSync(join(repo.repo, '.svc', 'runs', run, SHIP_HOLD)), 'the hold is gone with the ship');
    });

  it('refuses a resume and a second svc ship, naming the shipper, while the run is held, and goes on once it is gone',
    { timeout: 120_000 }, async () => {
      const run = await failedRun();
      const dir = join(repo.repo, '.svc', 'runs', run);
      // A shipper that never ends its ship: a live process recorded in the hold, as `svc ship` records itself.
      const shipper = await idleNode();
      try {
        writeFileSync(join(dir, SHIP_HOLD), JSON.stringify({ pid: shipper.pid, proc_start: procStart(shipper.pid!) }));
        const refused = await svc(['start', '--resume', run, '--detach'], 'svc start --resume');
        assert.equal(refused.code, 1, refused.stderr);
        assert.equal(refused.stderr, `svc start: Run ${run} is failed but svc ship (pid ${shipper.pid}) is still ` +
          'sending it: resume once that has ended\n');
        const state = readJson(statePath(run));
        assert.deepEqual([state.status, state.pid], ['failed', null], 'no worker was started');
        // Nor does a second svc ship send it beside the first.
        const second = await svc(['ship', run], 'a second svc ship');
        assert.equal(second.code, 1, second.stderr);
        assert.equal(second.stderr, `svc ship: ${run}: not shipped here: another svc ship (pid ${shipper.pid}) is ` +
          'sending it\nsvc ship: 1 of 1 runs not sent (each is named above)\n');
      } finally {
        shipper.kill('SIGKILL');
        await once(shipper, 'exit');
      }
      // Its holder gone, the hold holds nothing.
      const resumed = await svc(['start', '--resume', run, '--detach'], 'svc start --resume');
      assert.equal(resumed.code, 0, resumed.stderr);
    });

  /** `body` while a live process that never ends its ship holds `run`, as `svc ship` records itself in the hold. */
  async function whileHeld(run: string, body: (shipper: number) => Promise<void>): Promise<void> {
    const shipper = await idleNode();
    try {
      const hold = JSON.stringify({ pid: shipper.pid, proc_start: procStart(shipper.pid!) });
      writeFileSync(join(repo.repo, '.svc', 'runs', run, SHIP_HOLD), hold);
      await body(shipper.pid!);
    } finally {
      shipper.kill('SIGKILL');
      await once(shipper, 'exit');
    }
  }

  it('refuses a verify, naming the shipper, while the run is held, and starts no verifier', { timeout: 120_000 },
    async () => {
      const run = await failedRun();
      await whileHeld(run, async (shipper) => {
        const refused = await svc(['start', '--verify', run, '--detach'], 'svc start --verify');
        assert.equal(refused.code, 1, refused.stderr);
        assert.equal(refused.stderr, `svc start: Run ${run} is failed but svc ship (pid ${shipper}) is still ` +
          'sending it: verify once that has ended\n');
        const state = readJson(statePath(run));
        assert.deepEqual([state.status, state.pid, state.verifier ?? null], ['failed', null, null]);
      });
    });

  it('refuses an --open-pr, naming the shipper, while the run is held, and records no opener', { timeout: 120_000 },
    async () => {
      const run = await failedRun();
      // A --pr run whose pull request was not opened: what an --open-pr takes, but for the hold.
      writeFileSync(statePath(run), JSON.stringify({ ...readJson(statePath(run)), pr: true }));
      await whileHeld(run, async (shipper) => {
        const refused = await svc(['start', '--open-pr', run], 'svc start --open-pr');
        assert.equal(refused.code, 1, refused.stderr);
        assert.equal(refused.stderr, `svc start: Run ${run} is failed but svc ship (pid ${shipper}) is still ` +
          'sending it: open its pull request once that has ended\n');
        const state = readJson(statePath(run));
        assert.deepEqual([state.status, state.pid], ['failed', null], 'the --open-pr did not take the run');
      });
    });

  it('refuses to send a run with a folder at its hold, naming it, and leaves the folder for a person',
    { timeout: 120_000 }, async () => {
      const run = await failedRun();
      const hold = join(realpathSync(repo.repo), '.svc', 'runs', run, SHIP_HOLD);
      mkdirSync(hold);
      try {
        const shipped = await svc(['ship', '--all', run], 'svc ship');
        assert.equal(shipped.code, 1, shipped.stderr);
        assert.equal(shipped.stderr, `svc ship: ${run}: not shipped: Run ${run} cannot be taken: "${hold}" is a ` +
          'folder, which svc never makes there; remove it by hand, then try again\n' +
          'svc ship: 1 of 1 runs not sent (each is named above)\n');
        assert.ok(existsSync(hold), 'the folder is left as it was');
      } finally {
        rmSync(hold, { recursive: true, force: true });
      }
    });

  it('lets the run go when it is ended by a signal while it sends it', { timeout: 120_000 }, async () => {
    const run = await failedRun();
    const { ship, ended } = await shipHeld(run);
    try {
      ship.kill('SIGTERM');
      const gone = await within(ended, 60_000, 'svc ship to end');
      assert.equal(gone.signal, 'SIGTERM', gone.stderr);
      assert.ok(!existsSync(join(repo.repo, '.svc', 'runs', run, SHIP_HOLD)), 'the hold went with it');
    } finally {
      control.release();
    }
    const resumed = await svc(['start', '--resume', run, '--detach'], 'svc start --resume');
    assert.equal(resumed.code, 0, resumed.stderr);
  });
});
