// Which run actions the Control Plane refuses, and why, in one place: the action handlers throw these reasons, and
// run detail lists them so a client can disable a button with the reason the server would give.
import type { RunRow } from '../db/runs-store.ts';

export const RUN_ACTIONS = ['stop', 'resume', 'retry', 'verify', 'delete', 'answer'] as const;
export type RunAction = (typeof RUN_ACTIONS)[number];

const FINISHED = new Set(['succeeded', 'failed', 'stopped']);
const ALLOWED_FROM: Record<RunAction, ReadonlySet<string>> = {
  stop: new Set(['queued', 'running', 'blocked', 'stopping']),
  resume: new Set(['stopped', 'failed']),
  retry: FINISHED,
  verify: FINISHED,
  delete: FINISHED,
  answer: new Set(['blocked']),
};
// Actions that start a process in the run's repository: only a run this server recorded the folder of.
const NEEDS_LOCAL = new Set<RunAction>(['resume', 'retry', 'verify']);

/** The message of the 409 invalid_transition the server answers `action` with, or null when it would accept it. */
export function actionRefusal(row: RunRow, localSource: string, action: RunAction): string | null {
  const id = `${row.source}/${row.run}`;
  if (NEEDS_LOCAL.has(action)) {
    if (row.source !== localSource) return `Run ${id} belongs to another source; only stop and answer reach it`;
    if (!row.repo_path) {
      return `Run ${id} was not started here, so its repository is unknown: ` +
        `import its project (POST /v1/import) to ${action} it`;
    }
  }
  if (ALLOWED_FROM[action].has(row.status)) return null;
  if (action === 'delete') return `Run ${id} is still active; stop it before deleting`;
  return `Cannot ${action} run ${id}: it is ${row.status}`;
}

/** Every action's refusal for a run (null = the server would accept it, rate limits aside). */
export function actionRefusals(row: RunRow, localSource: string): Record<RunAction, string | null> {
  const out = {} as Record<RunAction, string | null>;
  for (const action of RUN_ACTIONS) out[action] = actionRefusal(row, localSource, action);
  return out;
}
