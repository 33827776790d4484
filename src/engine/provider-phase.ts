// Runs the provider until it is done; its questions block the run until answered (docs/engine.md).
import { setTimeout as sleep } from 'node:timers/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { RunContext } from './run-context.ts';
import { spawnGroup, type GroupResult, type GroupRun } from './spawn-group.ts';
import {
  adapterOf, addUsage, createOutputReader, gateEnvFor, modelSilent, NO_USAGE, pointedAtGate, type OutputReader,
  type ResolvedProvider,
} from './providers.ts';
import { oneLine } from '../one-line.ts';
import { redactSecrets } from './text.ts';
import {
  AgentFolderError, clearAgentName, makePlainPath, replaceAgentFile, replaceNoFollowIn, UnsafePathError, withDir,
  writeNoFollow,
} from './safe-fs.ts';
import { readAgentFile, readPlainIn, skipReason } from './plain-tree.ts';
import {
  agentSandbox, protocolFiles, releaseProviderHome, watchedLimits, type ProtocolFiles, type RunSandbox,
} from './sandbox.ts';
import type { RunPlan } from './run-plan.ts';
import type { RunLimits } from './policy.ts';
import { createVersionProbe, TESTED_CLIS, untestedWarning } from './cli-version.ts';
import {
  nextInvocation, recordInvocation, recordQuestion, recordSightings, resumeRefused, type Invocation,
} from './provider-session.ts';
import { errorMessage, InfraError } from '../errors.ts';
import { behindSharedGate } from './run-state.ts';
import { apiKeyChosen } from '../spawn/provider-home.ts';
import type { Answer } from './answers.ts';
import {
  askBudgetIfReached, block, budgetAtExit, overBudgetAtExit, pollBudgetAnswer, waitForAnswer, POLL_MS, type BudgetWatch,
} from './budget-pause.ts';
import type { RunGate } from './egress.ts';
import { inSpan } from '../trace.ts';

const LOG_LINE_CAP = 4000;
const LOG_EVENTS_CAP = 5000;
const PROVIDER_LOG_CAP = 4 * 1024 * 1024;

export type ProviderOutcome =
  | { kind: 'done' }
  | { kind: 'stopped' }
  // config: the CLI itself said it has no credentials (its adapter's notLoggedIn): running it again will not help.
  | { kind: 'failed'; exitCode: number | null; error: string; config?: true }
  // The budget was reached and not extended: the provider was ended, and the checks still run on what exists.
  | { kind: 'over-budget'; exitCode: number | null; error: string }
  // A policy limit ended the provider (time, processes, memory, disk, invocations): checks run, verdict not_verified.
  | { kind: 'limit'; exitCode: number | null; error: string };

// The question file is in a folder the agent writes: it may be a symbolic link to a secret, a FIFO or huge.
const QUESTION_CAP = 64 * 1024;

/** The provider's own question (not the budget's), unless the run is blocked already: taken (the file is removed),
 * kept for a summary of the conversation, then asked. While it runs, an empty file is one a shell's `>` created and has
 * not yet written: left for the next look; once it exited, a question without words. */
function takeQuestion(ctx: RunContext, path: string, running: boolean): void {
  if (ctx.state.status === 'blocked' || !existsSync(path)) return;
  const text = readAgentFile(path, QUESTION_CAP) ?? '';
  if (running && text.trim() === '') return;
  clearAgentName(path);
  // Kept in state.json, which the signer's copy and the Control Plane get: no secret it quotes (redactSecrets).
  const question = oneLine(redactSecrets(text), 2000) || 'The provider asked for input without saying what';
  recordQuestion(ctx, question);
  block(ctx, question);
}

/** Hands the answer over; one the agent kept a folder in the way of is recorded in `a.agentFailed`, and not given. */
function unblock(ctx: RunContext, { text, by }: Answer, answerFile: string, a: Attempt): void {
  try {
    replaceAgentFile(answerFile, text);
  } catch (err) {
    if (!(err instanceof AgentFolderError)) throw err;
    a.agentFailed = err.message;
  }
  ctx.event('answer', { answer: text, by });
  ctx.setStatus('running', { question: null, answers: [...ctx.state.answers, text] });
}

const LIMIT_KEYS = { time: 'provider_timeout_s or run_timeout_s', processes: 'processes', memory: 'memory_mb',
  disk: 'disk_mb' } as const;

/** The run's warning when its built-in CLI's version is outside the tested range; null otherwise (or unknown). */
async function untestedProviderWarning(provider: ResolvedProvider, env: NodeJS.ProcessEnv) {
  if (provider.kind !== provider.name || !TESTED_CLIS[provider.name]) return null;
  const version = await createVersionProbe(env)(provider.argv[0]!, provider.name);
  return untestedWarning(provider.name, version);
}

/** Invokes the plan's provider until an invocation ends the provider phase; its version is checked meanwhile. */
export async function runProvider(
  ctx: RunContext, plan: RunPlan, spec: string, opts: { notes: string[]; sandbox: RunSandbox },
): Promise<ProviderOutcome> {
  const { provider, policy: { max_usd: maxUsd, limits } } = plan;
  const versionCheck = untestedProviderWarning(provider, ctx.env).then((w) => w && ctx.note(w), () => undefined);
  try {
    const files = protocolFiles(ctx);
    const log = createOutputLog(ctx);
    if (ctx.state.budget_usd === null && maxUsd !== null) ctx.update({ budget_usd: maxUsd });
    const deadline = Date.now() + limits.run_timeout_s * 1000;
    let refused: string | null = null;
    for (let number = 1; ; number++) {
      if (ctx.stopRequested()) return { kind: 'stopped' };
      const a = newAttempt(ctx, plan, opts.sandbox.gate, number, deadline);
      const limited = limitBeforeAttempt(provider.name, a, limits);
      if (limited) return limited;
      const inv = nextInvocation(ctx, provider, spec, opts.notes, refused);
      const result = await inSpan('svc.provider', { 'svc.provider': provider.name, 'svc.invocation': number },
        () => watchAttempt(ctx, startAttempt(ctx, plan, opts, files, inv, a, log), a, files));
      recordAttempt(ctx, result, a, log);
      if (result.sandboxFailed) {
        // bwrap exited before running the provider: svc's infrastructure failed, not the agent.
        throw new InfraError(`the agent sandbox did not start: bwrap exited with code ${result.code} before running ` +
          `provider ${provider.name} (its output is in provider.log)`, { beforeAgent: number === 1 });
      }
      if (ctx.state.model_answered === undefined) ctx.update({ model_answered: false });
      const next = await outcomeAfterExit(ctx, provider, files, a, result, inv);
      refused = next === 'refused' ? `${provider.name} could not resume its session (exit ${result.code})` : null;
      if (next !== 'again' && next !== 'refused') return next;
    }
  } finally {
    releaseProviderHome(ctx, opts.sandbox, provider);
    await versionCheck;
  }
}

/** Provider output kept across attempts: provider.log (capped) and the run's log events (capped). */
function createOutputLog(ctx: RunContext) {
  const chunks: Buffer[] = [];
  let size = 0;
  let events = 0;
  return {
    add(stream: 'stdout' | 'stderr', line: string): void {
      if (size < PROVIDER_LOG_CAP) {
        const b = Buffer.from(`${line}\n`);
        chunks.push(b);
        size += b.length;
      }
      if (events++ >= LOG_EVENTS_CAP) return;
      // Scrubbed before it is cut short: cut first, a secret across the cut would keep its first half.
      const text = line.length > LOG_LINE_CAP ? `${redactSecrets(line).slice(0, LOG_LINE_CAP)}…` : line;
      ctx.event('log', { stream, text });
      if (events === LOG_EVENTS_CAP) {
        ctx.event('log', { stream: 'svc', text: 'further provider output is only in provider.log' });
      }
    },
    bytes: (): Buffer => Buffer.concat(chunks),
  };
}
type OutputLog = ReturnType<typeof createOutputLog>;

/** One invocation's account; its `deadline` is the end of limits.run_timeout_s. */
interface Attempt extends BudgetWatch {
  number: number;
  /** An answer reached $SVC_ANSWER_FILE while the provider ran (see outcomeAfterExit). */
  answeredWhileRunning: boolean;
  /** Its output as read so far: usage, login records, what it said of its session. */
  output: OutputReader;
  /** The CLI's last record of its own on its credentials said it has none (its adapter's notLoggedIn.said). */
  loggedOut: boolean;
  /** No invocation of the run's provider ran before this one (state.json's model_answered is unset). */
  first: boolean;
  /** What the agent did that kept svc from handing it its answer (AgentFolderError): the run fails as the agent's. */
  agentFailed: string | null;
}

function newAttempt(
  ctx: RunContext, { provider, policy }: RunPlan, gate: RunGate | null, number: number, deadline: number,
): Attempt {
  // What the agent reported so far (a state.json from before `reported` existed has it in the cost fields).
  const { cost_usd, tokens_in, tokens_out, reported } = ctx.state;
  const before = reported === undefined ? { cost_usd, tokens_in, tokens_out } : reported ?? NO_USAGE;
  return {
    number, deadline, before, usage: NO_USAGE, budgetAsked: false, reached: null,
    overBudget: null, maxUsd: policy.max_usd, gate, answeredWhileRunning: false, loggedOut: false, agentFailed: null,
    output: createOutputReader(provider.kind),
    first: ctx.state.model_answered === undefined,
  };
}

/** limits.invocations and limits.run_timeout_s, checked before each invocation; null while both allow another. */
function limitBeforeAttempt(name: string, a: Attempt, limits: RunLimits): ProviderOutcome | null {
  if (a.number > limits.invocations) {
    return { kind: 'limit', exitCode: null, error: `Provider ${name} was invoked ${limits.invocations} times ` +
      'in this run, the policy\'s limits.invocations: not invoked again' };
  }
  if (a.deadline <= Date.now()) {
    return { kind: 'limit', exitCode: null, error: `The run reached limits.run_timeout_s (${limits.run_timeout_s} s)` };
  }
  return null;
}

/** Starts one invocation in the sandbox, the prompt in $SVC_TASK_FILE and the question and answer files reset first. */
function startAttempt(
  ctx: RunContext, { provider, policy: { limits } }: RunPlan, opts: { notes: string[]; sandbox: RunSandbox },
  files: ProtocolFiles, inv: Invocation, a: Attempt, log: OutputLog,
): GroupRun {
  const { taskFile, questionFile, answerFile } = files;
  writeNoFollow(taskFile, inv.prompt);
  clearAgentName(questionFile);
  // Every invocation finds the latest answer at $SVC_ANSWER_FILE (the prompt, or the session it continues, has all of
  // them); none before the first.
  const latest = ctx.state.answers.at(-1);
  if (latest === undefined) clearAgentName(answerFile);
  else replaceAgentFile(answerFile, latest);
  // Only the run gate's own base URL goes into the argv, never one svc was given (a job pod's names its credential).
  const gate = opts.sandbox.gate;
  const gateEnv = gate?.env ?? {};
  // A job pod's CLI is behind the shared gate its environment names (no run gate): it needs the same variables, and
  // the settings its home (the pod's own) gets.
  const pod = !gate && behindSharedGate(ctx.env);
  if (pod) for (const left of settleInPodHome(provider.kind, ctx.env)) ctx.note(left);
  const behind = gate ? gateEnv : pod ? ctx.env : null;
  const extra = { ...opts.sandbox.env, ...behind ? gateEnvFor(provider.kind, behind) : {},
    SVC_TASK_FILE: taskFile, SVC_QUESTION_FILE: questionFile, SVC_ANSWER_FILE: answerFile, SVC_RUN_ID: ctx.state.run,
    SVC_SOURCE: ctx.state.source };
  const argv = pointedAtGate(provider.kind, inv.argv, gateEnv).map((arg) => (arg === '{task_file}' ? taskFile : arg));
  const how = inv.way === 'session' ? `, resuming its session ${inv.id}`
    : inv.way === 'summary' ? `, a fresh session with the earlier conversation summarised: ${inv.why}` : '';
  // provider, attempt and resumed as fields too, so the run page's timeline never parses the text.
  ctx.note(`provider ${provider.name} started (attempt ${a.number}${how})`,
    { provider: provider.name, attempt: a.number, ...inv.way === 'fresh' ? {} : { resumed: inv.way } });
  recordInvocation(ctx, provider, inv);
  const sandbox = agentSandbox(ctx, opts.sandbox, argv[0]!, provider, limits);
  const proc = spawnGroup(argv, {
    cwd: ctx.state.workdir, env: ctx.env, extra, sandbox,
    watch: watchedLimits(limits, ctx.state.workdir, files, sandbox),
    onInit: (init) => ctx.setChild({ ...proc.identity, init }),
    timeoutMs: Math.min(limits.provider_timeout_s * 1000, a.deadline - Date.now()),
    ...(provider.stdinPrompt ? { stdin: inv.prompt } : {}),
    maxBytes: 1,
    onLine(stream, line) {
      const { usage: inc, login: record } = a.output.line(stream, line);
      if (inc) a.usage = addUsage(a.usage, inc);
      // Kept in state.json at once: a later invocation, a resume or an infra retry of the run sees it.
      if (record === 'answered' || (inc && !modelSilent(inc))) {
        if (ctx.state.model_answered !== true) ctx.update({ model_answered: true });
      } else if (record !== null) a.loggedOut = record === 'logged-out';
      log.add(stream, line);
    },
  });
  ctx.setChild(proc.identity);
  return proc;
}

/** A question the running provider wrote blocks the run; an answer that arrives is handed over while it runs. */
function pollQuestion(ctx: RunContext, proc: GroupRun, a: Attempt, files: ProtocolFiles): void {
  takeQuestion(ctx, files.questionFile, true);
  if (ctx.state.status !== 'blocked' || ctx.stopRequested()) return;
  const answer = ctx.takeAnswer();
  if (answer === null) return;
  unblock(ctx, answer, files.answerFile, a);
  a.answeredWhileRunning = true;
  if (a.agentFailed !== null) proc.kill();
}

async function watchAttempt(ctx: RunContext, proc: GroupRun, a: Attempt, files: ProtocolFiles): Promise<GroupResult> {
  let exited = false;
  const done = proc.done.finally(() => (exited = true));
  while (!exited) {
    if (a.budgetAsked) pollBudgetAnswer(ctx, proc, a);
    else if (askBudgetIfReached(ctx, proc, a)) continue;
    else pollQuestion(ctx, proc, a, files);
    await Promise.race([done, sleep(POLL_MS)]);
  }
  return done;
}

function recordAttempt(ctx: RunContext, result: GroupResult, a: Attempt, log: OutputLog): void {
  ctx.setChild(null);
  ctx.saveArtifact('provider.log', log.bytes());
  recordSightings(ctx, a.output.session);
  const total = addUsage(a.before, a.usage);
  ctx.updateCost({ reported: total }, { exit_code: result.code });
  const { usage } = a;
  if (usage.cost_usd !== null || usage.tokens_in !== null || usage.tokens_out !== null) {
    ctx.event('cost', { usd: usage.cost_usd, tokens_in: usage.tokens_in, tokens_out: usage.tokens_out,
      total_usd: total.cost_usd });
  }
}

/** The agent's failure to let svc hand it its answer (`a.agentFailed`), or null. */
function answerRefused(name: string, a: Attempt, code: number | null): ProviderOutcome | null {
  return a.agentFailed === null ? null : { kind: 'failed', exitCode: code, error: `Provider ${name} ${a.agentFailed}` };
}

/** An invocation's exit: an outcome, 'again' to invoke once more, 'refused' to do so in a fresh CLI session. */
async function outcomeAfterExit(
  ctx: RunContext, provider: ResolvedProvider, files: ProtocolFiles, a: Attempt, result: GroupResult, inv: Invocation,
): Promise<ProviderOutcome | 'again' | 'refused'> {
  if (ctx.stopRequested()) return { kind: 'stopped' };
  const refusedAnswer = answerRefused(provider.name, a, result.code);
  if (refusedAnswer) return refusedAnswer;
  const over = overBudgetAtExit(ctx, a, Boolean(result.endedBy));
  if (over !== null) return { kind: 'over-budget', exitCode: result.code, error: over };
  if (result.endedBy) {
    const { message, limit } = result.endedBy;
    const error = `Provider ${provider.name} was ended by svc: ${message} (policy limits.${LIMIT_KEYS[limit]})`;
    return { kind: 'limit', exitCode: result.code, error };
  }

  // A question written just before exit, or still unanswered when the provider exited: wait, then re-invoke. A budget
  // question still open when it exited is the budget's to answer (below), not a question to re-invoke it with.
  takeQuestion(ctx, files.questionFile, false);
  if (ctx.state.status === 'blocked' && !a.budgetAsked) {
    const answer = await waitForAnswer(ctx);
    if (answer === null || answer === 'stopped') return { kind: 'stopped' };
    unblock(ctx, answer, files.answerFile, a);
    return answerRefused(provider.name, a, result.code) ?? 'again';
  }
  // An answer that arrived while the provider still ran and is still unread there when it exited (real CLIs exit
  // after asking, as the prompt tells them) re-invokes it with the answer.
  if (a.answeredWhileRunning && existsSync(files.answerFile)) return 'again';

  // Reached a budget by the time it exited: ask whether to go on. A CLI the gate refused may have given up: once the
  // budget is raised it is invoked again (on the same session where its provider resumes one).
  const budget = await budgetAtExit(ctx, a, result.code);
  if (budget === 'raised' && result.code !== 0) return 'again';
  if (budget !== null && budget !== 'raised') return budget;
  if (resumeRefused(ctx, inv, result.code, a.usage)) return 'refused';
  if (result.code !== 0) {
    // The CLI's own record with its own exit code (never a killed one's), while the run's model never answered
    // (a gate's metered call is a 2xx answer): docs/engine.md "Why a run failed".
    const login = adapterOf(provider.kind).notLoggedIn;
    const answered = ctx.state.model_answered === true || (ctx.state.metered?.calls ?? 0) > 0;
    const said = login?.exitCode === result.code && (login.said ? a.loggedOut : a.first);
    if (login && said && !result.signal && !answered) {
      const error = `Provider ${provider.name} is not logged in: ${login.fix}`;
      return { kind: 'failed', exitCode: result.code, error, config: true };
    }
    const how = result.signal ? `was killed by ${result.signal}` : `exited with code ${result.code}`;
    return { kind: 'failed', exitCode: result.code, error: `Provider ${provider.name} ${how}` };
  }
  return { kind: 'done' };
}

/** A settings file larger than this is not one a CLI wrote. */
const MAX_SETTINGS = 1024 * 1024;

/**
 * A job pod's CLI runs unsandboxed with HOME the pod's own empty volume and the shared gate in its environment
 * (docs/gate.md "Job pods"): its home gets what a run gate's copy of its settings does, gemini's auth choice, and
 * codex's base URL, which it takes from its config alone (the pod's names the job's gate credential, kept off the
 * argv). A config codex already has is left as it is. From its first attempt on the home is the agent's: no link in
 * it is followed, and whatever it placed where a folder or file is written is left; returns what was, for the log.
 */
function settleInPodHome(provider: string, env: Readonly<Record<string, string | undefined>>): string[] {
  const home = env.HOME;
  if (!home) return [];
  const left: string[] = [];
  const settle = (root: string, parts: string[], name: string, text: (old: string | null) => string | null): void => {
    const shown = join(root, ...parts, name);
    try {
      withDir(makePlainPath(root, parts), (dir) => {
        const found = readPlainIn(dir, name, MAX_SETTINGS);
        if (typeof found === 'string' && found !== 'missing') {
          return void left.push(`${shown} left as it is: it ${skipReason(found, MAX_SETTINGS)}`);
        }
        const next = text(typeof found === 'string' ? null : found.toString('utf8'));
        if (next !== null) replaceNoFollowIn(dir, name, next, 0o600);
      });
    } catch (err) {
      // What the agent placed (a link, a file for a folder, a folder it made unreadable) is its own doing, not svc's.
      if (!(err instanceof UnsafePathError) && typeof (err as NodeJS.ErrnoException).code !== 'string') throw err;
      left.push(`${shown} not written: ${errorMessage(err)}`);
    }
  };
  if (provider === 'gemini' && env.GOOGLE_GEMINI_BASE_URL) settle(home, ['.gemini'], 'settings.json', apiKeyChosen);
  const base = env.OPENAI_BASE_URL;
  if (provider === 'codex' && base) {
    // A JSON string is a TOML basic string.
    const config = (old: string | null) => (old === null ? `openai_base_url = ${JSON.stringify(base)}\n` : null);
    if (env.CODEX_HOME) settle(env.CODEX_HOME, [], 'config.toml', config);
    else settle(home, ['.codex'], 'config.toml', config);
  }
  return left;
}
