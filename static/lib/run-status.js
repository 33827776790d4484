// @ts-check
// The run statuses of DESIGN §3 as the UI knows them: the one list in static/ (the server's is src/run-json.ts).

/** Every status, in the order a run can pass through them. */
export const RUN_STATUSES = /** @type {const} */ ([
  'queued', 'running', 'blocked', 'stopping', 'succeeded', 'failed', 'stopped',
]);

/** The statuses a run ends in. */
export const TERMINAL = new Set(['succeeded', 'failed', 'stopped']);

/** Why a run that did not succeed ended (the server's list is FAILURE_CLASSES in src/run-json.ts). */
export const FAILURE_CLASSES = /** @type {const} */ ([
  'infra', 'config', 'agent', 'checks', 'policy', 'budget', 'limit', 'stopped',
]);

/**
 * A run's failure as "class: reason", or '' when it has none or it is not well-formed (the run came from a server:
 * read by type alone).
 * @param {unknown} failure
 */
export function failureText(failure) {
  if (failure === null || typeof failure !== 'object') return '';
  const { class: cls, reason } = /** @type {Record<string, unknown>} */ (failure);
  if (!FAILURE_CLASSES.includes(/** @type {any} */ (cls))) return '';
  return typeof reason === 'string' && reason ? `${cls}: ${reason}` : String(cls);
}
