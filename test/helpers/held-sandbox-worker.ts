// A worker's stand-in for the dead-worker stop tests: in run folder argv[2], as the worker does, it records itself
// (ending its child on exit as the worker does) and starts a sandboxed agent (`sleep <argv[3]>`) recorded as the
// run's child, holds the sandbox in its setup, says `{"init":…,"outer":…}` once its state.json names the init, then
// waits to be killed. A line on its stdin makes it exit instead, once its bwrap is gone and the init has left bwrap's
// group (the init's setup goes on): before it could see bwrap's exit, as a worker that crashed then.
import { setTimeout as sleep } from 'node:timers/promises';
import { endChildOnExit, openRunContext } from '../../src/engine/run-context.ts';
import { identityOf, statFields } from '../../src/proc-stat.ts';
import { spawnGroup } from '../../src/engine/spawn-group.ts';
import { DEFAULT_LIMITS } from '../../src/spawn/limits.ts';
import { probeSandbox } from '../../src/spawn/sandbox-mode.ts';
import { holdInSetup } from './held-sandbox.ts';

const [dir, tag] = process.argv.slice(2) as [string, string];
const ctx = openRunContext(dir, process.env, { ship: false });
ctx.update({ status: 'running', ...identityOf(process.pid) });
endChildOnExit(ctx);
// The agent works in the run folder (which the test removes), as in a checkout of its own.
const cwd = dir;
const plan = { readable: [], writable: [cwd], protect: [], hidden: [], protocolReadable: [], protocolWritable: [],
  home: null, cwd, limits: DEFAULT_LIMITS, network: 'none' as const };
const sandbox = { bwrap: probeSandbox(process.env).bwrap ?? 'bwrap', plan };
// Started as provider-phase.ts starts an agent: SVC_RUN_ID in its environment, recorded with its init once reported.
const held = await holdInSetup(() => {
  const run = spawnGroup(['/bin/sleep', tag], {
    cwd, env: { PATH: process.env.PATH }, extra: { SVC_RUN_ID: ctx.state.run }, maxBytes: 1024, timeoutMs: 60_000,
    sandbox, onInit: (init) => ctx.setChild({ ...run.identity, init }),
  });
  ctx.setChild(run.identity);
  return run;
});
if (!held) throw new Error('no sandbox was held in its setup');
// Until the worker has recorded the init (a stop reads it from state.json), within a minute however loaded the machine:
// past that it is broken, and this process ends saying so rather than leaving its test waiting for ever.
for (const deadline = Date.now() + 60_000; ctx.state.child?.init?.pid !== held.init; await sleep(10)) {
  if (Date.now() > deadline) throw new Error(`the sandbox's init ${held.init} was never recorded`);
}
process.stdout.write(JSON.stringify({ init: held.init, outer: held.run.identity.pid, recorded: ctx.state.child }) +
  '\n');
setInterval(() => undefined, 60_000);
process.stdin.once('data', () => {
  const outer = held.run.identity.pid;
  process.kill(outer, 'SIGKILL');
  // Waited for without yielding: this process must not see bwrap's exit (spawn-group.ts would end the init then).
  for (const deadline = Date.now() + 5_000; statFields(outer)?.[0] !== 'Z' && Date.now() < deadline;);
  process.kill(held.init, 'SIGCONT');
  for (const deadline = Date.now() + 5_000; statFields(held.init)?.[2] === String(outer) && Date.now() < deadline;);
  process.exit(0);
});
