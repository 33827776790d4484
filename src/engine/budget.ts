// The max_usd budget (DESIGN §6): checked on every cost line while the provider runs, and again when
// it exits (some CLIs report cost only at the end). Reaching it blocks the run with one question; "yes" extends it.

export function budgetReached(spent: number | null, budget: number | null): boolean {
  return budget !== null && spent !== null && spent >= budget;
}

export function budgetQuestion(spent: number, budget: number, maxUsd: number | null): string {
  return `The run has spent $${spent.toFixed(2)}, reaching its budget of $${budget.toFixed(2)} (max_usd). Continue? ` +
    `Answer "yes" to allow another $${(maxUsd ?? budget).toFixed(2)}, anything else to stop.`;
}

/**
 * The one rule for an answer to the budget question, wherever the run waits for it (provider paused, or exited): "yes"
 * raises the budget by max_usd (else by the budget itself); anything else ends the run with the stop message.
 */
export function answerBudget(
  answer: string, spent: number, budget: number, maxUsd: number | null,
): { budget_usd: number } | { stop: string } {
  if (/^\s*(y|yes|continue|ok)\b/i.test(answer)) return { budget_usd: budget + (maxUsd ?? budget) };
  // The run's error; the checks still run.
  return { stop: `Stopped at the max_usd budget: spent $${spent.toFixed(2)} of $${budget.toFixed(2)}` };
}
