// Runs the provider until it is done: questions (SVC_QUESTION_FILE) block the run until an answer file arrives,
// and reaching the policy's max_usd blocks it asking whether to continue (DESIGN §6).
import { existsSync, rmSync } from 'node:fs';
import type { RunContext } from './run-context.ts';
import type { ResolvedProvider } from './providers.ts';
import { buildPrompt } from './prompt.ts';
import { spawnGroup, type GroupResult } from './spawn-group.ts';
import { createUsageParser, addUsage, type Usage } from './usage-parsers.ts';
import { takeAnswer, takeStopRequest } from './answers.ts';
import { oneLine } from './text.ts';
import { budgetQuestion, budgetReached, budgetStopMessage, extendsBudget } from './budget.ts';
import { writeNoFollow, readAgentFile } from './safe-fs.ts';
import { agentSandbox, gateEnv, protocolFiles, watchedLimits, type RunSandbox } from './sandbox.ts';
import type { RunLimits } from './policy-limits.ts';
import { untestedProviderWarning } from './provider-version-check.ts';

const LOG_LINE_CAP = 4000;
const LOG_EVENTS_CAP = 5000;
const PROVIDER_LOG_CAP = 4 * 1024 * 1024;
const POLL_MS = 150;

export type ProviderOutcome =
  | { kind: 'done' }
  | { kind: 'stopped' }
  | { kind: 'failed'; exitCode: number | null; error: string }
  // The budget was reached and not extended: the provider was ended, and the checks still run on what exists.
  | { kind: 'over-budget'; exitCode: number | null; error: string }
  // A policy limit ended the provider (time, processes, memory, disk, invocations): checks still run, verdict
  // not_verified.
  | { kind: 'limit'; exitCode: number | null; error: string };

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

// The question file is in a folder the agent writes: it may be a symbolic link to a secret, a FIFO or huge.
const QUESTION_CAP = 64 * 1024;

function readQuestion(path: string): string | null {
  if (!existsSync(path)) return null;
  const text = readAgentFile(path, QUESTION_CAP) ?? '';
  rmSync(path, { force: true });
  return oneLine(text, 2000) || 'The provider asked for input without saying what';
}

/** Polls for the answer (or a stop); returns null when the run is being stopped. */
async function waitForAnswer(ctx: RunContext): Promise<string | null> {
  for (;;) {
    if (takeStopRequest(ctx.env, ctx.state.source, ctx.state.run)) ctx.requestStop('stop requested');
    if (ctx.stopRequested()) return null;
    const answer = takeAnswer(ctx.env, ctx.state.source, ctx.state.run, ctx.dir);
    if (answer !== null) return answer;
    await sleep(POLL_MS);
  }
}

function block(ctx: RunContext, question: string): void {
  ctx.event('question', { question });
  ctx.setStatus('blocked', { question });
}

function unblock(ctx: RunContext, answer: string, answerFile: string): void {
  writeNoFollow(answerFile, answer);
  ctx.event('answer', { answer });
  ctx.setStatus('running', { question: null, answers: [...ctx.state.answers, answer] });
}

const LIMIT_KEYS = { time: 'provider_timeout_s or run_timeout_s', processes: 'processes', memory: 'memory_mb',
  disk: 'disk_mb' } as const;

function limitMessage(name: string, ended: NonNullable<GroupResult['endedBy']>): string {
  return `Provider ${name} was ended by svc: ${ended.message} (policy limits.${LIMIT_KEYS[ended.limit]})`;
}

type ProviderOptions = { maxUsd: number | null; notes: string[]; sandbox: RunSandbox; limits: RunLimits };

/** Runs the provider; meanwhile checks its version (without delaying its start) and logs a warning if untested. */
export async function runProvider(
  ctx: RunContext, provider: ResolvedProvider, spec: string, opts: ProviderOptions,
): Promise<ProviderOutcome> {
  const versionCheck = untestedProviderWarning(provider, ctx.env).then((warning) => {
    if (!warning) return;
    ctx.event('log', { stream: 'svc', text: warning });
    ctx.say(warning);
  }, () => undefined);
  try {
    return await runProviderAttempts(ctx, provider, spec, opts);
  } finally {
    await versionCheck;
  }
}

async function runProviderAttempts(
  ctx: RunContext, provider: ResolvedProvider, spec: string, opts: ProviderOptions,
): Promise<ProviderOutcome> {
  const { questionFile, answerFile, taskFile } = protocolFiles(ctx);
  let logEvents = 0;
  const output: Buffer[] = [];
  let outputSize = 0;
  if (ctx.state.budget_usd === null && opts.maxUsd !== null) ctx.update({ budget_usd: opts.maxUsd });
  const { limits } = opts;
  const runDeadline = Date.now() + limits.run_timeout_s * 1000;

  for (let attempt = 1; ; attempt++) {
    if (ctx.stopRequested()) return { kind: 'stopped' };
    if (attempt > limits.invocations) {
      return { kind: 'limit', exitCode: null, error: `Provider ${provider.name} was invoked ${limits.invocations} times ` +
        'in this run, the policy\'s limits.invocations: not invoked again' };
    }
    const remaining = runDeadline - Date.now();
    if (remaining <= 0) {
      return { kind: 'limit', exitCode: null, error: `The run reached limits.run_timeout_s (${limits.run_timeout_s} s)` };
    }
    const prompt = buildPrompt(spec, { answers: ctx.state.answers, notes: opts.notes });
    writeNoFollow(taskFile, prompt);
    rmSync(questionFile, { force: true });
    // Every invocation finds the latest answer at $SVC_ANSWER_FILE (the prompt has all of them); none before the first.
    const latest = ctx.state.answers.at(-1);
    if (latest === undefined) rmSync(answerFile, { force: true });
    else writeNoFollow(answerFile, latest);
    // An answer that arrives while the provider still runs is written to $SVC_ANSWER_FILE; one still unread there when
    // the provider exits (real CLIs exit after asking, as the prompt tells them) re-invokes it with the answer.
    let answeredWhileRunning = false;
    const parse = createUsageParser(provider.kind);
    let usage: Usage = { cost_usd: null, tokens_in: null, tokens_out: null };
    const { cost_usd, tokens_in, tokens_out } = ctx.state;
    const before: Usage = { cost_usd, tokens_in, tokens_out };
    // Set while the provider is paused on the budget question; overBudget once the answer was not "yes".
    let budgetAsked = false;
    let overBudget: string | null = null;
    const extra = {
      ...gateEnv(opts.sandbox),
      // Some CLIs (opencode) take their project folder from $PWD, not the working directory: it must name the worktree.
      PWD: ctx.state.workdir,
      SVC_TASK_FILE: taskFile,
      SVC_QUESTION_FILE: questionFile,
      SVC_ANSWER_FILE: answerFile,
      SVC_RUN_ID: ctx.state.run,
      SVC_SOURCE: ctx.state.source,
    };
    const argv = provider.argv.map((a) => (a === '{task_file}' ? taskFile : a));
    ctx.event('log', { stream: 'svc', text: `provider ${provider.name} started (attempt ${attempt})` });
    ctx.say(`provider ${provider.name} started (attempt ${attempt})`);
    const proc = spawnGroup(argv, {
      cwd: ctx.state.workdir,
      env: ctx.env,
      extra,
      sandbox: agentSandbox(ctx, opts.sandbox, argv[0]!, provider, limits),
      watch: watchedLimits(limits, ctx.state.workdir),
      timeoutMs: Math.min(limits.provider_timeout_s * 1000, remaining),
      ...(provider.stdinPrompt ? { stdin: prompt } : {}),
      maxBytes: 1,
      onLine(stream, line) {
        const inc = parse(line);
        if (inc) usage = addUsage(usage, inc);
        if (outputSize < PROVIDER_LOG_CAP) {
          const b = Buffer.from(`${line}\n`);
          output.push(b);
          outputSize += b.length;
        }
        if (logEvents < LOG_EVENTS_CAP) {
          logEvents++;
          ctx.event('log', { stream, text: line.length > LOG_LINE_CAP ? `${line.slice(0, LOG_LINE_CAP)}…` : line });
          if (logEvents === LOG_EVENTS_CAP) ctx.event('log', { stream: 'svc', text: 'further provider output is only in provider.log' });
        }
      },
    });
    ctx.setChild(proc.identity);
    let exited = false;
    const done = proc.done.then((r) => {
      exited = true;
      return r;
    });
    while (!exited) {
      if (takeStopRequest(ctx.env, ctx.state.source, ctx.state.run)) ctx.requestStop('stop requested');
      if (budgetAsked) {
        // A stop must reach a running process (a frozen one would sit out the SIGTERM grace period).
        if (ctx.stopRequested()) proc.resume();
        const answer = ctx.stopRequested() ? null : takeAnswer(ctx.env, ctx.state.source, ctx.state.run, ctx.dir);
        if (answer !== null) {
          budgetAsked = false;
          ctx.event('answer', { answer });
          const budget = ctx.state.budget_usd ?? 0;
          if (extendsBudget(answer)) {
            ctx.setStatus('running', { question: null, budget_usd: budget + (opts.maxUsd ?? budget) });
            proc.resume();
          } else {
            overBudget = budgetStopMessage(ctx.state.cost_usd ?? 0, budget);
            ctx.setStatus('running', { question: null });
            proc.kill();
          }
        }
        await Promise.race([done, sleep(POLL_MS)]);
        continue;
      }
      const spent = addUsage(before, usage);
      if (overBudget === null && ctx.state.status !== 'blocked' && budgetReached(spent.cost_usd, ctx.state.budget_usd)) {
        // Frozen first, then asked: the provider spends nothing more while the question waits.
        proc.pause();
        budgetAsked = true;
        ctx.update(spent);
        block(ctx, budgetQuestion(spent.cost_usd!, ctx.state.budget_usd!, opts.maxUsd));
        continue;
      }
      const question = ctx.state.status === 'blocked' ? null : readQuestion(questionFile);
      if (question) block(ctx, question);
      if (ctx.state.status === 'blocked' && !ctx.stopRequested()) {
        const answer = takeAnswer(ctx.env, ctx.state.source, ctx.state.run, ctx.dir);
        if (answer !== null) {
          unblock(ctx, answer, answerFile);
          answeredWhileRunning = true;
        }
      }
      await Promise.race([done, sleep(POLL_MS)]);
    }
    const result = await done;
    ctx.setChild(null);
    ctx.saveArtifact('provider.log', Buffer.concat(output));
    const total = addUsage(before, usage);
    ctx.update({ ...total, exit_code: result.code });
    if (usage.cost_usd !== null || usage.tokens_in !== null || usage.tokens_out !== null) {
      ctx.event('cost', { usd: usage.cost_usd, tokens_in: usage.tokens_in, tokens_out: usage.tokens_out, total_usd: total.cost_usd });
    }
    if (ctx.stopRequested()) return { kind: 'stopped' };
    if (overBudget !== null) return { kind: 'over-budget', exitCode: result.code, error: overBudget };
    if (result.endedBy) return { kind: 'limit', exitCode: result.code, error: limitMessage(provider.name, result.endedBy) };

    // A question written just before exit, or still unanswered when the provider exited: wait, then re-invoke.
    const late = ctx.state.status === 'blocked' ? null : readQuestion(questionFile);
    if (late) block(ctx, late);
    if (ctx.state.status === 'blocked') {
      const answer = await waitForAnswer(ctx);
      if (answer === null) return { kind: 'stopped' };
      unblock(ctx, answer, answerFile);
      continue;
    }
    if (answeredWhileRunning && existsSync(answerFile)) continue;

    const budget = ctx.state.budget_usd;
    if (budget !== null && budgetReached(total.cost_usd, budget)) {
      block(ctx, budgetQuestion(total.cost_usd!, budget, opts.maxUsd));
      const answer = await waitForAnswer(ctx);
      if (answer === null) return { kind: 'stopped' };
      ctx.event('answer', { answer });
      if (!extendsBudget(answer)) {
        ctx.setStatus('running', { question: null });
        return { kind: 'over-budget', exitCode: result.code, error: budgetStopMessage(total.cost_usd!, budget) };
      }
      ctx.setStatus('running', { question: null, budget_usd: budget + (opts.maxUsd ?? budget) });
    }
    if (result.code !== 0) {
      const how = result.signal ? `was killed by ${result.signal}` : `exited with code ${result.code}`;
      return { kind: 'failed', exitCode: result.code, error: `Provider ${provider.name} ${how}` };
    }
    return { kind: 'done' };
  }
}
