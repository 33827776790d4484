// The worker: one run by the plan its launcher wrote (run-plan.ts). What it reads itself chooses nothing the plan
// settles: the operator's grants again at start, only narrowed (plan-reuse.ts planNow, operatorAllowNow); keys, passed
// values, SVC_SHIP, OTEL_*, the gate's prices and day budgets, and its retry's wait (SVC_INFRA_RETRY_WAIT_S).
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { endChildOnExit, exitCodeOf, isChildOf, onEndSignal, openRunContext, type RunContext } from './run-context.ts';
import { unsandboxedWarning, writePlan, type RunPlan } from './run-plan.ts';
import { operatorAllowNow, planNow, readPlan } from './plan-reuse.ts';
import { cliCredentials, passedValues } from '../spawn/start.ts';
import { createWorktree } from './git.ts';
import { signalGroup } from './proc-group.ts';
import { identityOf } from '../proc-stat.ts';
import { runProvider } from './provider-phase.ts';
import { failureOf, type WorkerMode } from './run-state.ts';
import { TERMINAL, runFailure } from '../run-json.ts';
import { projectOf, runTree, worktreeDir } from './paths.ts';
import { plainEngineFolder } from './safe-fs.ts';
import type { RunSandbox } from './sandbox.ts';
import { POLL_MS } from './budget-pause.ts';
import { errorMessage, InfraError } from '../errors.ts';
import { redactSecrets } from './text.ts';
import { settingInt } from '../settings-registry.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { inSpan, OpenSpan, Tracer, traceSettings, withSpan } from '../trace.ts';

function prepareWorkdir(ctx: RunContext): void {
  const { state } = ctx;
  if (!state.worktree) return;
  const path = worktreeDir(state.repo_path, state.run);
  // git worktree add would follow a link at .svc/worktrees (its launcher checked too; the checkout may change since).
  plainEngineFolder(state.repo_path, 'worktrees').close();
  try {
    if (!existsSync(path)) createWorktree(state.repo_path, path, state.branch!, state.base_sha);
  } catch (err) {
    const message = `the run's checkout could not be made: ${errorMessage(err)}`;
    throw new InfraError(message, { beforeAgent: true, cause: err });
  }
  if (state.workdir !== path) ctx.update({ workdir: path });
}

/**
 * A run without a worktree works in its project, where its folder is (paths.ts runTree), whatever state.json says;
 * a worktree run's is set once its worktree is made (prepareWorkdir).
 */
function placeWorkdir(ctx: RunContext): void {
  if (ctx.state.worktree) return;
  const workdir = projectOf(ctx.dir);
  if (ctx.state.workdir !== workdir) ctx.update({ workdir });
}

const RESUMED_NOTE =
  'This run was resumed: your earlier changes are already in the working tree. Continue the task from there.';

let finishPhase: Promise<typeof import('./finish-phase.ts')> | null = null;

/**
 * The finish phase's modules (~5 ms of CPU), loaded once per worker, kept off the way to the agent (docs/bench.md):
 * first asked for in the turn after the agent's spawn, or before the automatic retry's wait. A svc installed between
 * the worker's start and then (its gate's start, its `git worktree add`) is what it loads. A failed load is the run's
 * failure where the finish needs it: after the agent ran.
 */
function loadFinish(): Promise<typeof import('./finish-phase.ts')> {
  if (finishPhase) return finishPhase;
  finishPhase = import('./finish-phase.ts').catch((err: unknown) => {
    const message = `svc could not load its finish phase: ${errorMessage(err)}`;
    throw new InfraError(message, { beforeAgent: false, cause: err });
  });
  // Unhandled until the finish asks for it, which a stopped run never does.
  finishPhase.catch(() => {});
  return finishPhase;
}

/** The provider and the finish (start, resume), or the checks again (verify), in the plan's sandbox. */
async function work(ctx: RunContext, plan: RunPlan, mode: WorkerMode): Promise<void> {
  const sandbox = await inSpan('svc.sandbox', { 'svc.sandbox': plan.sandbox.kind },
    () => openSandbox(ctx, plan, mode));
  // The gate's handlers load while the agent starts (gate.ts). One that cannot load has closed the gate: the agent,
  // left with no route out, is stopped and the run fails as svc's.
  let gateFailed: InfraError | null = null;
  const loadGate = (): Promise<void> | undefined => sandbox.gate?.load().catch((err: unknown) => {
    gateFailed = new InfraError(`the run's egress gate could not load: ${errorMessage(err)}`,
      { beforeAgent: false, cause: err });
    ctx.requestStop(gateFailed.message);
  });
  try {
    if (mode === 'verify') {
      await loadGate();
      if (gateFailed) throw gateFailed;
      return await (await loadFinish()).reverify(ctx, plan, sandbox);
    }
    prepareWorkdir(ctx);
    const spec = readFileSync(join(ctx.dir, 'spec.md'), 'utf8');
    const notes = mode === 'resume' ? [RESUMED_NOTE] : [];
    // runProvider runs up to the agent's spawn at once: the gate's handlers and the finish phase load in the turn
    // after it, while the agent works, not on its way.
    const gateLoaded = new Promise((resolve) => setImmediate(() => {
      resolve(loadGate());
      void loadFinish();
    }));
    // The gate's failure first, however the provider ended: its stop may be what ended or broke the attempt.
    const outcome = await runProvider(ctx, plan, spec, { notes, sandbox })
      .catch(async (err: unknown) => {
        await gateLoaded;
        throw gateFailed ?? err;
      });
    await gateLoaded;
    if (gateFailed) throw gateFailed;
    if (outcome.kind === 'stopped' || ctx.stopRequested()) return;
    const { finish } = await loadFinish();
    await finish(ctx, plan, sandbox, outcome);
  } finally {
    await sandbox.gate?.close();
  }
}

/** The plan's sandbox, its egress gate (the caller closes it) and the values of the names the plan passes. */
async function openSandbox(ctx: RunContext, plan: RunPlan, worker: WorkerMode): Promise<RunSandbox> {
  const mode = plan.sandbox;
  const passed = passedValues(plan.passed_env, ctx.env);
  const warning = unsandboxedWarning(mode);
  if (warning) ctx.note(warning);
  // A CLI's credentials as they are: an unsandboxed agent could read svc's environment anyway (docs/engine.md "The
  // agent's environment").
  if (mode.kind === 'none') return { mode, gate: null, env: { ...cliCredentials(ctx.env), ...passed } };
  const allow = operatorAllowNow(plan, ctx.env, (text) => ctx.note(text));
  // Imported here: an unsandboxed worker loads no egress gate, forwarding or server module, only gate/budgets.ts,
  // policy.ts and address.ts for its plan and budget pause (docs/gate.md).
  const resumed = worker !== 'start';
  const opened = import('./egress.ts').then((egress) => egress.openRunGate(ctx, plan.policy, allow, resumed));
  const gate = await opened.catch((err: unknown) => {
    const message = `the run's egress gate did not start: ${errorMessage(err)}`;
    throw new InfraError(message, { beforeAgent: true, cause: err });
  });
  // A credential under a CLI's prefix reaches a gated agent only as the placeholder of a key the gate holds, or named
  // by the operator (DESIGN §7a: the gate holds the model keys).
  const withheld = [...Object.keys(cliCredentials(ctx.env)).filter((name) => !(name in gate.env) && !(name in passed)),
    ...gate.withheld];
  if (withheld.length > 0) {
    ctx.note(`Not passed to the sandboxed agent: ${withheld.join(', ')}, credentials the gate cannot hold (give a ` +
      'model key under its API\'s own name, e.g. ANTHROPIC_API_KEY, or the CLI\'s own login in its provider home; ' +
      'the operator\'s "env" passes one on purpose)');
  }
  return { mode, gate, env: { ...passed, ...gate.env }, providerHome: plannedHomeKey(plan.provider_home) };
}

/** The plan's provider home key if shaped as providerHomeKey (sandbox.ts) makes one, else none: resolved again. */
function plannedHomeKey(key: unknown): string | undefined {
  return typeof key === 'string' && /^[a-z0-9_][a-z0-9._-]{0,99}$/.test(key) ? key : undefined;
}

/** The one automatic retry (docs/engine.md "Why a run failed"): an infra failure before the agent ran starts the run
 * over once, after SVC_INFRA_RETRY_WAIT_S. */
async function workRetryingInfra(ctx: RunContext, plan: RunPlan, mode: WorkerMode): Promise<void> {
  // Read first: a bad value met in the catch would replace the failure it was to retry.
  const waitMs = settingInt(ctx.env, 'SVC_INFRA_RETRY_WAIT_S') * 1000;
  try {
    return await work(ctx, plan, mode);
  } catch (err) {
    const retried = ctx.state.infra_retries ?? 0;
    if (!(err instanceof InfraError) || !err.beforeAgent || mode === 'verify' || retried >= 1) throw err;
    ctx.update({ infra_retries: retried + 1 });
    ctx.note(`retried automatically after ${err.message}`, { retry: 'automatic', after: failureOf(err) });
    // Loaded now, not after a wait of up to SVC_INFRA_RETRY_WAIT_S in which a newer svc may be installed.
    void loadFinish();
    const until = Date.now() + waitMs;
    while (Date.now() < until && !ctx.stopRequested()) await sleep(Math.min(POLL_MS, until - Date.now()));
    if (ctx.stopRequested()) return;
    return await work(ctx, plan, mode);
  }
}

/**
 * A run its worker found not queued: one stopping or stopped (a stop came before its worker started) ends stopped;
 * any other (failed by a stop that found a dead worker, or another worker's) is left as it is.
 */
async function notStarted(ctx: RunContext): Promise<number> {
  const { status, failure: earlier } = ctx.state;
  if (status === 'stopping' || status === 'stopped') {
    const failure = earlier?.class === 'stopped' ? earlier : runFailure('stopped', 'stopped before its worker started');
    const ended_at = ctx.state.ended_at ?? new Date().toISOString();
    ctx.setStatus('stopped', { ended_at, failure, child: null });
  }
  // The pid its launcher recorded for it is cleared last, as any worker's (RunContext close).
  await ctx.close();
  return 1;
}

/**
 * Runs in the detached worker process; the exit code is 0 when the run succeeded. Its caller ends the process on the
 * return (cli.ts); a SIGTERM, SIGINT or SIGHUP once the run's status is final ends it at once, or right after the
 * writes that follow that status.
 */
export async function executeRun(
  dir: string, env: NodeJS.ProcessEnv, mode: WorkerMode, say: (t: string) => void,
): Promise<number> {
  const ctx = openRunContext(dir, env, { say });
  // Set once the run's end, its child's and its plan are on disk: what is left is its last ship, its pid's clear (its
  // last write) and its trace.
  let ended: 'shipping' | 'shipped' | null = null;
  // A signal that came once the run's status was final, before the writes after it: the worker ends right after them.
  let endAfterWrites = false;
  // Nothing left to stop: the signal ends the worker at once. A ship cut short is sent by the next svc command.
  const endNow = () => ctx.exitNow(ended === 'shipped');
  const onSignal = (signal: NodeJS.Signals) => {
    if (ended !== null) return endNow();
    // A verify's run is final throughout: a signal stops its checks.
    if (mode !== 'verify' && TERMINAL.has(ctx.state.status)) return void (endAfterWrites = true);
    // A stopper that knows who asked (svc runs stop, the Control Plane) names them in state.json once the worker is
    // gone.
    ctx.requestStop(`a ${signal} to the run's worker`);
  };
  onEndSignal(onSignal);
  const tracer = new Tracer(traceSettings(env, 'svc-run'));
  // A child of the launcher's SVC_TRACEPARENT (as recorded), else its trace's root.
  const { trace_id, trace_parent, source, run, repo, provider, origin } = ctx.state;
  const runSpan = new OpenSpan(tracer, 'svc.run', trace_id ? { traceId: trace_id, spanId: trace_parent ?? '' } : null, {
    attributes: { 'svc.source': source, 'svc.run': run, 'svc.repo': repo, 'svc.provider': provider,
      'svc.origin': origin, 'svc.mode': mode },
  });
  // Its launcher made the run queued (a resume too, launch.ts): anything else now, something came first, and this
  // worker runs nothing, nor touches a child its state names. Its span still ends, as any run's worker's.
  if (mode !== 'verify' && ctx.state.status !== 'queued') {
    const code = await notStarted(ctx);
    runSpan.end('error', { 'svc.status': ctx.state.status, 'svc.verdict': ctx.state.verdict });
    await tracer.flush();
    return code;
  }
  endChildOnExit(ctx);
  const childOwner = isChildOf(ctx.state.run);
  let plan: RunPlan | null = null;
  try {
    plan = readPlan(dir, env, ctx.state.worktree);
    placeWorkdir(ctx);
    const used = planNow(plan, env, runTree(ctx.state), ctx.state.repo_path, (text) => ctx.note(text));
    if (mode !== 'verify') {
      // A resume's `running` says so, as its launcher's `queued` did: the time to an agent is a new run's only.
      const marks = mode === 'resume' ? { resumed: true } : {};
      ctx.setStatus('running', { ...identityOf(process.pid), ended_at: null, error: null, failure: null }, marks);
    } else {
      // As its launcher recorded it: a copy of state.json read before that write must not clear it (afterLastWorker).
      ctx.update({ verifier: identityOf(process.pid) });
    }
    await withSpan(tracer, runSpan.context, () => workRetryingInfra(ctx, used, mode));
    const stoppedBy = ctx.stoppedBy();
    if (stoppedBy !== null && !TERMINAL.has(ctx.state.status)) {
      const failure = runFailure('stopped', `stopped by ${stoppedBy}`);
      ctx.setStatus('stopped', { ended_at: new Date().toISOString(), question: null, child: null, failure });
    }
  } catch (err) {
    // A git or forge error quotes a remote as it was given, a token in it too: every reader of the run gets this.
    const message = redactSecrets(errorMessage(err));
    if (mode === 'verify') ctx.event('error', { message });
    else {
      const ended_at = new Date().toISOString();
      ctx.setStatus('failed', { error: message, failure: failureOf(err), ended_at, question: null });
    }
  } finally {
    if (ctx.state.child) signalGroup(ctx.state.child, 'SIGKILL', childOwner);
    ctx.update({ child: null });
    // An agent without a sandbox could have edited plan.json: the plan this worker read goes back, unchanged.
    if (plan) writePlan(dir, plan, ctx.state.worktree, env);
    ended = 'shipping';
    if (endAfterWrites) endNow();
    await ctx.close();
    ended = 'shipped';
    const { status, verdict } = ctx.state;
    runSpan.end(status === 'succeeded' ? 'ok' : 'error', { 'svc.status': status, 'svc.verdict': verdict });
    await tracer.flush();
  }
  return exitCodeOf(ctx.state);
}
