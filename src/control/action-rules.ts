// Which run actions the Control Plane refuses, and why: the action handlers throw these reasons, and run detail lists
// them so a client can disable a button with the reason the server would give.
import { ACTIVE_STATUSES, TERMINAL } from '../run-json.ts';
import type { RunRow } from '../db/run-types.ts';
import type { ControlDeps } from './deps.ts';
import { resolve } from 'node:path';
import { realOrNull } from '../spawn/tree.ts';
import { readEffectiveConfig } from './config-schema.ts';

const RUN_ACTIONS = ['stop', 'resume', 'retry', 'verify', 'delete', 'answer', 'pr'] as const;
export type RunAction = (typeof RUN_ACTIONS)[number];

const ALLOWED_FROM: Record<RunAction, ReadonlySet<string>> = {
  stop: new Set(ACTIVE_STATUSES),
  resume: new Set(['stopped', 'failed']),
  retry: TERMINAL,
  verify: TERMINAL,
  delete: TERMINAL,
  answer: new Set(['blocked']),
  // A --pr run that did its work but could not open its PR ends failed; the engine checks the rest (finish-phase.ts).
  pr: new Set(['failed']),
};
// Actions that start a process in the run's repository, which must be a registered project.
const NEEDS_LOCAL = new Set<RunAction>(['resume', 'retry', 'verify', 'pr']);

/** As far as its row tells (the engine checks the receipt and policy). */
function prRefusal(row: RunRow, id: string): string | null {
  if (row.pr_url) return `Run ${id} already has its pull request: ${row.pr_url}`;
  if (!row.branch?.startsWith('svc/')) return `Run ${id} was not started with --pr`;
  if (row.verdict !== 'verified' && row.verdict !== 'verified_with_gaps') {
    return `Run ${id} has verdict ${row.verdict ?? 'none'}: only verified work gets a pull request`;
  }
  return null;
}

/** The message of the 409 the server answers `action` with, or null when it would accept it. */
export function actionRefusal(deps: ControlDeps, row: RunRow, action: RunAction): string | null {
  const id = `${row.source}/${row.run}`;
  if (action === 'pr') {
    const problem = prRefusal(row, id);
    if (problem !== null) return problem;
  }
  if (NEEDS_LOCAL.has(action)) {
    if (row.source !== deps.settings.source) {
      return `Run ${id} belongs to another source; only stop and answer reach it`;
    }
    if (!row.repo_path) {
      return `Run ${id} was shipped without a registered project, so its repository is unknown: ` +
        `import its project (POST /v1/import) to ${action} it: svc control import DIR on the Control Plane's machine`;
    }
    if (!isRegisteredProject(deps, row.repo_path)) {
      return `Run ${id} is in a project that is no longer registered: ` +
        `import it again (POST /v1/import) to ${action} it: svc control import DIR on the Control Plane's machine`;
    }
  }
  if (ALLOWED_FROM[action].has(row.status)) return null;
  if (action === 'delete') return `Run ${id} is still active; stop it before deleting`;
  return `Cannot ${action} run ${id}: it is ${row.status}`;
}

export function actionRefusals(deps: ControlDeps, row: RunRow): Record<RunAction, string | null> {
  const out = {} as Record<RunAction, string | null>;
  for (const action of RUN_ACTIONS) out[action] = actionRefusal(deps, row, action);
  return out;
}

/**
 * Whether the Control Plane may start a process in `path`: a project imported or named by the `repos` setting, never
 * a path only a caller named (compared by real path).
 */
export function isRegisteredProject(deps: ControlDeps, path: string): boolean {
  const real = realOrNull(path);
  return real !== null && isProject(deps, real, realOrNull);
}

/** Whether `path`, as written (normalised, not resolved through links: it may be gone), is a project imported or
 * named by the `repos` setting: only then may a refusal say it does not exist, else a caller could probe the host. */
export function isNamedProject(deps: ControlDeps, path: string): boolean {
  return isProject(deps, resolve(path), resolve);
}

/** `at` is an imported project's path, or one of the `repos` setting's in the same `form`. */
function isProject(deps: ControlDeps, at: string, form: (path: string) => string | null): boolean {
  if (deps.stores.projects.has(at)) return true;
  const repos = readEffectiveConfig(deps.stores.config).config.repos as string[];
  return repos.some((p) => form(p) === at);
}
