// The budget pause: a run at a budget freezes its provider and asks whether to go on (docs/engine.md).
import { setTimeout as sleep } from 'node:timers/promises';
import type { RunContext } from './run-context.ts';
import type { GroupRun } from './spawn-group.ts';
import { addUsage, type Usage } from './providers.ts';
import { behindSharedGate } from './run-state.ts';
import { isOperatorAnswer, type Answer } from './answers.ts';
import { budgetName, reachedBudget, runSpent, type Reached } from '../gate/budgets.ts';
import type { RunGate } from './egress.ts';

/** How often the running provider, its question and its answer are looked at. */
export const POLL_MS = 150;

/** One invocation's budget: its `usage` since the run's totals `before`; the budget `reached` while asked; the stop
 * message once the answer was no raise (`overBudget`); the run's `deadline`, which ends an unanswered question; the
 * policy's `maxUsd` and the run's metering `gate`. */
export interface BudgetWatch {
  before: Usage; usage: Usage; budgetAsked: boolean; reached: Reached | null; overBudget: string | null;
  deadline: number; maxUsd: number | null; gate: RunGate | null;
}

/** Polls for the answer (or a stop) until `deadline`; null when none came by then. */
export async function waitForAnswer(ctx: RunContext, deadline = Infinity): Promise<Answer | 'stopped' | null> {
  for (;;) {
    if (ctx.stopRequested()) return 'stopped';
    const answer = ctx.takeAnswer();
    if (answer !== null) return answer;
    if (Date.now() >= deadline) return null;
    await sleep(POLL_MS);
  }
}

export function block(ctx: RunContext, question: string): void {
  ctx.event('question', { question });
  ctx.setStatus('blocked', { question });
}

/** The budget the run has reached, if any (docs/gate.md "Budgets"): the metering gate's own check (what the run spent,
 * daily caps), else max_usd against what the run spent (runSpent; the agent's report kept in state.json first, so it
 * is current). */
function budgetNow(ctx: RunContext, a: BudgetWatch): Reached | null {
  const reported = addUsage(a.before, a.usage);
  const was = ctx.state.reported;
  const changed = (['cost_usd', 'tokens_in', 'tokens_out'] as const).some((k) => reported[k] !== (was?.[k] ?? null));
  if (changed) ctx.updateCost({ reported });
  if (a.gate) return a.gate.budgetReached();
  // A pod behind the shared gate: the gate holds max_usd on what it meters and refuses past it, and a raise answered
  // here could not reach it, so the run container never asks (docs/gate.md "A pod's max_usd").
  if (behindSharedGate(ctx.env)) return null;
  const limits = { run: ctx.state.budget_usd, repoDay: null, serverDay: null };
  return reachedBudget({ run: runSpent(ctx.state), repoDay: 0, serverDay: 0 }, limits);
}

/** An answer to the budget question (docs/engine.md "Blocked runs and the budget"): a new budget in dollars ("raise to
 * $1", "raise it to 2.50", "$5", "5"), "yes" for another step of the same size, or anything else: stop. */
function readBudgetAnswer(answer: string): { raiseTo: number } | 'more' | 'stop' {
  const words = /^\s*(?:(?:raise|increase|set)\s+(?:it\s+|the\s+budget\s+)?to\s+)?/.source;
  const amount = new RegExp(`${words}\\$?\\s*(\\d{1,9}(?:\\.\\d{1,6})?)\\s*\\$?\\s*$`, 'i').exec(answer);
  if (amount) return { raiseTo: Number(amount[1]) };
  return /^\s*(y|yes|continue|ok)\b/i.test(answer) ? 'more' : 'stop';
}

/** What "yes" adds to the budget reached: another max_usd for the run's own, else the budget itself. */
const stepOf = (r: Reached, maxUsd: number | null): number => (r.kind === 'run' ? maxUsd ?? r.limit : r.limit);

/**
 * What the run itself spent, as its questions and errors say it: a daily cap is reached by the day's runs together
 * (the repository's, or every repository's on this machine), whose spending is not this run's to tell the people it
 * asks (a question goes to the run's origin); the run's own budget by what the run spent.
 */
function ownSpent(ctx: RunContext, r: Reached): number {
  return r.kind === 'run' ? r.spent : ctx.state.metered?.cost_usd ?? 0;
}

function budgetQuestion(ctx: RunContext, r: Reached, maxUsd: number | null): string {
  // A daily cap counts metered calls only; the run's own budget what the run spent (runSpent).
  const metered = ctx.state.metered?.cost_usd ?? null;
  const byGate = r.kind !== 'run' || (metered !== null && metered >= r.spent);
  const how = byGate ? 'metered by the gate' : 'as the agent reported';
  const step = stepOf(r, maxUsd);
  const spent = ownSpent(ctx, r).toFixed(2);
  if (r.uncountable !== undefined) {
    return `${budgetName(r, ctx.state.repo)} cannot be kept: ${r.uncountable}, so the gate cannot count what the run ` +
      `spent (it has counted $${spent}). Answer "raise to $${(r.limit + step).toFixed(2)}" or any ` +
      `amount, or "yes" for another $${step.toFixed(2)}, to go on; anything else to stop.`;
  }
  return `Budget of $${r.limit.toFixed(2)} reached — raise it to? (${budgetName(r, ctx.state.repo)}; the run has ` +
    `spent $${spent}, ${how}.) Answer "raise to $${(r.limit + step).toFixed(2)}" or any amount, "yes" ` +
    `for another $${step.toFixed(2)}, anything else to stop.`;
}

/** answerBudget's result for a raise of a daily cap that was not the operator's: the run asked again. */
const ASKED_AGAIN = Symbol('asked again');

/** The one rule for an answer to the budget question `a.reached`, wherever the run waits (provider paused, or
 * exited): an amount raises the budget reached to it, "yes" by another max_usd (else by the budget itself), and
 * returns null — a daily cap only by an operator's answer, else the run asks again; anything else, or no answer
 * within the run's time (null), returns the run's error. */
function answerBudget(ctx: RunContext, answer: Answer | null, a: BudgetWatch): string | null | typeof ASKED_AGAIN {
  const r = a.reached!;
  const name = budgetName(r, ctx.state.repo);
  if (answer === null) {
    ctx.setStatus('running', { question: null });
    return `${name} was reached and not raised within the run's time (limits.run_timeout_s)`;
  }
  ctx.event('answer', { answer: answer.text, by: answer.by });
  const read = readBudgetAnswer(answer.text);
  if (read === 'stop') {
    ctx.setStatus('running', { question: null });
    if (r.kind !== 'run') return `Stopped at ${name}: the run spent $${ownSpent(ctx, r).toFixed(2)}`;
    return `Stopped at the max_usd budget: spent $${r.spent.toFixed(2)} of $${r.limit.toFixed(2)}`;
  }
  if (r.kind !== 'run' && !isOperatorAnswer(answer.by)) {
    block(ctx, `Budget of $${r.limit.toFixed(2)} reached — only the operator can raise ${name} (svc answer on the ` +
      `run's machine, or the Control Plane); the answer from ${answer.by} did not. The run has spent ` +
      `$${ownSpent(ctx, r).toFixed(2)} and waits for the operator; answer "stop" to end it.`);
    return ASKED_AGAIN;
  }
  const to = read === 'more' ? r.limit + stepOf(r, a.maxUsd) : read.raiseTo;
  const caps = ctx.state.budget_caps ?? {};
  const raised = r.kind === 'run' ? { budget_usd: to }
    : { budget_caps: { ...caps, [r.kind === 'repository-day' ? 'repo_day' : 'server_day']: to } };
  ctx.event('budget', { kind: r.kind, from: r.limit, to, by: answer.by });
  a.gate?.acceptUncounted();
  ctx.setStatus('running', { question: null, ...raised });
  return null;
}

/** While paused on the budget question: a raise thaws the provider, a stop (or the run's end) ends it. */
export function pollBudgetAnswer(ctx: RunContext, proc: GroupRun, a: BudgetWatch): void {
  // A stop must reach a running process (a frozen one would sit out the SIGTERM grace period).
  if (ctx.stopRequested()) proc.resume();
  const answer = ctx.stopRequested() ? null : ctx.takeAnswer();
  if (answer === null && Date.now() < a.deadline) return;
  const read = answerBudget(ctx, answer, a);
  if (read === ASKED_AGAIN) return;
  a.budgetAsked = false;
  a.overBudget = read;
  proc.resume();
  if (a.overBudget !== null) proc.kill();
}

/** Freezes the provider and asks once the run reaches a budget (true if it asked): a CLI the gate refuses would
 * otherwise spend its retries meanwhile. */
export function askBudgetIfReached(ctx: RunContext, proc: GroupRun, a: BudgetWatch): boolean {
  if (a.overBudget !== null || ctx.state.status === 'blocked') return false;
  const reached = budgetNow(ctx, a);
  if (!reached) return false;
  proc.pause();
  a.budgetAsked = true;
  a.reached = reached;
  block(ctx, budgetQuestion(ctx, reached, a.maxUsd));
  return true;
}

/** The stop message of an invocation that ended over budget: answered so, or ended by svc while frozen on the question
 * (one that exited by itself as the question was asked still waits for the answer: budgetAtExit). */
export function overBudgetAtExit(ctx: RunContext, a: BudgetWatch, endedBySvc: boolean): string | null {
  if (a.budgetAsked && a.overBudget === null && endedBySvc) a.overBudget = answerBudget(ctx, null, a) as string;
  return a.overBudget;
}

/** A budget reached by the time the provider exited: asks and waits for the answer until the run's time ends. */
export async function budgetAtExit(
  ctx: RunContext, a: BudgetWatch, exitCode: number | null,
): Promise<{ kind: 'stopped' } | { kind: 'over-budget'; exitCode: number | null; error: string } | 'raised' | null> {
  // Asked already if the provider exited as the question was asked; else asked now, if a budget is reached.
  a.reached = a.budgetAsked ? a.reached : budgetNow(ctx, a);
  if (!a.reached) return null;
  if (ctx.state.status !== 'blocked') block(ctx, budgetQuestion(ctx, a.reached, a.maxUsd));
  for (;;) {
    const answer = await waitForAnswer(ctx, a.deadline);
    if (answer === 'stopped') return { kind: 'stopped' };
    const read = answerBudget(ctx, answer, a);
    if (read === ASKED_AGAIN) continue;
    return read === null ? 'raised' : { kind: 'over-budget', exitCode, error: read };
  }
}
