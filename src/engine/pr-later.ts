// `svc start --open-pr RUN` (docs/engine.md, "Opening the pull request later"): the PR of a verified --pr run that
// could not open it then, with the receipt svc signed as it is, under the run's plan; nothing is re-run.
// Must not: open a PR for a run whose verdict the policy does not accept, whose receipt is not svc's, or twice.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { openRunContext } from './run-context.ts';
import { readPlan } from './run-plan.ts';
import { verifyReceipt, keyRingOf, type Receipt } from './receipt.ts';
import { loadOrCreateSigningKey } from '../keys.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { maybeOpenPr, prWithheld } from './finish-phase.ts';
import { checkPrPossible } from './pr.ts';
import { artifactsDir } from './paths.ts';
import type { RunState } from './run-state.ts';
import { ConflictError, FailedError } from '../errors.ts';

/** Why `state` cannot get its pull request now, or null when it can (the receipt and policy are checked after). */
function prLaterRefusal(state: RunState): string | null {
  const id = `${state.source}/${state.run}`;
  if (!state.pr) return `Run ${id} was not started with --pr`;
  if (state.pr_url) return `Run ${id} already has its pull request: ${state.pr_url}`;
  if (state.status !== 'failed') return `Run ${id} is ${state.status}; only a failed run without its PR gets one`;
  if (state.failed_check) return `Run ${id} failed its required check "${state.failed_check}"`;
  return null;
}

/** The run's receipt, provided svc's own key signed it and it is about this run. */
function ownReceipt(dir: string, state: RunState, env: NodeJS.ProcessEnv): Receipt {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(join(artifactsDir(dir), 'receipt.json'), 'utf8'));
  } catch {
    throw new ConflictError(`Run ${state.source}/${state.run} has no receipt: verify it first`);
  }
  const key = loadOrCreateSigningKey(svcHomeOf(env));
  const check = verifyReceipt(value, keyRingOf([key.publicKey.export({ type: 'spki', format: 'pem' }).toString()]));
  if (!check.ok || !check.receipt) throw new ConflictError(`The run's receipt does not verify: ${check.message}`);
  if (check.receipt.run !== state.run || check.receipt.source !== state.source) {
    throw new ConflictError(`The receipt in run ${state.source}/${state.run} is about another run`);
  }
  return check.receipt;
}

/** Opens the run's pull request; its final state (succeeded with pr_url), or a typed error saying why not. */
export async function openPrLater(dir: string, env: NodeJS.ProcessEnv, say: (t: string) => void): Promise<RunState> {
  const ctx = openRunContext(dir, env, { ship: env.SVC_SHIP !== '0', say });
  try {
    const plan = readPlan(dir);
    const refusal = prLaterRefusal(ctx.state);
    if (refusal !== null) throw new ConflictError(refusal);
    const receipt = ownReceipt(dir, ctx.state, env);
    const withheld = prWithheld(plan, receipt);
    if (withheld !== null) throw new ConflictError(`Run ${ctx.state.source}/${ctx.state.run}: ${withheld}`);
    await checkPrPossible(plan.push_target!, env);
    ctx.event('log', { stream: 'svc', text: 'opening the pull request the run could not open before' });
    const error = await maybeOpenPr(ctx, plan, receipt);
    if (error !== null) {
      ctx.update({ error });
      throw new FailedError(error);
    }
    ctx.setStatus('succeeded', { error: null, failure: null });
    return ctx.state;
  } finally {
    await ctx.close();
  }
}
