// Path (b)'s walk, measured as path (a)'s is (test/trigger/webhook-walk.test.ts), in the two processes a run takes:
// the src/ modules a function of which `svc start --brief` (the launcher) and its worker run, under V8's precise
// coverage (NODE_V8_COVERAGE, which the worker inherits), until the run's receipt is signed and both have exited,
// less the shared leaves, the sandbox's internals, the egress gate and what only traces. A module's own body is not
// counted: each process evaluates every module it imports. The doc's numbered list must be exactly what runs. Both
// processes also record the order of their calls (walk-order.ts, through NODE_OPTIONS), launcher first: the walk
// doubles back only where docs/architecture.md "Doubling back" says it does.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EDIT_SCRIPT, makeRepo, svcEnv } from './fixtures.ts';
import { withoutSecrets } from '../../src/spawn/start.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';
import { assertWalk, counts, ranInChildren, ROOT, walkToCheck } from '../helpers/walk-coverage.ts';
import {
  assertDoublingsBack, callsIn, pidsIn, probesOf, RECORD_ORDER, recordInto,
} from '../helpers/walk-order.ts';

/** Today's count, which docs/architecture.md records: issue 31's bar of thirty. */
const BAR = 30;

/**
 * Where the walk doubles back today (docs/architecture.md "Doubling back" counts them): it holds the walk from doubling
 * back anywhere else; each is to leave this list as the code moves to where the walk already is.
 */
const DOUBLING_BACK = [
  'src/engine/providers.ts', 'src/spawn/start.ts',
];

/** Run by the launcher or the worker, not counted (docs/architecture.md names each group under the walk). */
const NOT_COUNTED = [
  // shared leaves
  'src/errors.ts', 'src/safe-json.ts', 'src/json-value.ts', 'src/untrusted.ts', 'src/one-line.ts', 'src/log.ts',
  'src/atomic-write.ts', 'src/canonical-json.ts', 'src/proc-stat.ts', 'src/run-json.ts', 'src/settings-registry.ts',
  'src/cli/io.ts', 'src/spawn/tree.ts', 'src/spawn/svc-paths.ts', 'src/engine/ids.ts', 'src/engine/paths.ts', 'src/engine/text.ts',
  'src/engine/safe-fs.ts', 'src/engine/plain-tree.ts',
  // the sandbox's internals, which every sandboxed child passes: bwrap's argv and command, the view, limits, seccomp,
  // cgroup
  'src/spawn/agent-plan.ts', 'src/spawn/bwrap-argv.ts', 'src/spawn/sandbox-command.ts', 'src/spawn/never-writable.ts',
  'src/spawn/provider-home.ts', 'src/spawn/limits.ts', 'src/spawn/seccomp.ts', 'src/spawn/memory-cgroup.ts',
  // the egress gate, a server of its own (docs/gate.md); engine/egress.ts, counted, is the run's side of it
  'src/gate/',
  // what only traces
  'src/trace.ts',
];

describe('path (b): svc start --brief to a signed receipt', () => {
  const skip = bwrapWorks ? false : 'bwrap cannot run on this host (the walk is a sandboxed run)';
  it(`reads through the ${BAR} files docs/architecture.md lists, doubling back where it says`, { skip }, async (t) => {
    const documented = walkToCheck('b', BAR, NOT_COUNTED);
    const repo = makeRepo({
      policy: { checks: [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'] }] }, providers: { fake: EDIT_SCRIPT },
    });
    const coverage = mkdtempSync(join(tmpdir(), 'svc-walk-'));
    const order = mkdtempSync(join(tmpdir(), 'svc-walk-order-'));
    recordInto(order, probesOf(counts(NOT_COUNTED)));
    t.after(() => {
      repo.cleanup();
      rmSync(coverage, { recursive: true, force: true });
      rmSync(order, { recursive: true, force: true });
    });
    // No Control Plane (svcEnv: SVC_SHIP=0): shipping is the run's report, not its way to a receipt. No secret in
    // the environment (a GITHUB_TOKEN of the shell): the launcher would re-execute to drop it, and its first image
    // would write a coverage file of its own.
    const argv = [`${ROOT}src/cli.ts`, 'start', '--brief', 'append fixed', '--provider', 'fake'];
    const env = withoutSecrets(svcEnv(repo, {
      NODE_V8_COVERAGE: coverage, WALK_ORDER_DIR: order, NODE_OPTIONS: RECORD_ORDER,
    }));
    const child = spawn(process.execPath, argv, { cwd: repo.repo, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const status = await new Promise((resolve) => child.on('close', resolve));
    assert.equal(status, 0, out);
    const { run } = JSON.parse(out.split('\n').find((l) => l.startsWith('{'))!) as { run: string };
    const receipt = JSON.parse(readFileSync(join(repo.repo, '.svc', 'runs', run, 'artifacts', 'receipt.json'), 'utf8'));
    assert.equal(receipt.verdict, 'verified');
    assert.ok(receipt.signature, 'the receipt is signed');
    // The launcher and the worker, each file written as its process exits: in the foreground the launcher returns
    // only once the worker has exited (start.ts), so at the launcher's close both are there, and only they.
    const ran = ranInChildren(coverage, 2);
    assertWalk('b', ran, NOT_COUNTED, documented);
    const worker = pidsIn(order).filter((pid) => pid !== child.pid);
    assert.equal(worker.length, 1, 'the launcher and its worker recorded their calls');
    assertDoublingsBack('b', callsIn(order, [child.pid!, ...worker]), counts(NOT_COUNTED), DOUBLING_BACK);
  });
});
